#include "engine/planner/selector.h"

#include <algorithm>

#include "engine/planner/simulate.h"

namespace kolo {
namespace {

bool is_one_of(CollKind kind, std::initializer_list<CollKind> kinds) {
  return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
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

bool algorithm_applies(Algorithm algorithm, const CollSpec& spec, const PlanContext& ctx) {
  const CollKind k = spec.kind;
  if (is_one_of(k, {CollKind::kSend, CollKind::kRecv, CollKind::kBarrier})) return algorithm == Algorithm::kDirect;
  switch (algorithm) {
    case Algorithm::kAuto: return false;
    case Algorithm::kDirect: return true;
    case Algorithm::kRing:
      return is_one_of(k, {CollKind::kAllreduce, CollKind::kReduce, CollKind::kReduceScatter, CollKind::kAllgather,
                           CollKind::kAllgatherv, CollKind::kBroadcast});
    case Algorithm::kTree: return is_one_of(k, {CollKind::kAllreduce, CollKind::kBroadcast, CollKind::kReduce});
    case Algorithm::kHalvingDoubling:
      return is_one_of(k, {CollKind::kAllreduce, CollKind::kReduceScatter, CollKind::kAllgather});
    case Algorithm::kHierarchical: return k == CollKind::kAllreduce && balanced_hosts(ctx);
    case Algorithm::kOneShot:
    case Algorithm::kTwoShot: return k == CollKind::kAllreduce;
  }
  return false;
}

std::vector<Candidate> predict_all(const CollSpec& spec, const PlanContext& ctx, const CostModel& model) {
  std::vector<Candidate> out;
  for (int a = 1; a < kAlgorithmCount; ++a) {
    Algorithm algo = static_cast<Algorithm>(a);
    if (!algorithm_applies(algo, spec, ctx)) continue;
    Result<double> us = predict_us(spec, ctx, algo, model);
    if (us.ok()) out.push_back({algo, us.value()});
  }
  return out;
}

Algorithm select_algorithm(const std::vector<Candidate>& candidates) {
  if (candidates.empty()) return Algorithm::kDirect;
  double best = candidates[0].us;
  for (const Candidate& c : candidates) best = std::min(best, c.us);
  for (const Candidate& c : candidates) {  // in Algorithm order: the simplest near-best
    if (c.us <= best * (1 + kPreferWithin)) return c.algorithm;
  }
  return candidates[0].algorithm;
}

}  // namespace kolo
