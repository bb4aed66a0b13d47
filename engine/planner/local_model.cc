#include "engine/planner/local_model.h"

#include <algorithm>
#include <cmath>

namespace kolo {

double predict_local_allreduce_us(LocalAlgorithm algorithm, size_t bytes, int ranks, int cores,
                                  const PlannerParams& params) {
  if (ranks <= 1 || bytes == 0) return params.shm_sync_us;
  const double p = ranks;
  // Ranks beyond the cores take turns; memory bandwidth is shared by the busy cores.
  const double share = std::max(1.0, p / std::max(1, cores));
  const double chunks = std::max(1.0, std::ceil(static_cast<double>(bytes) / params.shm_chunk_bytes));
  const double copy_us_per_byte = 1.0 / (params.shm_copy_gbs * 1e3);
  const double reduce_us_per_byte = 1.0 / (params.shm_reduce_gbs * 1e3);
  const double n = static_cast<double>(bytes);
  if (algorithm == LocalAlgorithm::kOneShot) {
    // Each rank publishes its input (one copy), one barrier, then reduces all p inputs
    // (a p-input reduce reads p streams: (p+1)/3 times a 2-input reduce's traffic).
    return 2 * params.shm_sync_us + share * (n * copy_us_per_byte + n * reduce_us_per_byte * (p + 1) / 3);
  }
  // Two-shot, chunked: per chunk publish, barrier, reduce 1/p of it from p inputs,
  // barrier, gather the p - 1 other parts, barrier.
  const double work = n * copy_us_per_byte + (n / p) * reduce_us_per_byte * (p + 1) / 3 + n * (p - 1) / p * copy_us_per_byte;
  return 3 * params.shm_sync_us * chunks + share * work;
}

}  // namespace kolo
