// What the schedule and recorded-program tests share (verifier, planner_algorithms,
// local_program_verify and device_program_verify tests): which collectives take a root or
// reduce, and uneven allgatherv counts.
#pragma once

#include <cstddef>

#include "engine/collective.h"

namespace kolo::program_test {

inline bool rooted(CollKind kind) { return kind == CollKind::kReduce || kind == CollKind::kBroadcast; }
inline bool reduction(CollKind kind) {
  return kind == CollKind::kAllreduce || kind == CollKind::kReduce || kind == CollKind::kReduceScatter;
}

// An allgatherv's counts and displacements: `count` on even ranks, small and uneven on odd
// ones, with gaps between the blocks.
inline void uneven_counts(CollSpec& spec, int p, size_t count) {
  spec.counts.assign(p, 0);
  spec.displs.assign(p, 0);
  size_t at = 0;
  for (int q = 0; q < p; ++q) {
    spec.counts[q] = q % 2 == 0 ? count : (count + q) % 5 + 1;
    spec.displs[q] = at;
    at += spec.counts[q] + q % 2;
  }
}

}  // namespace kolo::program_test
