#include "tools/kolorun/horovod_flags.h"

#include <cmath>
#include <cstdlib>

namespace kolo::kolorun {
namespace {

struct Flag {
  const char* name;
  const char* alias;  // or null
  bool takes_value;
};

// Horovod's spelling (horovod/runner/launch.py), one row per flag.
constexpr Flag kFlags[] = {
    {"--ssh-port", "-p", true},
    {"--ssh-identity-file", "-i", true},
    {"--network-interface", "--network-interfaces", true},
    {"--start-timeout", nullptr, true},
    {"--verbose", nullptr, false},
    {"--timeline-filename", nullptr, true},
    {"--timeline-mark-cycles", nullptr, false},
    {"--fusion-threshold-mb", nullptr, true},
    {"--cycle-time-ms", nullptr, true},
    {"--cache-capacity", nullptr, true},
    {"--autotune", nullptr, false},
    {"--gloo", nullptr, false},
    {"--mpi", nullptr, false},
};

const Flag* find(const std::string& arg) {
  for (const Flag& flag : kFlags) {
    if (arg == flag.name || (flag.alias != nullptr && arg == flag.alias)) return &flag;
  }
  return nullptr;
}

Result<double> number(const std::string& flag, const std::string& text, double least) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(value) || value < least) {
    return error(Code::kInvalidArgument, flag, ": '", text, "' is not a number of at least ", least);
  }
  return value;
}

std::string integer_text(double value) { return std::to_string(static_cast<long long>(std::llround(value))); }

}  // namespace

bool is_horovod_flag(const std::string& arg, bool* takes_value) {
  const Flag* flag = find(arg);
  if (flag != nullptr) *takes_value = flag->takes_value;
  return flag != nullptr;
}

Status apply_horovod_flag(const std::string& arg, const std::string& value, HorovodFlags& into) {
  const Flag* flag = find(arg);
  if (flag == nullptr) return error(Code::kInternal, "'", arg, "' is not a horovodrun flag");
  const std::string name = flag->name;
  auto put = [&](const char* variable, std::string text) { into.exports.emplace_back(variable, std::move(text)); };
  if (name == "--ssh-port") {
    Result<double> port = number(arg, value, 1);
    if (!port.ok() || port.value() > 65535 || port.value() != std::floor(port.value())) {
      return error(Code::kInvalidArgument, arg, ": '", value, "' is not a port");
    }
    into.ssh_args.push_back("-p");
    into.ssh_args.push_back(integer_text(port.value()));
  } else if (name == "--ssh-identity-file") {
    into.ssh_args.push_back("-i");
    into.ssh_args.push_back(value);
  } else if (name == "--network-interface") {
    // Horovod takes a comma list; kolo one interface for its data connections.
    const std::string first = value.substr(0, value.find(','));
    if (first.empty()) return error(Code::kInvalidArgument, arg, ": no interface named");
    if (first != value) into.notes.push_back(str_cat(arg, " ", value, ": kolo uses the first, ", first));
    put("KOLO_SOCKET_IFNAME", first);
  } else if (name == "--start-timeout") {
    KOLO_TRY(number(arg, value, 1).status());
    // Horovod's limit on starting the job; kolo's one deadline covers start-up and every wait.
    put("KOLO_TIMEOUT", value);
  } else if (name == "--verbose") {
    put("KOLO_DEBUG", "INFO");
  } else if (name == "--timeline-filename") {
    if (value.empty()) return error(Code::kInvalidArgument, arg, ": no file named");
    put("KOLO_TIMELINE", value);
  } else if (name == "--timeline-mark-cycles") {
    into.notes.push_back("--timeline-mark-cycles: kolo's timeline marks no cycles (ignored)");
  } else if (name == "--fusion-threshold-mb") {
    Result<double> mb = number(arg, value, 0);
    if (!mb.ok()) return mb.status();
    put("KOLO_FUSION_THRESHOLD", integer_text(mb.value() * 1024 * 1024));
  } else if (name == "--cycle-time-ms") {
    KOLO_TRY(number(arg, value, 0).status());
    put("KOLO_CYCLE_TIME", value);
  } else if (name == "--cache-capacity") {
    KOLO_TRY(number(arg, value, 0).status());
    put("KOLO_CACHE_CAPACITY", value);
  } else if (name == "--autotune") {
    put("KOLO_AUTOTUNE", "1");
  } else if (name == "--gloo" || name == "--mpi") {
    into.notes.push_back(str_cat(name, ": kolo runs on its own transports (shared memory, TCP, UCX) either way"));
  }
  return Status::ok_status();
}

const char* horovod_flags_help() {
  return "horovodrun's flags, for its command lines with horovodrun replaced by kolorun:\n"
         "  -p, --ssh-port N        ssh -p N;  -i, --ssh-identity-file F: ssh -i F\n"
         "  --network-interface I   KOLO_SOCKET_IFNAME=I (the first of a comma list)\n"
         "  --start-timeout S       KOLO_TIMEOUT=S (kolo's one deadline, start-up included)\n"
         "  --verbose               KOLO_DEBUG=INFO\n"
         "  --timeline-filename F   KOLO_TIMELINE=F\n"
         "  --fusion-threshold-mb N KOLO_FUSION_THRESHOLD=N MiB;  --cycle-time-ms N: KOLO_CYCLE_TIME=N\n"
         "  --cache-capacity N      KOLO_CACHE_CAPACITY=N;  --autotune: KOLO_AUTOTUNE=1\n"
         "  --gloo, --mpi           accepted: kolo runs on its own transports either way\n"
         "  (-x NAME=VALUE wins over these)\n";
}

}  // namespace kolo::kolorun
