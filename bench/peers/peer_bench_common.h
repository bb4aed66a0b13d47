// What the peer benchmarks (Open MPI, MPICH, Gloo) share with kolo-perf: size arguments,
// the latency summary, and the data and result check kolo-perf uses, so the tables compare
// line by line.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <vector>

namespace peer_bench {

// "64", "32K", "8M", "1G".
inline size_t parse_size(const char* text) {
  char* end = nullptr;
  double value = std::strtod(text, &end);
  double scale = *end == 'K' ? 1 << 10 : *end == 'M' ? 1 << 20 : *end == 'G' ? double(1 << 30) : 1;
  return static_cast<size_t>(value * scale);
}

// --latency: min, median and p99 (nearest rank) of every rank's every timed call, pooled;
// kolo-perf and the peers report the same way. Sorts `pooled`.
struct LatencySummary {
  double min = 0, p50 = 0, p99 = 0;
};
inline LatencySummary summarize_latency(std::vector<double>& pooled) {
  if (pooled.empty()) return {};
  std::sort(pooled.begin(), pooled.end());
  auto at = [&](double q) {
    const size_t k = static_cast<size_t>(std::ceil(q * pooled.size()));
    return pooled[std::min(pooled.size() - 1, k > 0 ? k - 1 : 0)];
  };
  return {pooled.front(), at(0.50), at(0.99)};
}

// Rank r's input element i.
inline float input_value(size_t i, int rank) { return static_cast<float>((i + 2 * rank) % 5); }

// Elements of a float-sum allreduce result that are wrong.
inline long count_wrong(const std::vector<float>& recv, int size) {
  long wrong = 0;
  for (size_t i = 0; i < recv.size(); ++i) {
    float expected = 0;
    for (int r = 0; r < size; ++r) expected += input_value(i, r);
    if (recv[i] != expected) ++wrong;
  }
  return wrong;
}

}  // namespace peer_bench
