// One logger for all of kolo, with levels (KOLO_DEBUG) and subsystems.
#pragma once

#include <string>

#include "support/status.h"

namespace kolo {

enum class LogLevel : int { kNone = 0, kWarn = 1, kInfo = 2, kTrace = 3 };
enum class Subsys : int { kInit, kBootstrap, kTransport, kPlan, kExec, kEngine, kTopo };

bool log_enabled(LogLevel level, Subsys subsys);
void log_write(LogLevel level, Subsys subsys, const std::string& message);
// Ranks tag their lines once they know who they are.
void log_set_rank(int rank);

template <typename... Args>
void log_warn(Subsys subsys, const Args&... args) {
  if (log_enabled(LogLevel::kWarn, subsys)) log_write(LogLevel::kWarn, subsys, str_cat(args...));
}
template <typename... Args>
void log_info(Subsys subsys, const Args&... args) {
  if (log_enabled(LogLevel::kInfo, subsys)) log_write(LogLevel::kInfo, subsys, str_cat(args...));
}
template <typename... Args>
void log_trace(Subsys subsys, const Args&... args) {
  if (log_enabled(LogLevel::kTrace, subsys)) log_write(LogLevel::kTrace, subsys, str_cat(args...));
}

}  // namespace kolo
