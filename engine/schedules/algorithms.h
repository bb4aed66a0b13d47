// Algorithms: each turns a CollSpec into one rank's Schedule. They hold no state and
// touch no buffers; the executor runs what they produce.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/collective.h"
#include "engine/schedules/schedule.h"
#include "support/status.h"
#include "topology/graph.h"

namespace kolo {

struct PlannerParams;  // engine/planner/params.h

struct PlanContext {
  int rank = 0;
  int size = 1;
  size_t chunk_bytes = 1 << 20;  // pipeline granularity of the ring algorithms
  Algorithm forced = Algorithm::kAuto;  // KOLO_ALGO, read once per communicator
  // The communicator's machines (may be null in unit tests): every host's topology, and
  // which host each rank is on (an index into topology->hosts).
  const ClusterTopology* topology = nullptr;
  const std::vector<int>* host_of_rank = nullptr;
  // The buffers are device (GPU) memory: the cost model uses the GPUs' links. The host
  // executor runs host memory only, so the communicator leaves this false for now.
  bool device_memory = false;
  // Every rank of the communicator shares memory with every other (one host): the one-host
  // executor can run, with staging slots of slot_bytes; agreed_cores is the number of CPUs
  // the ranks may run on together, the same on every rank (choices that all ranks must make
  // alike depend on it).
  bool shared_memory = false;
  size_t slot_bytes = 1 << 20;
  int agreed_cores = 1;
  // The one-host model's figures scaled to this machine (planner/params.h, scaled_for_host):
  // the same on every rank. Null: the table's own.
  const PlannerParams* local_params = nullptr;
  // KOLO_BACKEND=nccl: device calls go to NCCL, not kolo's device path.
  bool nccl_backend = false;
  // The device_ipc executor runs here (one host, a device runtime that maps peers' memory).
  bool device_ipc = false;
};

// Parses a KOLO_ALGO value: "" or "auto" = automatic, else an algorithm_name().
Result<Algorithm> parse_algorithm_name(const std::string& name);

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
