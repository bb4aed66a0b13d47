#include "engine/planner/local_model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace kolo {
namespace {

// What one collective costs, in the pattern's own terms: bytes the busiest rank copies and
// reduces (output bytes of a reduce over all p slots), the same summed over all ranks
// (what the cores share when there are more ranks than cores), chunks and waits per chunk.
struct Pattern {
  double busiest_copy = 0, busiest_reduce = 0;
  double total_copy = 0, total_reduce = 0;
  // Bytes of the caller's buffers the busiest rank reads (input) and writes (output): past
  // the cache these stream from DRAM, while the slots (4 per rank) stay cached.
  double busiest_stream = 0;
  double chunks = 1;
  int waits_per_chunk = 1;
};

Pattern pattern_of(CollKind kind, LocalAlgorithm algorithm, double n, double p, double slot) {
  Pattern w;
  auto chunks_of = [&](double bytes) { return std::max(1.0, std::ceil(bytes / slot)); };
  const bool one_shot = algorithm == LocalAlgorithm::kOneShot;
  switch (kind) {
    case CollKind::kAllreduce:
      // fill (n), then one-shot: reduce n from p slots; two-shot: reduce n/p, copy n out.
      w.busiest_copy = one_shot ? n : 2 * n;
      w.busiest_reduce = one_shot ? n : n / p;
      w.total_copy = p * w.busiest_copy;
      w.total_reduce = p * w.busiest_reduce;
      w.busiest_stream = 2 * n;
      w.chunks = chunks_of(n);
      w.waits_per_chunk = one_shot ? 1 : 2;
      break;
    case CollKind::kReduce:
      // The root is the busiest: as allreduce. One-shot: only the root reduces; two-shot:
      // everyone reduces a slice, only the root copies out.
      w.busiest_copy = one_shot ? n : 2 * n;
      w.busiest_reduce = one_shot ? n : n / p;
      w.total_copy = one_shot ? p * n : (p + 1) * n;
      w.total_reduce = n;
      w.busiest_stream = 2 * n;
      w.chunks = chunks_of(n);
      w.waits_per_chunk = one_shot ? 1 : 2;
      break;
    case CollKind::kReduceScatter:
      // n = the whole input: every rank copies all of it in and reduces its n/p block.
      w.busiest_copy = n;
      w.busiest_reduce = n / p;
      w.total_copy = p * n;
      w.total_reduce = n;
      w.busiest_stream = n + n / p;
      w.chunks = chunks_of(n);
      break;
    case CollKind::kAllgather:
    case CollKind::kAllgatherv:
      // n = the whole output: my block in (and into my output), the p - 1 others out.
      w.busiest_copy = 2 * n / p + n * (p - 1) / p;
      w.total_copy = p * w.busiest_copy;
      w.busiest_stream = n / p + n;
      w.chunks = chunks_of(n / p);
      break;
    case CollKind::kAlltoall:
      w.busiest_copy = n + n * (p - 1) / p;
      w.total_copy = p * w.busiest_copy;
      w.busiest_stream = 2 * n;
      w.chunks = chunks_of(n);
      break;
    case CollKind::kBroadcast:
      // The root copies in (and to its output), the others copy out.
      w.busiest_copy = 2 * n;
      w.total_copy = (p + 1) * n;
      w.busiest_stream = 2 * n;
      w.chunks = chunks_of(n);
      break;
    default:  // barrier: one wait, no data
      w.chunks = 1;
      break;
  }
  return w;
}

}  // namespace

