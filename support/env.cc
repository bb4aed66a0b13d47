#include "support/env.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>

#include "support/log.h"

extern char** environ;

namespace kolo {
namespace {

constexpr double kUnbounded = std::numeric_limits<double>::infinity();
constexpr double kMaxRanks = 1 << 24;     // what the world's parser takes
constexpr double kMaxCount = 9007199254740992.0;  // 2^53: every integer below is exact as a double
constexpr double kMaxTime = 1e9;          // 31 years in seconds, 11 days in ms: below int64 ns

// Table rows by kind. `dflt` is what readers get when the variable is unset; where that is
// "" (nothing), `unset` says what kolo does instead ("" = nothing: shown as "unset").
EnvVar text(const char* name, const char* unset, const char* help) { return {name, EnvKind::kText, "", unset, help}; }
EnvVar path(const char* name, const char* dflt, const char* unset, const char* help) {
  return {name, EnvKind::kPath, dflt, unset, help};
}
EnvVar integer(const char* name, const char* dflt, const char* unset, double min, double max, const char* help) {
  return {name, EnvKind::kInt, dflt, unset, help, "", false, min, max};
}
EnvVar number(const char* name, const char* dflt, double min, double max, const char* help) {
  return {name, EnvKind::kNumber, dflt, "", help, "", false, min, max};
}
EnvVar seconds(const char* name, const char* dflt, const char* help) { return {name, EnvKind::kSeconds, dflt, "", help}; }
EnvVar flag(const char* name, const char* dflt, const char* help) { return {name, EnvKind::kBool, dflt, "", help}; }
EnvVar one_of(const char* name, const char* dflt, const char* choices, const char* help, bool any_case = false) {
  return {name, EnvKind::kEnum, dflt, "", help, choices, any_case};
}
EnvVar list_of(const char* name, const char* unset, const char* choices, const char* help, bool any_case = false) {
  return {name, EnvKind::kEnumList, "", unset, help, choices, any_case};
}

// KOLO_* names that kolo's own scripts and test harnesses read, not the library: set in
// the ranks' environment by them, they are not typos.
bool read_by_scripts(const std::string& name) {
  static const char* const kNames[] = {"KOLO_GPU_CHECK_DEVICE", "KOLO_COMMIT", "KOLO_PYTHON",  // tools/gpu-check.sh
                                       "KOLO_FUZZ_JOBS"};                                     // tools/fuzz.sh
  if (name.rfind("KOLO_TEST_", 0) == 0) return true;  // tests/multiproc's workers
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

}  // namespace

const std::vector<EnvVar>& env_table() {
  static const std::vector<EnvVar> table = {
      // Logging, waits.
      // Any case, as NCCL_DEBUG and NCCL_DEBUG_SUBSYS (the NCCL drop-in maps NCCL_DEBUG here).
      one_of("KOLO_DEBUG", "WARN", "NONE,WARN,INFO,TRACE", "log level, on stderr", /*any_case=*/true),
      list_of("KOLO_DEBUG_SUBSYS", "all", "INIT,BOOTSTRAP,TRANSPORT,PLAN,EXEC,ENGINE,TOPO", "subsystems to log",
              /*any_case=*/true),
      integer("KOLO_TRACE_CALLS", "1024", "", 0, 1 << 20,
              "calls each communicator's flight recorder keeps (0 = off): dumped on a failure, on SIGUSR1 and on "
              "kolo_comm_dump where KOLO_TRACE_DIR is set; kolo-trace reads the dumps"),
      path("KOLO_TRACE_DIR", "", "no dumps",
           "folder for the flight recorder's dumps, one file per rank and communicator (kolorun sets one of its own "
           "and prints kolo-trace's summary when a job fails)"),
      seconds("KOLO_TIMEOUT", "300",
              "seconds any wait may last before it fails with KOLO_ERR_TIMEOUT (above 1e9, inf too, counts as 1e9)"),
      // Planning and transports. The names must match the planner's and the transport
      // table's (EnvTable unit tests check both).
      one_of("KOLO_ALGO", "auto", "auto,ring,direct,tree,halving_doubling,hierarchical,one_shot,two_shot",
             "force an algorithm where it applies; auto: the planner's cost model chooses"),
      list_of("KOLO_TRANSPORTS", "shm,tcp,ucx (shm,ucx,tcp on hosts with an RDMA device; shm,tcp where kolo was built without UCX)",
              "shm,tcp,ucx",
              "transports allowed, preferred first: shm within a host, tcp anywhere, ucx anywhere where kolo was "
              "built with UCX (shm,ucx: UCX between hosts; transport/README.md). A pair uses the first transport in "
              "the lower rank's list that both ends allow and that reaches the other (tcp,shm makes ranks of one host "
              "talk over TCP)"),
      integer("KOLO_CHUNK_BYTES", "1048576", "", 1024, kUnbounded, "pipeline chunk of ring algorithms, in bytes"),
      flag("KOLO_NET_CALIBRATE", "1",
           "0 = plan with the NICs' nominal speeds instead of measuring the network between hosts when a "
           "communicator spanning hosts is made"),
      // Shared memory and sockets.
      integer("KOLO_SHM_CHUNK_BYTES", "1048576", "", 4096, 1 << 30,
              "size of each rank's shared-memory staging slot: the pipeline chunk of one-host collectives"),
      integer("KOLO_SHM_STREAM_BYTES", "0", "", 0, kUnbounded,
              "one-host collectives write outputs at least this large with non-temporal stores, past the caches "
              "(0 = never: slower than ordinary stores on the machines measured so far)"),
      flag("KOLO_SHM_SINGLE_COPY", "1",
           "1 = large shared-memory messages are copied once with process_vm_readv where the kernel permits; "
           "0 = through the shared ring"),
      flag("KOLO_LAZY_CONNECT", "1",
           "1 = a TCP link is made when a call first needs it (ring and tree neighbours, a send's peer); "
           "0 = every pair at start-up. The same on every rank"),
      text("KOLO_SOCKET_IFNAME", "the interface that reaches the store", "network interface for data connections (e.g. eth0)"),
      // Devices.
      one_of("KOLO_DEVICE", "auto", "auto,cuda,emulated,none",
             "device runtime: auto (cuda when a GPU and driver are present, else none), cuda, emulated (a CPU "
             "device for tests and trying the device API) or none"),
      one_of("KOLO_BACKEND", "kolo", "kolo,nccl",
             "who runs device-buffer collectives: kolo (its own device path) or nccl (NCCL, loaded with dlopen; "
             "needs the cuda device runtime)"),
      flag("KOLO_DEVICE_IPC", "1",
           "1 = device collectives of ranks on one host run as kernels over each other's memory (CUDA IPC); 0 = "
           "staged through pinned host memory"),
      flag("KOLO_DEVICE_FLAGGED", "1",
           "1 = small device collectives of ranks on one host (allreduce, reduce, broadcast, allgather(v), "
           "reduce_scatter, alltoall, and allreduce compressed to fp16, bf16 or fp8; up to 64 KB per peer) run as "
           "one kernel that writes into the peers' memory with a flag beside the data, where the device model says "
           "it costs less; 0 = copy, barrier and reduce kernels through the slots"),
      flag("KOLO_DEVICE_AUTO_REGISTER", "1",
           "1 = large device collectives of ranks on one host read the peers' buffers in place without "
           "kolo_mem_register: each allocation is exported (CUDA IPC) the first time a call uses it and stays mapped "
           "by the peers; 0 = only registered buffers are read in place, others go through the slots"),
      one_of("KOLO_DEVICE_BARRIER", "auto", "auto,kernel,host",
             "how ranks of one host wait for each other between the steps of a device collective: kernel (a GPU "
             "thread spins on the peers' flags), host (the stream waits on the device for a word that a kolo thread "
             "writes once the peers arrived, the GPU left to them; every size stays on the peers' memory), auto (host "
             "where ranks in different processes time-slice one GPU, not under one MPS server, and there calls below "
             "1 MB are staged through host memory)"),
      flag("KOLO_EMULATED_P2P", "1",
           "emulated device only: 0 = processes cannot map each other's device memory, like GPUs without peer "
           "access (tests)"),
      path("KOLO_NCCL_LIBRARY", "libnccl.so.2", "",
           "the NCCL library KOLO_BACKEND=nccl loads (a name the dynamic loader finds, or a path); kolo's own "
           "drop-in is refused there"),
      // Topology.
      path("KOLO_TOPO_FILE", "", "discover",
           "read the topology from this kolo JSON or NCCL topology XML file instead of discovering it"),
      path("KOLO_TOPO_DUMP_FILE", "", "", "write the discovered topology to this JSON file"),
      // The Horovod-style runtime (engine/runtime).
      number("KOLO_FUSION_THRESHOLD", "134217728", 0, kMaxCount, "runtime: tensor fusion buffer bytes (0 = no fusion)"),
      number("KOLO_CYCLE_TIME", "1", 0, kMaxTime,
             "runtime: the longest wait between negotiation cycles, in milliseconds; work wakes the thread at once, "
             "and a rank holding names a peer has not submitted yet waits inside the next cycle, so the peer's "
             "submission completes it"),
      path("KOLO_TIMELINE", "", "", "runtime: write a Chrome trace-event timeline (rank 0) to this file"),
      number("KOLO_CACHE_CAPACITY", "1024", 0, kMaxCount,
             "runtime: names the response cache holds (0 = negotiate every name through the coordinator)"),
      number("KOLO_STALL_CHECK_TIME", "60", 0, kMaxTime,
             "runtime: seconds before the ranks missing a named tensor are logged (0 = off)"),
      number("KOLO_STALL_SHUTDOWN_TIME", "0", 0, kMaxTime,
             "runtime: seconds of stall after which every pending request fails (0 = never)"),
      flag("KOLO_AUTOTUNE", "0", "runtime: 1 = tune the fusion threshold and cycle time from measured throughput"),
      // The world, outside kolorun too (kolo_init), and the store's security.
      integer("KOLO_RANK", "", "", 0, kMaxRanks - 1,
              "this process's rank: set by kolorun, or by you with KOLO_SIZE and KOLO_ADDR (else Open MPI's, "
              "MPICH's or Slurm's variables, else one process)"),
      integer("KOLO_SIZE", "", "", 1, kMaxRanks, "number of ranks in the world"),
      integer("KOLO_LOCAL_RANK", "", "", 0, kMaxRanks - 1,
              "rank among the processes on this host, set by kolorun (informational: kolo derives it)"),
      integer("KOLO_LOCAL_SIZE", "", "", 1, kMaxRanks,
              "number of processes on this host, set by kolorun (informational: kolo derives it)"),
      text("KOLO_ADDR", "set by kolorun; under Slurm the step's first node, port 20000 + (job id x 31 + step id) % 20000",
           "host:port of the rendezvous store; rank 0 hosts it where kolorun does not"),
      text("KOLO_SECRET", "made by kolorun",
           "per-job secret, at least 32 hex digits, that authenticates every store message (e.g. openssl rand -hex 32)"),
      one_of("KOLO_LAUNCHER", "", "kolorun", "set by kolorun: the launcher hosts the store, not rank 0"),
      one_of("KOLO_ELASTIC", "0", "0,1,join",
             "1 = an elastic job: kolo_init keeps the job's store open so that kolo_comm_rebuild can make the next "
             "epoch from the ranks left and the workers that join (kolorun --min-np/--max-np sets it); join = a "
             "worker started into the running job, let in at its next rebuild (docs/elastic.md)"),
      text("KOLO_ELASTIC_HOST", "",
           "set by kolorun in elastic jobs: this rank's host as kolorun names it, which kolorun marks in the job's "
           "store when its discovery script stops listing it, so that the rank leaves at the next commit "
           "(kolo_comm_leaving)"),
      seconds("KOLO_ELASTIC_JOIN_TIMEOUT", "600",
              "seconds a joining worker (KOLO_ELASTIC=join) waits for the running job to let it in"),
      flag("KOLO_INSECURE", "0", "1 = run the store unauthenticated (trusted networks only)"),
      path("KOLO_SECRET_FILE", "", "$HOME/.kolo/secret",
           "under Slurm without KOLO_SECRET: the user's secret (made on first use, mode 0600, on the home directory the "
           "nodes share); each step's secret is an HMAC of its job and step ids keyed by it"),
      text("KOLO_HOSTID", "hostname + boot id + pid and network namespaces",
           "this process's host identity, to emulate several hosts on one machine (tests)"),
      // Read by the Python package (api/python/kolo/_capi.py), not by libkolo.
      path("KOLO_LIBRARY", "", "the libkolo.so beside the package, else the system's",
           "the libkolo.so the Python package kolo loads"),
  };
  return table;
}

namespace {

const EnvVar* find_var(const char* name) {
  for (const EnvVar& var : env_table()) {
    if (std::strcmp(var.name, name) == 0) return &var;
  }
  return nullptr;
}

// "a,b,c" -> {"a", "b", "c"}; "" -> {""}.
std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(',', start);
    parts.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

bool same_name(const std::string& a, const std::string& b, bool any_case) {
  if (!any_case) return a == b;
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::toupper(static_cast<unsigned char>(x)) == std::toupper(static_cast<unsigned char>(y));
         });
}

// The table's spelling of `name`, or "" when it is none of the choices.
std::string choice_of(const EnvVar& var, const std::string& name) {
  for (const std::string& choice : split(var.choices)) {
    if (same_name(choice, name, var.any_case)) return choice;
  }
  return "";
}

// Bounds as written in help and errors: integers in full (no 1e+09), inf as "inf".
std::string format_number(double value) {
  char buffer[64];
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == std::floor(value) && std::fabs(value) < 1e16) {
    std::snprintf(buffer, sizeof(buffer), "%.0f", value);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%g", value);
  }
  return buffer;
}

