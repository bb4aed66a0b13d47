// What the peer benchmarks (Open MPI, Gloo) share: size arguments and the result check,
// the same data kolo-perf uses, so the three tables compare line by line.
#pragma once

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
