// The cost of the one-host shared-memory collectives (engine/local/): not schedules but a
// tight loop over a shared segment, so they get formulas instead of a simulation. The
// formulas follow LocalPrograms chunk by chunk (engine/local/chunk_pipeline.h):
//
//   every chunk of `slot_bytes`: copy the input into my slot (fill), one wait for the
//   peers' posts, then
//     one-shot   reduce the whole chunk from all p slots into the output;
//     two-shot   reduce my 1/p slice from all p slots into my slot, a second wait (every
//                rank has reduced), copy the p reduced slices out.
//
// A rank's time is its own work (copies and reduces) plus its waits; with more ranks than
// cores the cores take turns, so the work of all ranks is shared by the cores and every
// wait costs a trip through the scheduler instead of a cache-line hand-off. The
// parameters (shm_*) are in params.h and are fitted to kolo-perf on the development host.
#pragma once

#include <cstddef>

#include "engine/collective.h"
#include "engine/planner/params.h"

namespace kolo {

enum class LocalAlgorithm { kOneShot, kTwoShot };

// Predicted microseconds of a one-host allreduce or reduce (`kind`; the root's time, the
// last to finish) of `bytes` over `ranks` processes with `cores` usable cores and staging
// slots of `slot_bytes`. Other collectives are predicted as a one-shot allreduce's copy
// and wait pattern without the reduce (they have no choice to make).
double predict_local_us(CollKind kind, LocalAlgorithm algorithm, size_t bytes, int ranks, size_t slot_bytes,
                        int cores, const PlannerParams& params = planner_params());

// The allreduce with the default slot size (params.shm_chunk_bytes), for kolo-plan.
double predict_local_allreduce_us(LocalAlgorithm algorithm, size_t bytes, int ranks, int cores,
                                  const PlannerParams& params = planner_params());

// The faster of one-shot and two-shot by the prediction above (one-shot on a tie: one
// synchronisation fewer per chunk). Evaluates both formulas; the executor's per-call
// choice caches its crossover instead (engine/local/local_choice.cc).
LocalAlgorithm faster_local_algorithm(CollKind kind, size_t bytes, int ranks, size_t slot_bytes, int cores,
                                      const PlannerParams& params = planner_params());

// The model's choice for one shape (collective, ranks, slot, cores) as the sizes where it
// flips, for the executor's per-call choice: a few comparisons instead of two formulas.
// There can be more than one flip (3 ranks on 2 cores: one-shot at 1 KB, two-shot at
// 1 MB, one-shot again at 64 MB, where its pipeline lets ranks run ahead), so they are
// found by scanning sizes 4 B .. 2^40 B in steps of 2^(1/16) and bisecting each change;
// a flip and flip-back between two steps (< 5 % apart) would be missed.
struct LocalChoiceTable {
  static constexpr int kMaxFlips = 8;
  LocalAlgorithm smallest = LocalAlgorithm::kOneShot;  // the choice below flip[0]
  int flips = 0;
  size_t flip[kMaxFlips] = {};  // ascending: from flip[i] on, the choice changes
  LocalAlgorithm choose(size_t bytes) const {
    bool two = smallest == LocalAlgorithm::kTwoShot;
    for (int i = 0; i < flips && bytes >= flip[i]; ++i) two = !two;
    return two ? LocalAlgorithm::kTwoShot : LocalAlgorithm::kOneShot;
  }
};
LocalChoiceTable local_choice_table(CollKind kind, int ranks, size_t slot_bytes, int cores,
                                    const PlannerParams& params = planner_params());

}  // namespace kolo
