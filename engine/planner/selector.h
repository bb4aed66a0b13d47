// The selector: predicts every applicable algorithm's time for a collective on a
// communicator with the cost model and picks the fastest. choose_algorithm() (and so
// build_schedule and the communicator) calls it for automatic choices; kolo-plan prints
// what it saw.
#pragma once

#include <vector>

#include "engine/planner/cost_model.h"

namespace kolo {

struct Candidate {
  Algorithm algorithm = Algorithm::kAuto;
  double us = 0;  // predicted time
};

// Algorithms that have a schedule for spec on ctx (forcing one that does not falls back).
bool algorithm_applies(Algorithm algorithm, const CollSpec& spec, const PlanContext& ctx);

// Every applicable algorithm with its predicted time, in Algorithm order.
std::vector<Candidate> predict_all(const CollSpec& spec, const PlanContext& ctx, const CostModel& model);

// The fastest candidate; among those within kPreferWithin of it, the simplest (lowest
// Algorithm value: ring, direct, ...), so near-ties do not flip with noise. Never one
// predicted to be 10 % or more slower than the best.
constexpr double kPreferWithin = 0.02;
Algorithm select_algorithm(const std::vector<Candidate>& candidates);

}  // namespace kolo
