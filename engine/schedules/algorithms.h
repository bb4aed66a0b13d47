// Algorithms: each turns a CollSpec into one rank's Schedule. They hold no state and
// touch no buffers; the executor runs what they produce.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/collective.h"
#include "engine/planner/plan_context.h"
#include "engine/schedules/schedule.h"
#include "support/status.h"
#include "topology/graph.h"

namespace kolo {



// Ring (bandwidth-optimal; pipelined in chunks of chunk_bytes).
Schedule ring_allreduce(const CollSpec& spec, const PlanContext& ctx);
Schedule ring_reduce_scatter(const CollSpec& spec, const PlanContext& ctx);
Schedule ring_allgather(const CollSpec& spec, const PlanContext& ctx);  // also allgatherv
Schedule ring_broadcast(const CollSpec& spec, const PlanContext& ctx);  // a pipelined chain
Schedule ring_reduce(const CollSpec& spec, const PlanContext& ctx);     // reduce-scatter + gather

// Direct (one step: every rank talks to every peer it needs; latency-optimal for small data).
Schedule direct_allreduce(const CollSpec& spec, const PlanContext& ctx);
Schedule direct_reduce_scatter(const CollSpec& spec, const PlanContext& ctx);
Schedule direct_allgather(const CollSpec& spec, const PlanContext& ctx);  // also allgatherv
Schedule direct_broadcast(const CollSpec& spec, const PlanContext& ctx);
Schedule direct_reduce(const CollSpec& spec, const PlanContext& ctx);
Schedule direct_alltoall(const CollSpec& spec, const PlanContext& ctx);
// One-shot: every rank sends its whole buffer to every peer and reduces all of them (the
// direct allreduce, under its NVSwitch/shared-memory name). Two-shot: a direct
// reduce-scatter (each rank reduces 1/p) then a direct allgather of the reduced parts.
Schedule one_shot_allreduce(const CollSpec& spec, const PlanContext& ctx);
Schedule two_shot_allreduce(const CollSpec& spec, const PlanContext& ctx);

// Recursive halving-doubling (Rabenseifner) for any rank count: the ranks beyond the
// largest power of two fold their data into a partner first and get the result last.
Schedule halving_doubling_allreduce(const CollSpec& spec, const PlanContext& ctx);
Schedule halving_doubling_reduce_scatter(const CollSpec& spec, const PlanContext& ctx);
Schedule halving_doubling_allgather(const CollSpec& spec, const PlanContext& ctx);

// Double binary tree (allreduce: each half of the data reduces up one tree and is
// broadcast down it; the two trees have complementary inner ranks); broadcast and reduce
// over one binary tree rooted at the root. Pipelined in chunks of chunk_bytes.
Schedule tree_allreduce(const CollSpec& spec, const PlanContext& ctx);
Schedule tree_broadcast(const CollSpec& spec, const PlanContext& ctx);
Schedule tree_reduce(const CollSpec& spec, const PlanContext& ctx);

// Two levels (needs ctx.host_of_rank, every host with the same number of ranks):
// reduce-scatter inside each host, allreduce of each part across hosts among the ranks
// with the same local index (each over its nearest NIC), allgather inside each host.
Schedule hierarchical_allreduce(const CollSpec& spec, const PlanContext& ctx);

// Dissemination barrier: ceil(log2 p) rounds of empty messages at doubling distances.
Schedule dissemination_barrier(const CollSpec& spec, const PlanContext& ctx);
Schedule point_to_point(const CollSpec& spec, const PlanContext& ctx);  // send or recv

// Every generator opens with a ScheduleDraft (schedule_builder.h): the schedule named
// after its algorithm, its builder, and the one-rank case of the reductions.

}  // namespace kolo
