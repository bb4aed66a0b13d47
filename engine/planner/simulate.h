// Predicts the time of a collective by running every rank's schedule against the cost
// model: one discrete-event simulation serves every algorithm, because it reads only the
// steps, their dependencies and their peers.
#pragma once

#include <vector>

#include "engine/planner/cost_model.h"
#include "support/status.h"

namespace kolo {

// Microseconds from the first rank starting to the last rank finishing. Each rank
// computes one step at a time; a message occupies the sender's egress and the receiver's
// ingress (across hosts: the two NICs) for bytes / bandwidth, and arrives alpha later; sends
// are eager (a receive posted late completes at once). Fails on a deadlock or an
// unmatched message.
// One-host programs (kSignal/kWait over shared staging slots, engine/local/) are charged as
// the one-host model charges them (local_model.h): copies and reduces at the shm_* rates,
// caller buffers from DRAM past the cache, shm_call_us once, and a wait ends shm_sync_us
// after the signal that releases it (or at once when that was long ago). It assumes a core
// per rank (the model's oversubscribed terms are not simulated).
Result<double> simulate_us(const std::vector<Schedule>& schedules, const CostModel& model);

// Every rank's schedule of spec with `algorithm` (ctx.rank is ignored).
std::vector<Schedule> schedules_for_all(const CollSpec& spec, const PlanContext& ctx, Algorithm algorithm);

// build + simulate.
Result<double> predict_us(const CollSpec& spec, const PlanContext& ctx, Algorithm algorithm, const CostModel& model);

}  // namespace kolo
