// The one pattern every one-host collective follows, chunk by chunk through the ranks'
// staging slots in shared memory (transport/shm):
//
//   fill(i)    acquire my slot for chunk i (every rank has consumed what it held K chunks
//              ago), copy my input into it (prescale and casts happen in this copy), post;
//   first(i)   once the peers have posted chunk i: reduce my slice straight out of their
//              slots, or copy their data out;
//   second(i)  two-phase collectives only (two-shot allreduce, reduce): once every rank has
//              reduced its slice of chunk i, copy the reduced slices out.
//
// Chunk i+1 is filled before chunk i is reduced and chunk i-1 copied out, so one rank's
// copy overlaps its peers' reductions and the waits rarely find a peer behind. Counters
// are monotonic over the life of the domain; every rank numbers chunks alike because all
// run the same collectives in the same order.
#pragma once

#include <cstdint>

#include "support/clock.h"
#include "support/status.h"
#include "transport/shm/shm_domain.h"

namespace kolo {

class ChunkPipeline {
 public:
  ChunkPipeline(shm::Domain& domain, uint64_t first_chunk, const Deadline& deadline)
      : d_(domain), first_(first_chunk), deadline_(deadline) {}

  char* my_slot(uint64_t i) const { return d_.slot(d_.index(), first_ + i); }
  char* slot(int index, uint64_t i) const { return d_.slot(index, first_ + i); }

  struct Shape {
    uint64_t chunks = 1;
    bool two_phase = false;  // second() runs after every rank has run first()
    bool second_here = true;  // this rank runs second() (reduce: the root only)
    int posted_from = -1;     // -1: first() waits for every peer's post; else that index only
  };

  template <class Fill, class First, class Second>
  Status run(const Shape& shape, Fill fill, First first, Second second) {
    if (shape.chunks == 0) return Status();  // (empty calls never get here; be safe anyway)
    auto fill_chunk = [&](uint64_t i) -> Status {
      const uint64_t c = first_ + i;
      if (c >= d_.slots()) KOLO_TRY(d_.wait_for_all(shm::kConsumed, c - d_.slots() + 1, deadline_, "waiting for a free slot"));
      KOLO_TRY(fill(i, my_slot(i)));
      d_.publish(shm::kPosted, c + 1);
      return Status();
    };
    auto finish_chunk = [&](uint64_t i) -> Status {
      const uint64_t c = first_ + i;
      if (shape.second_here) {
        KOLO_TRY(d_.wait_for_all(shm::kReduced, c + 1, deadline_, "waiting for the peers' reduced slices"));
        KOLO_TRY(second(i));
      }
      d_.publish(shm::kConsumed, c + 1);
      return Status();
    };
    KOLO_TRY(fill_chunk(0));
    for (uint64_t i = 0; i < shape.chunks; ++i) {
      if (i + 1 < shape.chunks) KOLO_TRY(fill_chunk(i + 1));
      const uint64_t c = first_ + i;
      if (shape.posted_from < 0) {
        KOLO_TRY(d_.wait_for_all(shm::kPosted, c + 1, deadline_, "waiting for the peers' data"));
      } else if (shape.posted_from != d_.index()) {
        KOLO_TRY(d_.wait_for(shape.posted_from, shm::kPosted, c + 1, deadline_, "waiting for the root's data"));
      }
      KOLO_TRY(first(i));
      if (!shape.two_phase) {
        d_.publish(shm::kConsumed, c + 1);
        continue;
      }
      d_.publish(shm::kReduced, c + 1);
      if (i >= 1) KOLO_TRY(finish_chunk(i - 1));
    }
    if (shape.two_phase) KOLO_TRY(finish_chunk(shape.chunks - 1));
    return Status();
  }

 private:
  shm::Domain& d_;
  uint64_t first_;
  const Deadline& deadline_;
};

}  // namespace kolo