double predict_local_us(CollKind kind, LocalAlgorithm algorithm, size_t bytes, int ranks, size_t slot_bytes,
                        int cores, const PlannerParams& params) {
  if (ranks <= 1) return params.shm_call_us;
  const double p = ranks, n = static_cast<double>(bytes);
  const double slot = slot_bytes > 0 ? static_cast<double>(slot_bytes) : params.shm_chunk_bytes;
  const Pattern w = pattern_of(kind, algorithm, n, p, slot);
  cores = std::max(1, cores);
  const bool oversubscribed = ranks > cores;
  const double copy_us = 1 / (params.shm_copy_gbs * 1e3);
  // Reducing p slots reads p streams and writes one: (p + 1) / 3 times a 2-input reduce's
  // traffic per output byte.
  const double reduce_us = (p + 1) / 3 / (params.shm_reduce_gbs * 1e3);
  // Past the last-level cache the caller's input and output stream from DRAM (the working
  // set: every rank's input and output plus its four slots); the slots stay cached.
  const double working_set = p * (2 * n + 4 * std::min(n, slot));
  const double dram_us = working_set > params.shm_cache_bytes ? 1 / (params.shm_dram_gbs * 1e3) : 0.0;
  const double stream = w.busiest_stream * dram_us;
  const double busiest = w.busiest_copy * copy_us + w.busiest_reduce * reduce_us + stream;
  const double total = w.total_copy * copy_us + w.total_reduce * reduce_us + p * stream;
  // Ranks <= cores: each rank on its own core, the waits are cache-line hand-offs. More
  // ranks: each wait is a scheduler round trip (sched_yield or a futex wake-up) per rank
  // beyond the cores, and the cores share all ranks' work. Where the ranks move in lock
  // step (two-shot's two waits per chunk, or fewer chunks than the four slots) they reach
  // each wait in turns of `cores` at a time, ceil(p / cores) turns (3 ranks on 2 cores:
  // the third runs while a core idles); one-shot over many chunks lets ranks run up to
  // four slots ahead, so the work spreads evenly, p / cores. Measured: 3 ranks, 64 MB,
  // one-shot 14.3 ms where two-shot, with less work, takes 16.4.
  const bool lock_step = w.waits_per_chunk > 1 || w.chunks < 4;
  const double turns = lock_step ? std::ceil(p / cores) : p / cores;
  const double work = oversubscribed ? std::max(busiest, turns * total / p) : busiest;
  const double wait_us = oversubscribed ? params.shm_wakeup_us * (p - cores) : params.shm_sync_us;
  return params.shm_call_us + w.chunks * w.waits_per_chunk * wait_us + work;
}

double predict_local_allreduce_us(LocalAlgorithm algorithm, size_t bytes, int ranks, int cores,
                                  const PlannerParams& params) {
  return predict_local_us(CollKind::kAllreduce, algorithm, bytes, ranks,
                          static_cast<size_t>(params.shm_chunk_bytes), cores, params);
}

LocalAlgorithm faster_local_algorithm(CollKind kind, size_t bytes, int ranks, size_t slot_bytes, int cores,
                                      const PlannerParams& params) {
  const double one = predict_local_us(kind, LocalAlgorithm::kOneShot, bytes, ranks, slot_bytes, cores, params);
  const double two = predict_local_us(kind, LocalAlgorithm::kTwoShot, bytes, ranks, slot_bytes, cores, params);
  return two < one ? LocalAlgorithm::kTwoShot : LocalAlgorithm::kOneShot;
}

LocalChoiceTable local_choice_table(CollKind kind, int ranks, size_t slot_bytes, int cores,
                                    const PlannerParams& params) {
  auto pick = [&](size_t bytes) { return faster_local_algorithm(kind, bytes, ranks, slot_bytes, cores, params); };
  LocalChoiceTable t;
  t.smallest = pick(4);
  LocalAlgorithm current = t.smallest;
  size_t lo = 4;
  for (int step = 1; t.flips < LocalChoiceTable::kMaxFlips; ++step) {
    const size_t hi = static_cast<size_t>(4.0 * std::exp2(step / 16.0));
    if (hi > (size_t{1} << 40)) break;
    if (hi <= lo || pick(hi) == current) {
      lo = std::max(lo, hi);
      continue;
    }
    size_t a = lo, b = hi;  // pick(a) == current != pick(b)
    while (b - a > 1) {
      const size_t mid = a + (b - a) / 2;
      if (pick(mid) == current) a = mid; else b = mid;
    }
    t.flip[t.flips++] = b;
    current = pick(b);
    lo = hi;
  }
  return t;
}

}  // namespace kolo
