// What this machine's memory does, measured once per process for the planner's one-host
// model (engine/planner/local_model.h): its rates were fitted on one machine, and another
// copies at a third of that speed, or three times it. Measuring takes about a millisecond.
#pragma once

namespace kolo {

struct HostRates {
  double copy_gbs = 0;     // memcpy of 4 MiB (past L2, within a typical L3), bytes written per second / 1e9
  double cache_bytes = 0;  // the last-level cache (L3, else L2)
};

// Measured on the first call (thread-safe), the same figures afterwards.
const HostRates& host_rates();

}  // namespace kolo