std::string range(const char* what, const EnvVar& var) {
  if (std::isinf(var.max)) return str_cat(what, " >= ", format_number(var.min));
  return str_cat(what, " in [", format_number(var.min), ", ", format_number(var.max), "]");
}

// Whole text parsed, as the readers parse it.
bool parse_int(const std::string& text, long long* value) {
  errno = 0;
  char* end = nullptr;
  *value = std::strtoll(text.c_str(), &end, 10);
  return errno == 0 && end != text.c_str() && *end == '\0';
}

bool parse_double(const std::string& text, double* value) {
  errno = 0;
  char* end = nullptr;
  *value = std::strtod(text.c_str(), &end);
  return errno == 0 && end != text.c_str() && *end == '\0';
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string env_string(const char* name) {
  const EnvVar* var = find_var(name);
  assert(var != nullptr && "environment variable missing from env_table()");
  const char* value = std::getenv(name);
  if (value == nullptr || value[0] == '\0') return var != nullptr ? var->default_value : "";
  if (var == nullptr || !var->any_case) return value;
  // Readers compare with the table's spelling; a name that is none stays as given
  // (env_check_all reports it).
  std::string canonical;
  for (const std::string& part : split(value)) {
    const std::string choice = choice_of(*var, part);
    canonical += (canonical.empty() ? "" : ",") + (choice.empty() ? part : choice);
  }
  return canonical;
}

bool env_is_set(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0';
}

std::vector<std::string> env_list(const char* name) {
  const std::string value = env_string(name);
  return value.empty() ? std::vector<std::string>() : split(value);
}

Result<double> env_double(const char* name) {
  const std::string text = env_string(name);
  if (text.empty()) return error(Code::kInvalidArgument, name, " is not set");
  if (const EnvVar* var = find_var(name)) KOLO_TRY(env_check(*var, text));
  double value = 0;
  if (!parse_double(text, &value)) return error(Code::kInvalidArgument, name, "='", text, "' is not a number");
  return value;
}

Result<long long> env_int(const char* name) {
  const std::string text = env_string(name);
  if (text.empty()) return error(Code::kInvalidArgument, name, " is not set");
  if (const EnvVar* var = find_var(name)) KOLO_TRY(env_check(*var, text));
  long long value = 0;
  if (!parse_int(text, &value)) return error(Code::kInvalidArgument, name, "='", text, "' is not an integer");
  return value;
}

double env_timeout_seconds() {
  // Silent on a bad value: it is read before every wait, and env_check_all has failed
  // the communicator's init with the one error about it.
  Result<double> value = env_double("KOLO_TIMEOUT");
  // Deadlines count in nanoseconds of int64: a longer wait (inf, 1e30) would overflow the
  // conversion (undefined behaviour). 1e9 s is 31 years: as good as never.
  if (!value.ok()) return 300.0;
  return std::min(value.value(), kMaxTime);
}

std::string env_allowed(const EnvVar& var) {
  std::string names;
  const std::vector<std::string> choices = split(var.choices);
  for (size_t i = 0; i < choices.size(); ++i) {
    const bool last = i + 1 == choices.size();
    names += (i == 0 ? "" : last && var.kind == EnvKind::kEnum ? " or " : ", ") + choices[i];
  }
  if (var.any_case) names += " (any case)";
  switch (var.kind) {
    case EnvKind::kText: return "any text";
    case EnvKind::kPath: return "a path";
    case EnvKind::kInt: return range("an integer", var);
    case EnvKind::kNumber: return range("a number", var);
    case EnvKind::kSeconds: return "a number of seconds > 0";
    case EnvKind::kBool: return "0 or 1";
    case EnvKind::kEnum: return names;
    case EnvKind::kEnumList: return "a comma-separated list of " + names;
  }
  return "?";
}

Status env_check(const EnvVar& var, const std::string& value) {
  if (value.empty()) return Status();  // unset: the default
  bool good = true;
  std::string detail;
  long long integer = 0;
  double number = 0;
  switch (var.kind) {
    case EnvKind::kText:
    case EnvKind::kPath: break;
    case EnvKind::kInt:
      good = parse_int(value, &integer) && integer >= var.min && integer <= var.max;
      break;
    case EnvKind::kNumber:
      good = parse_double(value, &number) && number >= var.min && number <= var.max;  // NaN fails
      break;
    case EnvKind::kSeconds: good = parse_double(value, &number) && number > 0; break;
    case EnvKind::kBool: good = value == "0" || value == "1"; break;
    case EnvKind::kEnum: good = !choice_of(var, value).empty(); break;
    case EnvKind::kEnumList:
      for (const std::string& part : split(value)) {
        if (!choice_of(var, part).empty()) continue;
        good = false;
        detail = str_cat(" ('", part, "' is not one of them)");
        break;
      }
      break;
  }
  if (good) return Status();
  return error(Code::kInvalidArgument, var.name, "='", value, "' is not ", env_allowed(var), detail);
}

std::vector<std::string> env_unknown_variables() {
  std::vector<std::string> lines;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const std::string name = text.substr(0, text.find('='));
    if (name.rfind("KOLO_", 0) != 0 || find_var(name.c_str()) != nullptr || read_by_scripts(name)) continue;
    const EnvVar* closest = nullptr;
    size_t best = std::string::npos;
    for (const EnvVar& var : env_table()) {
      // A shortened or lengthened name (KOLO_LIB, KOLO_TIMEOUT_S) is as close as one typo.
      const std::string known = var.name;
      const bool prefix = known.rfind(name, 0) == 0 || name.rfind(known, 0) == 0;
      const size_t distance = prefix ? 1 : edit_distance(name, known);
      if (distance < best) {
        best = distance;
        closest = &var;
      }
    }
    lines.push_back(str_cat(name, " is set but is not a kolo variable (did you mean ", closest->name,
                            "? kolorun --help-env lists them all)"));
  }
  return lines;
}

