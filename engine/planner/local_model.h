// The cost of the one-host shared-memory collectives (engine/local/): not schedules but a
// tight loop over a shared segment, so they get formulas instead of a simulation. The
// parameters (per-chunk synchronisation, copy and reduce rates) are in params.h.
#pragma once

#include <cstddef>

#include "engine/planner/params.h"

namespace kolo {

enum class LocalAlgorithm { kOneShot, kTwoShot };

// Predicted microseconds of an allreduce of `bytes` over `ranks` processes on one host
// with `cores` cores.
double predict_local_allreduce_us(LocalAlgorithm algorithm, size_t bytes, int ranks, int cores,
                                  const PlannerParams& params = planner_params());

}  // namespace kolo
