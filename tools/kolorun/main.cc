// kolorun: starts a kolo job. Parses the command line, places the ranks, makes the
// per-job secret, hosts the rendezvous store, and hands the rest to the launcher.
#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>

#include "support/crypto.h"
#include "support/env.h"
#include "tools/kolorun/discovery.h"
#include "tools/kolorun/horovod_flags.h"
#include "tools/kolorun/hosts.h"
#include "tools/kolorun/launcher.h"
#include "tools/kolo_trace/trace_report.h"
#include "transport/bootstrap/store.h"

extern char** environ;

namespace kolo::kolorun {
namespace {

constexpr size_t kSecretBytes = 32;

const char kUsage[] =
    "usage: kolorun [options] program [args...]\n"
    "\n"
    "Starts `program` as the ranks of one kolo job and hosts the job's rendezvous store.\n"
    "\n"
    "options:\n"
    "  -np N, -n N            number of ranks (default: all slots of the hosts given)\n"
    "  -H, --host LIST        hosts and slots, e.g. node1:4,node2:4 ([v6addr]:N for IPv6)\n"
    "  --hostfile FILE        one 'host slots=N' per line; '#' starts a comment\n"
    "                         (without hosts, every rank runs on this machine)\n"
    "  -x NAME=VALUE, -x NAME set (or pass on kolorun's value of) a variable for every rank\n"
    "  --no-prefix            relay the ranks' output as is, without '[rank] '\n"
    "  --no-trace             when a rank fails, print no diagnosis (by default the ranks dump\n"
    "                         their flight recorders to KOLO_TRACE_DIR, or a folder of\n"
    "                         kolorun's, and kolorun prints kolo-trace's summary of them)\n"
    "  --nccl                 run the job on kolo's libnccl.so.2: programs linked with NCCL\n"
    "                         (PyTorch's \"nccl\" backend, MPI+NCCL codes) use kolo unchanged;\n"
    "                         its folder goes first on LD_LIBRARY_PATH and the library on\n"
    "                         LD_PRELOAD of every rank (the same path on every host)\n"
    "  --bind-to core|none    pin each rank on this machine to one CPU (default: core when\n"
    "                         the ranks here are no more than its CPUs, as mpirun does)\n"
    "  --timeout SECONDS      stop the whole job after this long (exit status 124)\n"
    "  --ssh COMMAND          command that starts remote ranks, e.g. 'ssh -p 2222'\n"
    "                         (default: ssh; kolorun adds -o BatchMode=yes HOST CMD)\n"
    "  --launcher TEMPLATE    start remote ranks with TEMPLATE instead of ssh: {host} is\n"
    "                         replaced by the host's name and kolorun adds sh -c SCRIPT,\n"
    "                         e.g. 'ip netns exec {host}' (see tools/testhosts.sh)\n"
    "  --store-host HOST      name the ranks use to reach this machine's store\n"
    "                         (default: this host's name; 127.0.0.1 when all ranks are local)\n"
    "  --min-np N             elastic job: a rank that fails is dropped and the others go on\n"
    "                         (they rebuild their world, kolo.torch.elastic) while at least N\n"
    "                         ranks run; fewer stop the job (default: -np)\n"
    "  --max-np M             elastic job: at most M ranks (default: -np; unlimited with a\n"
    "                         discovery script)\n"
    "  --host-discovery-script S\n"
    "                         elastic job: S prints the hosts usable now, one host:slots a\n"
    "                         line; polled every second: new room gets new ranks that join\n"
    "                         at the job's next rebuild, unlisted hosts' ranks leave at\n"
    "                         their next commit\n"
    "  --help                 this text\n"
    "  --help-env[=markdown]  the KOLO_* environment variables, their values and defaults\n"
    "                         (=markdown: as the table in README.md)\n"
    "\n"
    "Ranks fill the hosts in order. Each rank gets KOLO_RANK, KOLO_SIZE, KOLO_LOCAL_RANK,\n"
    "KOLO_LOCAL_SIZE, KOLO_ADDR, KOLO_SECRET and KOLO_LAUNCHER; kolorun's own KOLO_* variables\n"
    "are passed on.\n"
    "When a rank fails, kolorun stops the others and exits with the rank's status.\n";

// A folder of kolorun's own for the ranks' flight-recorder dumps ("" where none can be made:
// the job runs without).
std::string make_trace_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = str_cat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/kolorun-trace.XXXXXX");
  return ::mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
}

void remove_trace_dir(const std::string& folder) {
  if (DIR* dir = ::opendir(folder.c_str())) {
    while (dirent* e = ::readdir(dir)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
        ::unlink(str_cat(folder, "/", e->d_name).c_str());
      }
    }
    ::closedir(dir);
  }
  ::rmdir(folder.c_str());
}

