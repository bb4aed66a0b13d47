#include "engine/planner/selector.h"

#include <algorithm>

#include "engine/planner/plan.h"
#include "engine/planner/simulate.h"

namespace kolo {
bool algorithm_applies(Algorithm algorithm, const CollSpec& spec, const PlanContext& ctx) {
  return algorithm_serves(algorithm, ExecutorKind::kSchedule, spec, ctx);
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
