#include "support/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string_view>

#include "support/env.h"

namespace kolo {
namespace {

const char* subsys_name(Subsys subsys) {
  switch (subsys) {
    case Subsys::kInit: return "INIT";
    case Subsys::kBootstrap: return "BOOTSTRAP";
    case Subsys::kTransport: return "TRANSPORT";
    case Subsys::kPlan: return "PLAN";
    case Subsys::kExec: return "EXEC";
    case Subsys::kEngine: return "ENGINE";
    case Subsys::kTopo: return "TOPO";
  }
  return "?";
}

struct LogConfig {
  LogLevel level = LogLevel::kWarn;
  unsigned subsys_mask = ~0u;
};

LogConfig load_config() {
  LogConfig config;
  // Names in the table's spelling (any case is accepted). A value that is none of them
  // leaves the default here: env_check_all fails the communicator's init with it.
  std::string level = env_string("KOLO_DEBUG");
  if (level == "NONE") config.level = LogLevel::kNone;
  else if (level == "INFO") config.level = LogLevel::kInfo;
  else if (level == "TRACE") config.level = LogLevel::kTrace;
  const std::vector<std::string> subsystems = env_list("KOLO_DEBUG_SUBSYS");
  if (!subsystems.empty()) {
    config.subsys_mask = 0;
    for (int s = 0; s <= static_cast<int>(Subsys::kTopo); ++s) {
      for (const std::string& name : subsystems) {
        if (name == subsys_name(static_cast<Subsys>(s))) config.subsys_mask |= 1u << s;
      }
    }
  }
  return config;
}

const LogConfig& config() {
  static const LogConfig loaded = load_config();
  return loaded;
}

std::atomic<int> g_rank{-1};
std::mutex g_write_mutex;

}  // namespace

bool log_enabled(LogLevel level, Subsys subsys) {
  const LogConfig& c = config();
  return level <= c.level && (c.subsys_mask >> static_cast<int>(subsys) & 1u);
}

void log_set_rank(int rank) { g_rank.store(rank); }

void log_write(LogLevel level, Subsys subsys, const std::string& message) {
  const char* level_name = level == LogLevel::kWarn ? "WARN" : level == LogLevel::kInfo ? "INFO" : "TRACE";
  std::lock_guard<std::mutex> lock(g_write_mutex);
  std::fprintf(stderr, "kolo %d:%d %s %s %s\n", static_cast<int>(getpid()), g_rank.load(),
               level_name, subsys_name(subsys), message.c_str());
}

}  // namespace kolo
