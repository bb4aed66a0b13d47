// The one place that builds what the planner knows of a communicator (PlanContext): the
// settings (engine/planner/comm_settings.h), the facts of its machines (topology, which
// host each rank is on, the shared-memory domain's agreed figures, whether the device
// runtime maps peers' memory) and what each executor row declares of itself
// (ExecutorRow::declare). Communicator::connect calls it with what it found; kolo-plan with
// the communicator it models. So the two plan alike (tests/multiproc/plan_agreement).
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "engine/executors/executor.h"
#include "engine/planner/comm_settings.h"
#include "engine/planner/params.h"
#include "engine/planner/plan_context.h"
#include "topology/graph.h"

namespace kolo {

// Which executor rows run on the communicator (indexed by ExecutorKind).
using ExecutorRows = std::array<bool, kExecutorCount>;

// Fills *ctx from the settings, the facts and every row's declare; *scaled holds the
// one-host model scaled to the domain's figures, and ctx->local_params points at it (so it
// must outlive ctx's use).
ExecutorRows make_plan_context(const CommSettings& settings, const PlannerFacts& facts, PlanContext* ctx,
                               PlannerParams* scaled);

}  // namespace kolo