struct Options {
  std::optional<int> np;
  std::string host_list;
  std::string hostfile;
  std::vector<std::pair<std::string, std::string>> exports;
  bool prefix = true;
  bool trace = true;
  bool nccl = false;
  bool bind_to_core = true;
  double timeout_s = 0;
  std::string ssh = "ssh";
  bool ssh_given = false;
  std::string launcher;
  std::string store_host;
  std::optional<int> min_np, max_np;
  std::string discovery_script;
  HorovodFlags horovod;  // horovodrun's flags given (horovod_flags.h)
  bool help = false;
  std::string help_env;  // "", "text" or "markdown"
  std::vector<std::string> argv;
};

bool valid_variable_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

Status parse_export(const std::string& text, Options& options) {
  size_t eq = text.find('=');
  std::string name = text.substr(0, eq);
  if (!valid_variable_name(name)) return error(Code::kInvalidArgument, "-x: '", name, "' is not a variable name");
  if (is_per_rank_variable(name)) {
    return error(Code::kInvalidArgument, "-x: ", name, " is set by kolorun for each rank");
  }
  std::string value;
  if (eq != std::string::npos) {
    value = text.substr(eq + 1);
  } else {
    const char* current = std::getenv(name.c_str());
    if (current == nullptr) return error(Code::kInvalidArgument, "-x ", name, ": not set in kolorun's environment");
    value = current;
  }
  options.exports.emplace_back(name, value);
  return Status::ok_status();
}

