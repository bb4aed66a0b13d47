// Collectives for a communicator whose ranks all live on one host: no messages, every rank
// reads its peers' staging slots in shared memory directly (see chunk_pipeline.h).
//   one-shot  (small): each rank reduces the whole chunk from every slot;
//   two-shot  (large): each rank reduces 1/n of the chunk from every slot, then every
//             rank copies all reduced slices out.
// Broadcast, reduce, allgather(v), reduce_scatter, alltoall and barrier go the same way.
#pragma once

#include <cstdint>

#include "engine/collective.h"
#include "support/clock.h"
#include "support/status.h"
#include "transport/shm/shm_domain.h"

namespace kolo {

class LocalCollectives {
 public:
  explicit LocalCollectives(shm::Domain& domain) : d_(domain) {}

  static bool supports(CollKind kind) { return kind != CollKind::kSend && kind != CollKind::kRecv; }
  // call.spec.op is not kAvg (the communicator turns it into a divisor); algorithm is
  // kOneShot or kTwoShot for allreduce and reduce, ignored otherwise.
  Status run(const CollCall& call, Algorithm algorithm, const Deadline& deadline);

 private:
  Status reduction(const CollCall& call, bool one_shot, int root, const Deadline& deadline);
  Status broadcast(const CollCall& call, const Deadline& deadline);
  Status allgather(const CollCall& call, const Deadline& deadline);
  Status reduce_scatter(const CollCall& call, const Deadline& deadline);
  Status alltoall(const CollCall& call, const Deadline& deadline);
  Status barrier(const Deadline& deadline);
  // Publishes what this rank is about to run, and checks that `peer` (or every peer) runs
  // the same (kMismatch naming both otherwise).
  void announce(const CollSpec& spec, bool two_shot);
  Status check_peer(int index) const;
  Status check_peers(int only_index) const;

  shm::Domain& d_;
  uint64_t next_chunk_ = 0;
  uint64_t op_sequence_ = 0;
  uint64_t my_shape_ = 0;
  uint64_t my_count_ = 0;
};

// Which of one-shot and two-shot runs an allreduce or reduce (local_choice.cc): a forced
// kOneShot/kTwoShot as given, else the faster by the planner's one-host model
// (engine/planner/local_model.h). Cheap enough for every call: no allocation, the
// sizes where the model's choice flips are computed once per shape.
// `cores` must be the same on every rank (the domain's agreed_cores()): ranks that chose
// differently would read each other's half-reduced slots.
Algorithm choose_local_algorithm(const CollSpec& spec, int ranks, int cores, size_t slot_bytes, Algorithm forced);

}  // namespace kolo
