// plan(): the one place that decides how a collective runs: the routes at the end (one per
// executor, the first that serves a call plans it). The table below is the one
// list of which algorithm serves which collective on which executor; choose_algorithm
// (schedules, by the cost model), choose_local_algorithm (one host, local_choice.cc) and
// the selector read it.
#include "engine/planner/plan.h"

#include <algorithm>
#include <iterator>

#include "engine/planner/compressed_model.h"
#include "engine/planner/device_ipc_model.h"
#include "engine/planner/selector.h"
#include "engine/planner/staged_chunking.h"
#include "engine/verifier/verifier.h"
#include "kernels/flagged_body.h"
#include "support/log.h"

namespace kolo {
namespace {

using Generator = Schedule (*)(const CollSpec&, const PlanContext&);

struct AlgorithmRow {
  Algorithm algorithm;
  ExecutorKind executor;
  CollKind kind;
  Generator generate;  // kSchedule rows: the schedule generator; kLocal rows: none (the
                       // pipeline in engine/local runs the algorithm for the collective)
};

constexpr ExecutorKind kSched = ExecutorKind::kSchedule;
constexpr ExecutorKind kLocal = ExecutorKind::kLocal;

// Which algorithm serves which collective, on which executor.
constexpr AlgorithmRow kTable[] = {
    {Algorithm::kRing, kSched, CollKind::kAllreduce, ring_allreduce},
    {Algorithm::kRing, kSched, CollKind::kReduce, ring_reduce},
    {Algorithm::kRing, kSched, CollKind::kReduceScatter, ring_reduce_scatter},
    {Algorithm::kRing, kSched, CollKind::kAllgather, ring_allgather},
    {Algorithm::kRing, kSched, CollKind::kAllgatherv, ring_allgather},
    {Algorithm::kRing, kSched, CollKind::kBroadcast, ring_broadcast},
    {Algorithm::kDirect, kSched, CollKind::kAllreduce, direct_allreduce},
    {Algorithm::kDirect, kSched, CollKind::kReduce, direct_reduce},
    {Algorithm::kDirect, kSched, CollKind::kReduceScatter, direct_reduce_scatter},
    {Algorithm::kDirect, kSched, CollKind::kAllgather, direct_allgather},
    {Algorithm::kDirect, kSched, CollKind::kAllgatherv, direct_allgather},
    {Algorithm::kDirect, kSched, CollKind::kBroadcast, direct_broadcast},
    {Algorithm::kDirect, kSched, CollKind::kAlltoall, direct_alltoall},
    {Algorithm::kDirect, kSched, CollKind::kBarrier, dissemination_barrier},
    {Algorithm::kDirect, kSched, CollKind::kSend, point_to_point},
    {Algorithm::kDirect, kSched, CollKind::kRecv, point_to_point},
    {Algorithm::kTree, kSched, CollKind::kAllreduce, tree_allreduce},
    {Algorithm::kTree, kSched, CollKind::kReduce, tree_reduce},
    {Algorithm::kTree, kSched, CollKind::kBroadcast, tree_broadcast},
    {Algorithm::kHalvingDoubling, kSched, CollKind::kAllreduce, halving_doubling_allreduce},
    {Algorithm::kHalvingDoubling, kSched, CollKind::kReduceScatter, halving_doubling_reduce_scatter},
    {Algorithm::kHalvingDoubling, kSched, CollKind::kAllgather, halving_doubling_allgather},
    {Algorithm::kHierarchical, kSched, CollKind::kAllreduce, hierarchical_allreduce},  // balanced hosts only
    {Algorithm::kOneShot, kSched, CollKind::kAllreduce, one_shot_allreduce},
    {Algorithm::kTwoShot, kSched, CollKind::kAllreduce, two_shot_allreduce},
    // One host: every rank reads its peers' staging slots (engine/local); the collectives
    // other than allreduce and reduce have one pipeline, a single pass: one-shot.
    {Algorithm::kOneShot, kLocal, CollKind::kAllreduce, nullptr},
    {Algorithm::kTwoShot, kLocal, CollKind::kAllreduce, nullptr},
    {Algorithm::kOneShot, kLocal, CollKind::kReduce, nullptr},
    {Algorithm::kTwoShot, kLocal, CollKind::kReduce, nullptr},
    {Algorithm::kOneShot, kLocal, CollKind::kBroadcast, nullptr},
    {Algorithm::kOneShot, kLocal, CollKind::kAllgather, nullptr},
    {Algorithm::kOneShot, kLocal, CollKind::kAllgatherv, nullptr},
    {Algorithm::kOneShot, kLocal, CollKind::kReduceScatter, nullptr},
    {Algorithm::kOneShot, kLocal, CollKind::kAlltoall, nullptr},
    {Algorithm::kOneShot, kLocal, CollKind::kBarrier, nullptr},
};

const AlgorithmRow* find_row(Algorithm algorithm, ExecutorKind executor, CollKind kind) {
  for (const AlgorithmRow& row : kTable) {
    if (row.algorithm == algorithm && row.executor == executor && row.kind == kind) return &row;
  }
  return nullptr;
}

// Hierarchical needs several hosts with the same number of ranks each (rank i of every
// host meets rank i of the others), and more than one rank per host to be worth it.
bool balanced_hosts(const PlanContext& ctx) {
  if (ctx.host_of_rank == nullptr || static_cast<int>(ctx.host_of_rank->size()) != ctx.size) return false;
  std::vector<int> per_host;
  for (int h : *ctx.host_of_rank) {
    if (h < 0 || h >= ctx.size) return false;
    if (h >= static_cast<int>(per_host.size())) per_host.resize(h + 1, 0);
    ++per_host[h];
  }
  if (per_host.size() < 2 || per_host[0] < 2) return false;
  return std::all_of(per_host.begin(), per_host.end(), [&](int n) { return n == per_host[0]; });
}

}  // namespace

Algorithm forced_for(const CollSpec& spec, const PlanContext& ctx) {
  return spec.algorithm != Algorithm::kAuto ? spec.algorithm : ctx.forced;
}

// The one-host executor takes a single call when the whole communicator shares memory and
// no algorithm of the schedule executor is forced.
bool plan_runs_locally(const CollSpec& spec, const PlanContext& ctx, bool grouped) {
  if (grouped || spec.device || !ctx.shared_memory || spec.empty()) return false;
  const Algorithm forced = forced_for(spec, ctx);
  if (forced != Algorithm::kAuto && forced != Algorithm::kOneShot && forced != Algorithm::kTwoShot) return false;
  return std::any_of(std::begin(kTable), std::end(kTable),
                     [&](const AlgorithmRow& row) { return row.executor == kLocal && row.kind == spec.kind; });
}

// Allreduce over the links with a wire type: the flat two-shot or, on hosts of equal size,
// the hierarchical form; forced (KOLO_ALGO, the call) or by the model
// (compressed_model.h). reduce_scatter and allgather have the two-shot's phases only.
Algorithm choose_compressed_algorithm(const CollSpec& spec, const PlanContext& ctx) {
  if (spec.kind != CollKind::kAllreduce || !balanced_hosts(ctx)) return Algorithm::kTwoShot;
  const Algorithm forced = forced_for(spec, ctx);
  if (forced == Algorithm::kHierarchical || forced == Algorithm::kTwoShot) return forced;
  const CompressedCost cost = predict_compressed_allreduce(spec, CostModel(ctx));
  return cost.hierarchical_us > 0 && cost.hierarchical_us < cost.flat_us ? Algorithm::kHierarchical
                                                                         : Algorithm::kTwoShot;
}

bool all_peers_affordable(const PlanContext& ctx) {
  if (!ctx.lazy_links || ctx.host_of_rank == nullptr || ctx.size <= 2) return true;
  // The same answer on every rank: the ranks off the smallest host, against 2 log2 N.
  std::vector<int> per_host;
  for (int h : *ctx.host_of_rank) {
    if (h >= static_cast<int>(per_host.size())) per_host.resize(h + 1, 0);
    ++per_host[h];
  }
  int smallest = ctx.size;
  for (int count : per_host) {
    if (count > 0) smallest = std::min(smallest, count);
  }
  const int remote = ctx.size - smallest;
  int log2n = 0;
  while ((1 << log2n) < ctx.size) ++log2n;
  return remote <= 2 * log2n;
}

bool algorithm_serves(Algorithm algorithm, ExecutorKind executor, const CollSpec& spec, const PlanContext& ctx) {
  if (find_row(algorithm, executor, spec.kind) == nullptr) return false;
  // All-peer schedules over lazy links: not past 2 log2 N remote peers (alltoall, barrier,
  // send and recv keep theirs: choose_algorithm gives them their one schedule).
  const bool all_peers =
      executor == ExecutorKind::kSchedule &&
      (algorithm == Algorithm::kDirect || algorithm == Algorithm::kOneShot || algorithm == Algorithm::kTwoShot);
  if (all_peers && spec.kind != CollKind::kAlltoall && !all_peers_affordable(ctx)) return false;
  return algorithm != Algorithm::kHierarchical || balanced_hosts(ctx);
}

namespace {

// Each route fills in the rest of a Plan whose executor it is (p->executor set).
void plan_on_nccl(const CollSpec&, const PlanContext&, bool, Plan* p) {
  p->algorithm = Algorithm::kAuto;  // NCCL chooses
  p->protocol = Protocol::kNccl;
}

void plan_on_device_ipc_route(const CollSpec& spec, const PlanContext& ctx, bool, Plan* p) {
  plan_on_device_ipc(spec, ctx, p);
}

// Everything else on device buffers: copy to pinned host memory, run the host plan of the
// same call there, copy back, all in the caller's stream order. A single call is cut in
// chunks (the executor runs them one after another through the ring of pinned slots); a
// group is one chunk. The host plan is plan()'s own for the host call.
void plan_staged(const CollSpec& spec, const PlanContext& ctx, bool grouped, Plan* p) {
  CollSpec host = spec;
  host.device = false;
  host.registered = false;
  p->chunk_elems = grouped ? 0 : staged_chunk_elems(spec, ctx.size);
  if (p->chunk_elems != 0) host.count = p->chunk_elems;
  p->chunk_plan = std::make_shared<const Plan>(plan(host, ctx, grouped));
  p->algorithm = p->chunk_plan->algorithm;
  p->protocol = Protocol::kStagedChunks;
}

// One host, shared memory: only allreduce and reduce have a choice of algorithm (the
// one-host model's); the others run their one pipeline. Then the protocol (fast boxes or
// the slots, in the domain's slot-sized chunks) and whether outputs bypass the caches.
void plan_local(const CollSpec& spec, const PlanContext& ctx, bool, Plan* p) {
  const bool reduces = spec.kind == CollKind::kAllreduce || spec.kind == CollKind::kReduce;
  p->algorithm = choose_local_algorithm(spec, ctx.size, ctx.agreed_cores, ctx.slot_bytes,
                                        reduces ? forced_for(spec, ctx) : Algorithm::kAuto,
                                        ctx.local_params != nullptr ? *ctx.local_params : planner_params());
  p->protocol = choose_local_protocol(spec, ctx, p->algorithm);
  p->barrier = ctx.size > 1 ? BarrierKind::kSharedMemory : BarrierKind::kNone;
  p->streamed_outputs = p->protocol == Protocol::kSlots && output_bytes(spec, ctx.size) >= ctx.stream_bytes;
  p->chunk_bytes = ctx.slot_bytes;
}

// A wire type where shared memory cannot run the call: encoded blocks over the links, each
// contribution encoded once (a ring would re-encode partial sums), in pipelined chunks.
bool compressed_serves(const CollSpec& spec, const PlanContext&, bool grouped) {
  return spec.compressed() && !grouped &&
         (spec.kind == CollKind::kAllreduce || spec.kind == CollKind::kReduceScatter || spec.kind == CollKind::kAllgather);
}
void plan_compressed(const CollSpec& spec, const PlanContext& ctx, bool, Plan* p) {
  p->algorithm = choose_compressed_algorithm(spec, ctx);
  p->chunk_elems = kCompressedChunkValues;
}

void plan_schedule(const CollSpec& spec, const PlanContext& ctx, bool, Plan* p) {
  p->algorithm = choose_algorithm(spec, ctx);
  p->schedule = schedule_of(p->algorithm, spec, ctx);
}

bool nccl_serves(const CollSpec& spec, const PlanContext& ctx, bool) { return spec.device && ctx.nccl_backend; }
bool staged_serves(const CollSpec& spec, const PlanContext&, bool) { return spec.device; }
bool always(const CollSpec&, const PlanContext&, bool) { return true; }

// The routes of plan(), one per executor, in the order they are asked: the first that
// serves a call plans it. Each serves a domain of its own (device buffers under
// KOLO_BACKEND=nccl; device buffers on one host with kernels for the call; other device
// buffers; host buffers of one host sharing memory; wire-typed host calls across hosts;
// everything else, over the links), and ranks its own algorithms and protocols by the cost
// model within it (choose_algorithm, choose_local_algorithm, choose_device_ipc_algorithm,
// device_ipc_flagged, device_ipc_zero_copy, choose_compressed_algorithm).
struct Route {
  ExecutorKind executor;
  bool (*serves)(const CollSpec& spec, const PlanContext& ctx, bool grouped);
  void (*fill)(const CollSpec& spec, const PlanContext& ctx, bool grouped, Plan* p);
};
constexpr Route kRoutes[] = {
    {ExecutorKind::kNccl, nccl_serves, plan_on_nccl},
    {ExecutorKind::kDeviceIpc, plan_runs_on_device_ipc, plan_on_device_ipc_route},
    {ExecutorKind::kDeviceStaged, staged_serves, plan_staged},
    {ExecutorKind::kLocal, plan_runs_locally, plan_local},
    {ExecutorKind::kCompressed, compressed_serves, plan_compressed},
    {ExecutorKind::kSchedule, always, plan_schedule},
};

}  // namespace

Plan plan(const CollSpec& spec, const PlanContext& ctx, bool grouped) {
  Plan p;
  for (const Route& route : kRoutes) {
    if (!route.serves(spec, ctx, grouped)) continue;
    p.executor = route.executor;
    route.fill(spec, ctx, grouped, &p);
    return p;
  }
  return p;  // not reached: the schedule route serves every call
}

Algorithm choose_algorithm(const CollSpec& spec, const PlanContext& ctx) {
  const Algorithm forced = forced_for(spec, ctx);
  if (forced != Algorithm::kAuto) {
    if (algorithm_serves(forced, kSched, spec, ctx)) return forced;
    // Planning is deterministic, so every rank falls back the same way.
    if (spec.kind != CollKind::kBarrier && spec.kind != CollKind::kSend && spec.kind != CollKind::kRecv) {
      log_info(Subsys::kPlan, algorithm_name(forced), " has no schedule for ", coll_name(spec.kind), " on ", ctx.size,
               " ranks; choosing automatically");
    }
  }
  // Alltoall, barrier, send and recv have one schedule each.
  if (!algorithm_serves(Algorithm::kRing, kSched, spec, ctx)) return Algorithm::kDirect;
  if (ctx.size == 1) return Algorithm::kRing;  // every algorithm is one copy
  if (ctx.size > kSimulatedRanksMost) return large_communicator_choice(spec, ctx);
  return select_algorithm(predict_all(spec, ctx, CostModel(ctx)));
}

// Past kSimulatedRanksMost ranks the event simulator is not asked: it builds and runs every
// rank's schedule for every algorithm, O(N^2) steps per rank and size (0.5 s of CPU and
// 100 MB at 256 ranks, on every rank, for every new size: a job of 256 ranks on one machine
// ran out of memory in its first call). Instead the choice the simulator makes at 64 ranks
// for every size: latency-bound sizes by halving-doubling (log2 N steps; tree where it is
// the one with log2 N steps), bandwidth-bound ones by the two-level schedule over balanced
// hosts, else the ring. An analytic model that keeps the cost table's choice at any N is
// the next step (docs/scale.md).
Algorithm large_communicator_choice(const CollSpec& spec, const PlanContext& ctx) {
  const bool large = spec.bytes() >= (size_t{1} << 20);
  auto serves = [&](Algorithm a) { return algorithm_serves(a, kSched, spec, ctx); };
  if (large) return serves(Algorithm::kHierarchical) ? Algorithm::kHierarchical : Algorithm::kRing;
  if (serves(Algorithm::kHalvingDoubling)) return Algorithm::kHalvingDoubling;
  if (serves(Algorithm::kTree)) return Algorithm::kTree;
  return Algorithm::kRing;
}

Schedule schedule_of(Algorithm algorithm, const CollSpec& spec, const PlanContext& ctx) {
  const AlgorithmRow* row = find_row(algorithm, kSched, spec.kind);
  if (row == nullptr) row = find_row(Algorithm::kDirect, kSched, spec.kind);
  return row->generate(spec, ctx);
}

Schedule build_schedule(const CollSpec& spec, const PlanContext& ctx) {
  return schedule_of(choose_algorithm(spec, ctx), spec, ctx);
}

Status verify_collective(const CollSpec& spec, int ranks, size_t chunk_bytes) {
  return verify_collective(spec, PlanContext{0, ranks, chunk_bytes});
}

Status verify_collective(const CollSpec& spec, const PlanContext& ctx) {
  std::vector<Schedule> schedules;
  schedules.reserve(ctx.size);
  for (int r = 0; r < ctx.size; ++r) {
    PlanContext c = ctx;
    c.rank = r;
    schedules.push_back(build_schedule(spec_for_rank(spec, r), c));
  }
  return verify_schedules(spec, schedules);
}

}  // namespace kolo
