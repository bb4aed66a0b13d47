// The one-host executor's choice between one-shot and two-shot, taken from the
// planner's one-host model (engine/planner/local_model.h) instead of a size table.
//
// It runs on every call, 8-byte allreduces of about a microsecond included, so it must not
// evaluate the model each time: per shape (collective, ranks, slot size) the model's
// crossover size is computed once, by bisection, and a call compares its size with it.
// The last shape is kept per thread (a program runs the same communicator again and
// again); a different shape recomputes, ~100 model evaluations, a few microseconds.
#include "engine/planner/plan.h"

#include <algorithm>
#include <cstdint>
#include "engine/planner/local_model.h"

namespace kolo {
namespace {

struct Crossover {
  CollKind kind = CollKind::kBarrier;  // no shape yet
  int ranks = 0;
  int cores = 0;
  size_t slot_bytes = 0;
  double copy_gbs = 0;  // which params (scaled_for_host gives each machine its own)
  double cache_bytes = 0;
  LocalChoiceTable table;
};

}  // namespace

Algorithm choose_local_algorithm(const CollSpec& spec, int ranks, int cores, size_t slot_bytes, Algorithm forced,
                                 const PlannerParams& params) {
  if (forced == Algorithm::kOneShot || forced == Algorithm::kTwoShot) return forced;
  // The other collectives have one pipeline, a single pass over the peers' slots.
  if (spec.kind != CollKind::kAllreduce && spec.kind != CollKind::kReduce) return Algorithm::kOneShot;
  thread_local Crossover last;
  if (last.kind != spec.kind || last.ranks != ranks || last.cores != cores || last.slot_bytes != slot_bytes ||
      last.copy_gbs != params.shm_copy_gbs || last.cache_bytes != params.shm_cache_bytes) {
    last.table = local_choice_table(spec.kind, ranks, slot_bytes, cores, params);
    last.kind = spec.kind;
    last.ranks = ranks;
    last.cores = cores;
    last.slot_bytes = slot_bytes;
    last.copy_gbs = params.shm_copy_gbs;
    last.cache_bytes = params.shm_cache_bytes;
  }
  return last.table.choose(spec.bytes()) == LocalAlgorithm::kTwoShot ? Algorithm::kTwoShot : Algorithm::kOneShot;
}

namespace {

// Bytes one rank contributes to a call: what must fit its fast box.
size_t contribution_bytes(const CollSpec& s, int ranks) {
  switch (s.kind) {
    case CollKind::kAllreduce:
    case CollKind::kReduce:
    case CollKind::kBroadcast:
    case CollKind::kAllgather: return s.bytes();
    case CollKind::kReduceScatter:
    case CollKind::kAlltoall: return s.bytes() * ranks;  // a block for every rank
    case CollKind::kAllgatherv: {
      size_t most = 0;
      for (size_t c : s.counts) most = std::max(most, c);
      return most * dtype_size(s.dtype);
    }
    case CollKind::kBarrier: return 0;
    default: return SIZE_MAX;  // no fast form
  }
}

}  // namespace

// Fast boxes take a one-shot call (a forced two-shot keeps the slots) of host buffers
// without a wire type, decided from what every rank passes alike: a rank that took the
// slots where its peer took a box (their calls differ) is noticed by the op signatures.
Protocol choose_local_protocol(const CollSpec& spec, const PlanContext& ctx, Algorithm algorithm) {
  const bool fast = algorithm != Algorithm::kTwoShot && !spec.compressed() && !spec.device &&
                    contribution_bytes(spec, ctx.size) <= ctx.fast_box_bytes;
  return fast ? Protocol::kFastBox : Protocol::kSlots;
}

size_t output_bytes(const CollSpec& s, int ranks) {
  switch (s.kind) {
    case CollKind::kAllgather:
    case CollKind::kAlltoall: return s.bytes() * ranks;
    case CollKind::kAllgatherv: {
      size_t count = 0;
      for (size_t c : s.counts) count += c;
      return count * dtype_size(s.dtype);
    }
    default: return s.bytes();
  }
}

}  // namespace kolo