Result<Options> parse_args(int argc, char** argv) {
  Options options;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;  // the program: everything from here is its
    std::optional<std::string> inline_value;  // --name=value
    if (arg.rfind("--", 0) == 0 && arg.find('=') != std::string::npos) {
      inline_value = arg.substr(arg.find('=') + 1);
      arg = arg.substr(0, arg.find('='));
    }
    auto value = [&]() -> Result<std::string> {
      if (inline_value) return *inline_value;
      if (i + 1 >= argc) return error(Code::kInvalidArgument, "option '", arg, "' needs a value");
      return std::string(argv[++i]);
    };
    bool takes_value = arg == "-np" || arg == "--np" || arg == "-n" || arg == "-H" || arg == "--host" ||
                       arg == "-host" || arg == "--hostfile" || arg == "-hostfile" || arg == "-x" ||
                       arg == "--timeout" || arg == "--ssh" || arg == "--launcher" || arg == "--store-host" ||
                       arg == "--bind-to" || arg == "--min-np" || arg == "--max-np" ||
                       arg == "--host-discovery-script";
    bool horovod_takes_value = false;
    const bool horovod = is_horovod_flag(arg, &horovod_takes_value);
    takes_value = takes_value || horovod_takes_value;
    // --help-env alone may take one (=markdown).
    if (!takes_value && inline_value && arg != "--help-env") {
      return error(Code::kInvalidArgument, "option '", arg, "' takes no value");
    }
    if (arg == "--help" || arg == "-h") {
      options.help = true;
    } else if (arg == "--help-env") {
      options.help_env = inline_value.value_or("text");
      if (options.help_env != "text" && options.help_env != "markdown") {
        return error(Code::kInvalidArgument, "--help-env='", options.help_env, "' is not text or markdown");
      }
    } else if (arg == "--no-prefix") {
      options.prefix = false;
    } else if (arg == "--no-trace") {
      options.trace = false;
    } else if (arg == "--nccl") {
      options.nccl = true;
    } else if (horovod) {
      std::string text;
      if (horovod_takes_value) {
        Result<std::string> got = value();
        if (!got.ok()) return got.status();
        text = got.value();
      }
      KOLO_TRY(apply_horovod_flag(arg, text, options.horovod));
    } else if (!takes_value) {
      return error(Code::kInvalidArgument, "unknown option '", arg, "'");
    } else {
      Result<std::string> got = value();
      if (!got.ok()) return got.status();
      const std::string& text = got.value();
      if (arg == "--bind-to") {
        if (text != "core" && text != "none") {
          return error(Code::kInvalidArgument, "--bind-to '", text, "' is not core or none");
        }
        options.bind_to_core = text == "core";
      } else if (arg == "-np" || arg == "--np" || arg == "-n" || arg == "--min-np" || arg == "--max-np") {
        char* end = nullptr;
        errno = 0;
        long np = std::strtol(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || errno != 0 || np < 1 || np > kMaxRanks) {
          return error(Code::kInvalidArgument, arg, ": '", text, "' is not a number of ranks in 1..", kMaxRanks);
        }
        (arg == "--min-np" ? options.min_np : arg == "--max-np" ? options.max_np : options.np) = static_cast<int>(np);
      } else if (arg == "--host-discovery-script") {
        options.discovery_script = text;
      } else if (arg == "-H" || arg == "--host" || arg == "-host") {
        options.host_list += (options.host_list.empty() ? "" : ",") + text;
      } else if (arg == "--hostfile" || arg == "-hostfile") {
        options.hostfile = text;
      } else if (arg == "-x") {
        KOLO_TRY(parse_export(text, options));
      } else if (arg == "--timeout") {
        char* end = nullptr;
        double seconds = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !std::isfinite(seconds) || seconds <= 0) {
          return error(Code::kInvalidArgument, "--timeout: '", text, "' is not a positive number of seconds");
        }
        options.timeout_s = seconds;
      } else if (arg == "--ssh") {
        options.ssh = text;
        options.ssh_given = true;
      } else if (arg == "--launcher") {
        std::string problem = launcher_template_problem(text);
        if (!problem.empty()) return error(Code::kInvalidArgument, "--launcher '", text, "': ", problem);
        options.launcher = text;
      } else if (arg == "--store-host") {
        options.store_host = text;
      }
    }
  }
  for (; i < argc; ++i) options.argv.emplace_back(argv[i]);
  if (options.ssh_given && !options.launcher.empty()) {
    return error(Code::kInvalidArgument, "give --ssh or --launcher, not both");
  }
  // horovodrun's flags: their variables before -x's (which win), their ssh options on ssh.
  for (auto it = options.horovod.exports.rbegin(); it != options.horovod.exports.rend(); ++it) {
    const std::string& name = it->first;
    if (std::none_of(options.exports.begin(), options.exports.end(), [&](const auto& e) { return e.first == name; })) {
      options.exports.insert(options.exports.begin(), *it);
    }
  }
  if (!options.horovod.ssh_args.empty()) {
    if (!options.launcher.empty()) return error(Code::kInvalidArgument, "-p/-i are ssh's options: not with --launcher");
    for (const std::string& word : options.horovod.ssh_args) {
      if (word.empty() || word.find_first_of(" \t'\"\\$`") != std::string::npos) {
        return error(Code::kInvalidArgument, "ssh option '", word, "' is empty or has a space or quote");
      }
      options.ssh += " " + word;
    }
  }
  return options;
}

// kolo's libnccl.so.2, next to this kolorun: installed (<prefix>/bin/kolorun,
// <prefix>/<libdir>/kolo/nccl) or in the build tree (tools/kolorun/kolorun, nccl-dropin).
Result<std::string> nccl_dropin_folder() {
  char self[4096] = {};
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return error(Code::kSystem, "--nccl: cannot tell where kolorun is (/proc/self/exe)");
  const std::string bin = std::string(self, static_cast<size_t>(n)).substr(0, std::string(self).rfind('/'));
  std::vector<std::string> tried;
  for (const char* relative : {"/../lib/kolo/nccl", "/../lib64/kolo/nccl", "/../lib/x86_64-linux-gnu/kolo/nccl",
                               "/../lib/aarch64-linux-gnu/kolo/nccl", "/../../nccl-dropin"}) {
    const std::string folder = bin + relative;
    char real[4096] = {};
    if (::access((folder + "/libnccl.so.2").c_str(), R_OK) == 0 && ::realpath(folder.c_str(), real) != nullptr) {
      return std::string(real);
    }
    tried.push_back(folder);
  }
  std::string list;
  for (const std::string& t : tried) list += "\n  " + t;
  return error(Code::kInvalidUsage, "--nccl: kolo's libnccl.so.2 is in none of these folders:", list,
               "\n(build kolo with the CUDA toolkit's nccl.h present, or install it)");
}

