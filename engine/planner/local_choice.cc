// The one-host executor's choice between one-shot and two-shot, taken from the
// planner's one-host model (engine/planner/local_model.h) instead of a size table.
//
// It runs on every call, 8-byte allreduces of about a microsecond included, so it must not
// evaluate the model each time: per shape (collective, ranks, slot size) the model's
// crossover size is computed once, by bisection, and a call compares its size with it.
// The last shape is kept per thread (a program runs the same communicator again and
// again); a different shape recomputes, ~100 model evaluations, a few microseconds.
#include "engine/planner/plan.h"
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

}  // namespace kolo
