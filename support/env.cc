#include "support/env.h"

#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "support/log.h"

namespace kolo {

const std::vector<EnvVar>& env_table() {
  static const std::vector<EnvVar> table = {
      {"KOLO_DEBUG", "WARN", "log level: NONE, WARN, INFO or TRACE"},
      {"KOLO_DEBUG_SUBSYS", "", "comma-separated subsystems to log (INIT,BOOTSTRAP,TRANSPORT,PLAN,EXEC,ENGINE,TOPO); empty = all"},
      {"KOLO_TIMEOUT", "300", "seconds any wait may last before it fails with KOLO_ERR_TIMEOUT"},
      {"KOLO_ALGO", "", "force an algorithm: ring, direct, tree, halving_doubling, hierarchical, one_shot or two_shot where it applies (empty = the planner's cost model chooses)"},
      {"KOLO_TRANSPORTS", "", "comma-separated transports allowed, preferred first: shm (same host), tcp; empty = shm,tcp"},
      {"KOLO_SHM_SINGLE_COPY", "1", "1 = large shared-memory messages are copied once with process_vm_readv where the kernel permits; 0 = through the shared ring"},
      {"KOLO_SHM_CHUNK_BYTES", "1048576", "size of each rank's shared-memory staging slot, the pipeline chunk of one-host collectives"},
      {"KOLO_SHM_STREAM_BYTES", "0", "one-host collectives write outputs at least this large with non-temporal stores, past the caches (0 = never; slower than ordinary stores on the machines measured so far)"},
      {"KOLO_SOCKET_IFNAME", "", "network interface for data connections (e.g. eth0); empty = the interface that reaches the store"},
      {"KOLO_DEVICE", "auto", "device runtime: auto (cuda when a GPU and driver are present, else none), cuda, emulated (a CPU device for tests and trying the device API) or none"},
      {"KOLO_BACKEND", "kolo", "who runs device-buffer collectives: kolo (its own device path) or nccl (NCCL, loaded with dlopen; needs the cuda device runtime)"},
      {"KOLO_EMULATED_P2P", "1", "emulated device: 0 = processes cannot map each other's device memory, as GPUs without peer access (for tests)"},
      {"KOLO_DEVICE_IPC", "1", "1 = device collectives of ranks on one host run as kernels over each other's memory (CUDA IPC); 0 = staged through pinned host memory"},
      {"KOLO_DEVICE_BARRIER", "auto", "how ranks of one host wait for each other between the steps of a device collective: kernel (a GPU thread spins on the peers' flags), host (a host function on the stream waits, leaving the GPU to the peers), auto (host where ranks in different processes share one GPU)"},
      {"KOLO_NCCL_LIBRARY", "libnccl.so.2", "the NCCL library KOLO_BACKEND=nccl loads (a name the dynamic loader finds, or a path)"},
      {"KOLO_CHUNK_BYTES", "1048576", "pipeline chunk size in bytes for ring algorithms"},
      {"KOLO_NET_CALIBRATE", "1", "0 = plan with the NICs' nominal speeds instead of measuring the network between hosts when a communicator spanning hosts is made"},
      {"KOLO_TOPO_FILE", "", "read the topology from this kolo JSON or NCCL topology XML file instead of discovering it"},
      {"KOLO_TOPO_DUMP_FILE", "", "write the discovered topology to this JSON file"},
      {"KOLO_FUSION_THRESHOLD", "134217728", "tensor fusion buffer size in bytes (0 = no fusion)"},
      {"KOLO_CYCLE_TIME", "1", "engine cycle time in milliseconds"},
      {"KOLO_TIMELINE", "", "write a Chrome trace-event timeline to this file"},
      {"KOLO_CACHE_CAPACITY", "1024", "names the runtime's response cache holds (0 = negotiate every name through the coordinator)"},
      {"KOLO_STALL_CHECK_TIME", "60", "seconds before the stall inspector logs which ranks miss which named tensors (0 = off)"},
      {"KOLO_STALL_SHUTDOWN_TIME", "0", "seconds of stall after which the runtime fails every pending request (0 = never)"},
      {"KOLO_AUTOTUNE", "0", "1 = tune the fusion threshold and cycle time on-line from measured throughput"},
      {"KOLO_RANK", "", "this process's rank (set by kolorun, or by you with KOLO_SIZE and KOLO_ADDR)"},
      {"KOLO_SIZE", "", "number of ranks in the world"},
      {"KOLO_LOCAL_RANK", "", "rank among the processes on this host (informational; kolo derives it)"},
      {"KOLO_LOCAL_SIZE", "", "number of processes on this host (informational; kolo derives it)"},
      {"KOLO_ADDR", "", "host:port of the rendezvous store; rank 0 hosts it when kolorun does not"},
      {"KOLO_SECRET", "", "per-job secret (hex) that authenticates every store message; kolorun makes one"},
      {"KOLO_LAUNCHER", "", "set to 'kolorun' by kolorun: the launcher hosts the store, not rank 0"},
      {"KOLO_INSECURE", "0", "1 = run the store unauthenticated (trusted networks only)"},
      {"KOLO_HOSTID", "", "override this process's host identity (to emulate several hosts on one machine)"},
  };
  return table;
}

static const EnvVar* find_var(const char* name) {
  for (const EnvVar& var : env_table()) {
    if (std::strcmp(var.name, name) == 0) return &var;
  }
  return nullptr;
}

std::string env_string(const char* name) {
  const EnvVar* var = find_var(name);
  assert(var != nullptr && "environment variable missing from env_table()");
  const char* value = std::getenv(name);
  if (value != nullptr) return value;
  return var != nullptr ? var->default_value : "";
}

bool env_is_set(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0';
}

Result<double> env_double(const char* name) {
  std::string text = env_string(name);
  if (text.empty()) return error(Code::kInvalidArgument, name, " is not set");
  errno = 0;
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || *end != '\0') {
    return error(Code::kInvalidArgument, name, "='", text, "' is not a number");
  }
  return value;
}

Result<long long> env_int(const char* name) {
  std::string text = env_string(name);
  if (text.empty()) return error(Code::kInvalidArgument, name, " is not set");
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0') {
    return error(Code::kInvalidArgument, name, "='", text, "' is not an integer");
  }
  return value;
}

double env_timeout_seconds() {
  Result<double> value = env_double("KOLO_TIMEOUT");
  // Deadlines count in nanoseconds of int64: a longer wait (inf, 1e30) would overflow the
  // conversion (undefined behaviour). 1e9 s is 31 years: as good as never.
  constexpr double kLongest = 1e9;
  if (value.ok() && value.value() > kLongest) return kLongest;
  if (value.ok() && value.value() > 0) return value.value();
  log_warn(Subsys::kInit, "KOLO_TIMEOUT='", env_string("KOLO_TIMEOUT"), "' is not a positive number of seconds; using 300");
  return 300.0;
}

std::string env_help() {
  std::string out;
  for (const EnvVar& var : env_table()) {
    out += str_cat(var.name, " (default: ", var.default_value[0] ? var.default_value : "unset",
                   ")\n    ", var.help, "\n");
  }
  return out;
}

}  // namespace kolo