// name=first:<kolorun's or -x's value>, so that `first` wins and nothing else is lost.
void put_first(std::vector<std::pair<std::string, std::string>>& env, const std::string& name,
               const std::string& first, char separator) {
  std::string rest;
  auto given = std::find_if(env.begin(), env.end(), [&](const auto& var) { return var.first == name; });
  if (given != env.end()) {
    rest = given->second;
    env.erase(given);
  } else if (const char* inherited = std::getenv(name.c_str())) {
    rest = inherited;
  }
  env.emplace_back(name, rest.empty() ? first : first + separator + rest);
}

// fds 0-2 closed at start would be reused by pipes and then clobbered by dup2.
void ensure_standard_fds() {
  for (int fd = 0; fd < 3; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0) {
      int null_fd = ::open("/dev/null", O_RDWR);
      if (null_fd >= 0 && null_fd != fd) {
        ::dup2(null_fd, fd);
        ::close(null_fd);
      }
    }
  }
}

// Each rank costs the launcher three or four descriptors.
void raise_fd_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

int fail(int code, const std::string& message) {
  std::cerr << "kolorun: " << message << "\n";
  return code;
}

int kolorun_main(int argc, char** argv) {
  ensure_standard_fds();
  Result<Options> parsed = parse_args(argc, argv);
  if (!parsed.ok()) return fail(kExitUsage, parsed.status().message() + " (see kolorun --help)");
  Options& options = parsed.value();
  if (options.help) {
    std::cout << kUsage << "\n" << horovod_flags_help();
    return 0;
  }
  for (const std::string& note : options.horovod.notes) std::cerr << "kolorun: note: " << note << "\n";
  if (!options.help_env.empty()) {
    std::cout << (options.help_env == "markdown" ? env_help_markdown() : env_help());
    return 0;
  }
  if (options.argv.empty()) return fail(kExitUsage, "no program given (see kolorun --help)");
  if (!options.host_list.empty() && !options.hostfile.empty()) {
    return fail(kExitUsage, "give hosts with -H or with --hostfile, not both");
  }

  const bool elastic = options.min_np || options.max_np || !options.discovery_script.empty();
  std::vector<HostSlots> hosts;
  if (!options.host_list.empty() || !options.hostfile.empty()) {
    Result<std::vector<HostSlots>> read =
        options.hostfile.empty() ? parse_host_list(options.host_list) : read_hostfile(options.hostfile);
    if (!read.ok()) return fail(kExitUsage, read.status().message());
    hosts = read.take();
  } else if (!options.discovery_script.empty()) {  // the first hosts are the script's
    Result<std::vector<HostSlots>> found = discover_hosts(options.discovery_script, 30);
    if (!found.ok()) return fail(kExitUsage, found.status().message());
    hosts = found.take();
    if (hosts.empty()) return fail(kExitUsage, "--host-discovery-script '" + options.discovery_script + "' lists no host");
  }
  if (!options.np && hosts.empty()) return fail(kExitUsage, "give the number of ranks with -np N");
  const int max_np = options.max_np.value_or(options.discovery_script.empty() ? options.np.value_or(total_slots(hosts))
                                                                              : kMaxRanks);
  int np = options.np ? *options.np : std::min(total_slots(hosts), max_np);
  const int min_np = options.min_np.value_or(np);
  if (elastic && !(min_np <= np && np <= max_np)) {
    return fail(kExitUsage, str_cat("--min-np ", min_np, " <= -np ", np, " <= --max-np ", max_np, " does not hold"));
  }
  std::string hostname = this_hostname();
  if (options.launcher.empty() && !options.ssh_given) {
    Status known = check_hosts_resolve(hosts, hostname);
    if (!known.ok()) return fail(kExitUsage, known.message());
  }
  Result<std::vector<Placement>> placed = place_ranks(hosts, np, hostname);
  if (!placed.ok()) return fail(kExitUsage, placed.status().message());

  JobSpec job;
  job.argv = options.argv;
  job.ranks = placed.take();
  job.prefix = options.prefix;
  job.bind_to_core = options.bind_to_core;
  job.timeout_s = options.timeout_s;
  job.ssh = options.ssh;
  job.launcher = options.launcher;
  job.elastic = elastic;
  job.min_np = min_np;
  job.max_np = max_np;
  job.discovery_script = options.discovery_script;
  job.this_hostname = hostname;
  // Remote ranks see only what is forwarded: kolorun's KOLO_* (minus the per-rank ones
  // it sets itself), then -x, which wins over an inherited value of the same name.
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string text = *entry;
    size_t eq = text.find('=');
    std::string name = text.substr(0, eq);
    if (eq == std::string::npos || name.rfind("KOLO_", 0) != 0 || is_per_rank_variable(name)) continue;
    if (elastic && name == "KOLO_ELASTIC") continue;  // kolorun sets it per rank (1 or join)
    job.env.emplace_back(name, text.substr(eq + 1));
  }
  for (const auto& exported : options.exports) {
    // Not a structured binding: clang 14 (the sanitizer builds') cannot capture one.
    std::erase_if(job.env, [&](const auto& var) { return var.first == exported.first; });
    job.env.emplace_back(exported.first, exported.second);
  }
  if (options.nccl) {
    Result<std::string> folder = nccl_dropin_folder();
    if (!folder.ok()) return fail(kExitUsage, folder.status().message());
    put_first(job.env, "LD_LIBRARY_PATH", folder.value(), ':');
    put_first(job.env, "LD_PRELOAD", folder.value() + "/libnccl.so.2", ':');
  }
  char cwd[4096];
  job.cwd = ::getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : "/";
  raise_fd_limit();

  // Before the store's thread exists, so that it never takes these signals.
  Status blocked = block_job_signals();
  if (!blocked.ok()) return fail(1, blocked.message());

  std::string secret(kSecretBytes, '\0');
  Status random = random_bytes(secret.data(), secret.size());
  if (!random.ok()) return fail(1, "cannot make the job secret: " + random.message());
  job.secret_hex = to_hex(secret.data(), secret.size());

  bool all_local = true;
  for (const Placement& rank : job.ranks) all_local = all_local && rank.local;
  // A job on this machine alone needs no store reachable from elsewhere.
  bool loopback = all_local && options.store_host.empty();
  std::string store_host = loopback ? "127.0.0.1" : (options.store_host.empty() ? hostname : options.store_host);
  // Listens on that address alone when it is one of this machine's (--store-host 10.0.0.5).
  Result<std::unique_ptr<StoreServer>> store = StoreServer::start(listen_host_for(store_host), 0, secret);
  if (!store.ok()) return fail(1, "cannot start the rendezvous store: " + store.status().message());
  if (store_host.find(':') != std::string::npos) store_host = "[" + store_host + "]";
  job.addr = store_host + ":" + std::to_string(store.value()->port());
  job.store_on_loopback = loopback;

  // The flight recorders' folder: the user's KOLO_TRACE_DIR, else one of kolorun's own,
  // removed after a job that succeeded.
  std::string own_trace_dir;
  if (options.trace) {
    auto given = std::find_if(job.env.begin(), job.env.end(), [](const auto& v) { return v.first == "KOLO_TRACE_DIR"; });
    if (given != job.env.end()) {
      job.trace_dir = given->second;
    } else if (!(own_trace_dir = make_trace_dir()).empty()) {
      job.trace_dir = own_trace_dir;
      job.env.emplace_back("KOLO_TRACE_DIR", own_trace_dir);
    }
  }

  int status = run_job(job);
  store.value().reset();
  if (status != 0 && !job.trace_dir.empty()) {
    const trace::Dumps dumps = trace::read_folder(job.trace_dir);
    if (!dumps.ranks.empty()) {
      std::cerr << "kolorun: the ranks' flight recorders (kolo-trace " << job.trace_dir << "):\n"
                << trace::report(dumps, job.trace_dir);
      own_trace_dir.clear();  // kept for a second look
    }
  }
  if (!own_trace_dir.empty()) remove_trace_dir(own_trace_dir);
  return status;
}

}  // namespace
}  // namespace kolo::kolorun

int main(int argc, char** argv) { return kolo::kolorun::kolorun_main(argc, argv); }