Status env_check_all() {
  // Typos are warnings, not errors: a variable of a newer or older kolo must not stop a job.
  static std::once_flag warned;
  std::call_once(warned, [] {
    for (const std::string& line : env_unknown_variables()) log_warn(Subsys::kInit, line);
  });
  std::string problems;
  for (const EnvVar& var : env_table()) {
    const char* value = std::getenv(var.name);
    if (value == nullptr) continue;
    Status s = env_check(var, value);
    if (!s.ok()) problems += (problems.empty() ? "" : "; ") + s.message();
  }
  if (problems.empty()) return Status();
  return error(Code::kInvalidArgument, problems, " (kolorun --help-env lists every variable and its values)");
}

namespace {

const char* shown_default(const EnvVar& var) {
  if (var.default_value[0] != '\0') return var.default_value;
  return var.unset_text[0] != '\0' ? var.unset_text : "unset";
}

// `text` in lines of at most 88 columns (longer words stand alone), each indented by 4.
std::string wrapped(const std::string& text) {
  std::string out, line;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && 4 + line.size() + 1 + word.size() > 88) {
      out += "    " + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  if (!line.empty()) out += "    " + line + "\n";
  return out;
}

}  // namespace

std::string env_help() {
  std::string out;
  for (const EnvVar& var : env_table()) {
    out += str_cat(var.name, " (default: ", shown_default(var), ")\n", wrapped("values: " + env_allowed(var)),
                   wrapped(var.help));
  }
  return out;
}

std::string env_help_markdown() {
  auto cell = [](std::string text) {  // a '|' would end the cell
    for (size_t at = text.find('|'); at != std::string::npos; at = text.find('|', at + 2)) text.insert(at, "\\");
    return text;
  };
  std::string out = "| variable | default | values | meaning |\n|---|---|---|---|\n";
  for (const EnvVar& var : env_table()) {
    const char* shown = shown_default(var);
    out += str_cat("| `", var.name, "` | ", cell(shown), " | ", cell(env_allowed(var)), " | ", cell(var.help), " |\n");
  }
  return out;
}

}  // namespace kolo
