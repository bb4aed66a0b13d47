// Which algorithm runs: a forced one (KOLO_ALGO, or the call's option) where it has a
// schedule for the collective, else the planner's choice (engine/planner/selector.h):
// every applicable algorithm's schedule is timed with the cost model and the fastest
// wins. build_schedule then dispatches to the algorithm's generator.
#include "engine/algorithms.h"
#include "engine/planner/selector.h"
#include "support/log.h"

namespace kolo {

Algorithm choose_algorithm(const CollSpec& spec, const PlanContext& ctx) {
  Algorithm forced = spec.algorithm != Algorithm::kAuto ? spec.algorithm : ctx.forced;
  if (forced != Algorithm::kAuto) {
    if (algorithm_applies(forced, spec, ctx)) return forced;
    // Planning is deterministic, so every rank falls back the same way.
    if (spec.kind != CollKind::kBarrier && spec.kind != CollKind::kSend && spec.kind != CollKind::kRecv) {
      log_info(Subsys::kPlan, algorithm_name(forced), " has no schedule for ", coll_name(spec.kind), " on ", ctx.size,
               " ranks; choosing automatically");
    }
  }
  // Alltoall, barrier, send and recv have one schedule each.
  if (!algorithm_applies(Algorithm::kRing, spec, ctx)) return Algorithm::kDirect;
  if (ctx.size == 1) return Algorithm::kRing;  // every algorithm is one copy
  return select_algorithm(predict_all(spec, ctx, CostModel(ctx)));
}

namespace {

Schedule by_kind(const CollSpec& spec, const PlanContext& ctx, Schedule (*allreduce)(const CollSpec&, const PlanContext&),
                 Schedule (*fallback)(const CollSpec&, const PlanContext&)) {
  return spec.kind == CollKind::kAllreduce ? allreduce(spec, ctx) : fallback(spec, ctx);
}

Schedule direct_for(const CollSpec& spec, const PlanContext& ctx) {
  switch (spec.kind) {
    case CollKind::kAllreduce: return direct_allreduce(spec, ctx);
    case CollKind::kReduce: return direct_reduce(spec, ctx);
    case CollKind::kReduceScatter: return direct_reduce_scatter(spec, ctx);
    case CollKind::kAllgather:
    case CollKind::kAllgatherv: return direct_allgather(spec, ctx);
    case CollKind::kBroadcast: return direct_broadcast(spec, ctx);
    case CollKind::kAlltoall: return direct_alltoall(spec, ctx);
    case CollKind::kBarrier: return dissemination_barrier(spec, ctx);
    case CollKind::kSend:
    case CollKind::kRecv: return point_to_point(spec, ctx);
  }
  return Schedule{};
}

Schedule ring_for(const CollSpec& spec, const PlanContext& ctx) {
  switch (spec.kind) {
    case CollKind::kAllreduce: return ring_allreduce(spec, ctx);
    case CollKind::kReduce: return ring_reduce(spec, ctx);
    case CollKind::kReduceScatter: return ring_reduce_scatter(spec, ctx);
    case CollKind::kAllgather:
    case CollKind::kAllgatherv: return ring_allgather(spec, ctx);
    case CollKind::kBroadcast: return ring_broadcast(spec, ctx);
    default: return direct_for(spec, ctx);
  }
}

Schedule tree_for(const CollSpec& spec, const PlanContext& ctx) {
  switch (spec.kind) {
    case CollKind::kAllreduce: return tree_allreduce(spec, ctx);
    case CollKind::kReduce: return tree_reduce(spec, ctx);
    case CollKind::kBroadcast: return tree_broadcast(spec, ctx);
    default: return direct_for(spec, ctx);
  }
}

Schedule halving_doubling_for(const CollSpec& spec, const PlanContext& ctx) {
  switch (spec.kind) {
    case CollKind::kAllreduce: return halving_doubling_allreduce(spec, ctx);
    case CollKind::kReduceScatter: return halving_doubling_reduce_scatter(spec, ctx);
    case CollKind::kAllgather: return halving_doubling_allgather(spec, ctx);
    default: return direct_for(spec, ctx);
  }
}

}  // namespace

Schedule build_schedule(const CollSpec& spec, const PlanContext& ctx) {
  switch (choose_algorithm(spec, ctx)) {
    case Algorithm::kAuto:
    case Algorithm::kDirect: return direct_for(spec, ctx);
    case Algorithm::kRing: return ring_for(spec, ctx);
    case Algorithm::kTree: return tree_for(spec, ctx);
    case Algorithm::kHalvingDoubling: return halving_doubling_for(spec, ctx);
    case Algorithm::kHierarchical: return by_kind(spec, ctx, hierarchical_allreduce, direct_for);
    case Algorithm::kOneShot: return by_kind(spec, ctx, one_shot_allreduce, direct_for);
    case Algorithm::kTwoShot: return by_kind(spec, ctx, two_shot_allreduce, direct_for);
  }
  return direct_for(spec, ctx);
}

Result<Algorithm> parse_algorithm_name(const std::string& name) {
  if (name.empty() || name == "auto") return Algorithm::kAuto;
  for (int a = 1; a < kAlgorithmCount; ++a) {
    if (name == algorithm_name(static_cast<Algorithm>(a))) return static_cast<Algorithm>(a);
  }
  return error(Code::kInvalidArgument, "KOLO_ALGO='", name,
               "' is not auto, ring, direct, tree, halving_doubling, hierarchical, one_shot or two_shot");
}

const char* coll_name(CollKind kind) {
  switch (kind) {
    case CollKind::kAllreduce: return "allreduce";
    case CollKind::kBroadcast: return "broadcast";
    case CollKind::kReduce: return "reduce";
    case CollKind::kAllgather: return "allgather";
    case CollKind::kAllgatherv: return "allgatherv";
    case CollKind::kReduceScatter: return "reduce_scatter";
    case CollKind::kAlltoall: return "alltoall";
    case CollKind::kSend: return "send";
    case CollKind::kRecv: return "recv";
    case CollKind::kBarrier: return "barrier";
  }
  return "?";
}

const char* algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kAuto: return "auto";
    case Algorithm::kRing: return "ring";
    case Algorithm::kDirect: return "direct";
    case Algorithm::kTree: return "tree";
    case Algorithm::kHalvingDoubling: return "halving_doubling";
    case Algorithm::kHierarchical: return "hierarchical";
    case Algorithm::kOneShot: return "one_shot";
    case Algorithm::kTwoShot: return "two_shot";
  }
  return "?";
}

}  // namespace kolo
