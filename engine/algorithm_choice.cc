// Which algorithm runs for which collective and size: one table, until the planner's cost
// model replaces it. Direct wins while per-message latency dominates; ring once bandwidth
// does (it moves 2(p-1)/p of the data per rank instead of (p-1)).
#include "engine/algorithms.h"

namespace kolo {
namespace {

struct Threshold {
  CollKind kind;
  size_t direct_up_to_bytes;  // per-rank message size at or below which direct is used
};

constexpr Threshold kTable[] = {
    {CollKind::kAllreduce, 32 << 10},
    {CollKind::kReduce, 32 << 10},
    {CollKind::kReduceScatter, 8 << 10},
    {CollKind::kAllgather, 32 << 10},
    {CollKind::kAllgatherv, 32 << 10},
    {CollKind::kBroadcast, 256 << 10},
};

Algorithm forced_algorithm(const CollSpec& spec, const PlanContext& ctx) {
  return spec.algorithm != Algorithm::kAuto ? spec.algorithm : ctx.forced;
}

bool has_ring(CollKind kind) {
  switch (kind) {
    case CollKind::kAllreduce: case CollKind::kReduce: case CollKind::kReduceScatter:
    case CollKind::kAllgather: case CollKind::kAllgatherv: case CollKind::kBroadcast:
      return true;
    default:
      return false;
  }
}

}  // namespace

Algorithm choose_algorithm(const CollSpec& spec, const PlanContext& ctx) {
  if (!has_ring(spec.kind)) return Algorithm::kDirect;
  Algorithm forced = forced_algorithm(spec, ctx);
  if (forced != Algorithm::kAuto) return forced;
  size_t bytes = spec.bytes();
  if (spec.kind == CollKind::kAllgatherv) {
    bytes = 0;
    for (size_t c : spec.counts) bytes = std::max(bytes, c * dtype_size(spec.dtype));
  }
  for (const Threshold& t : kTable) {
    if (t.kind == spec.kind) return bytes <= t.direct_up_to_bytes && ctx.size <= 16 ? Algorithm::kDirect : Algorithm::kRing;
  }
  return Algorithm::kRing;
}

Schedule build_schedule(const CollSpec& spec, const PlanContext& ctx) {
  const bool ring = choose_algorithm(spec, ctx) == Algorithm::kRing;
  switch (spec.kind) {
    case CollKind::kAllreduce: return ring ? ring_allreduce(spec, ctx) : direct_allreduce(spec, ctx);
    case CollKind::kReduce: return ring ? ring_reduce(spec, ctx) : direct_reduce(spec, ctx);
    case CollKind::kReduceScatter: return ring ? ring_reduce_scatter(spec, ctx) : direct_reduce_scatter(spec, ctx);
    case CollKind::kAllgather:
    case CollKind::kAllgatherv: return ring ? ring_allgather(spec, ctx) : direct_allgather(spec, ctx);
    case CollKind::kBroadcast: return ring ? ring_broadcast(spec, ctx) : direct_broadcast(spec, ctx);
    case CollKind::kAlltoall: return direct_alltoall(spec, ctx);
    case CollKind::kBarrier: return dissemination_barrier(spec, ctx);
    case CollKind::kSend:
    case CollKind::kRecv: return point_to_point(spec, ctx);
  }
  return Schedule{};
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
