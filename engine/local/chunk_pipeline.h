// The one pattern every one-host collective follows, chunk by chunk through the ranks'
// staging slots in shared memory:
//
//   fill(i)    acquire my slot for chunk i (every rank has consumed what it held `slots`
//              chunks ago), copy my input into it (prescale and casts happen in this
//              copy), post;
//   first(i)   once the peers have posted chunk i: reduce my slice straight out of their
//              slots, or copy their data out;
//   second(i)  two-phase collectives only (two-shot allreduce, reduce): once every rank has
//              reduced its slice of chunk i, copy the reduced slices out.
//
// Chunk i+1 is filled before chunk i is reduced and chunk i-1 copied out, so one rank's
// copy overlaps its peers' reductions and the waits rarely find a peer behind. Counters
// are monotonic over the life of the domain; every rank numbers chunks alike because all
// run the same collectives in the same order.
//
// Written over an ops policy (local_ops.h), so the same pipeline runs on the host
// (HostOps), is recorded as a program for the verifier and simulator (RecordOps), and can
// later drive a stream.
#pragma once

#include <cstdint>

#include "engine/local/local_ops.h"
#include "support/status.h"

namespace kolo {

template <class Ops>
class ChunkPipeline {
 public:
  ChunkPipeline(Ops& ops, uint64_t first_chunk) : ops_(ops), first_(first_chunk) {}

  char* my_slot(uint64_t i) const { return ops_.slot(ops_.index(), first_ + i); }
  char* slot(int index, uint64_t i) const { return ops_.slot(index, first_ + i); }

  struct Shape {
    uint64_t chunks = 1;
    bool two_phase = false;  // second() runs after every rank has run first()
    bool second_here = true;  // this rank runs second() (reduce: the root only)
    int posted_from = -1;     // -1: first() waits for every peer's post; else that index only
  };

  template <class Fill, class First, class Second>
  Status run(const Shape& shape, Fill fill, First first, Second second) {
    if (shape.chunks == 0) return Status();  // (empty calls never get here; be safe anyway)
    const uint64_t slots = ops_.slots();
    auto fill_chunk = [&](uint64_t i) -> Status {
      const uint64_t c = first_ + i;
      if (c >= slots) KOLO_TRY(ops_.wait_for_all(kConsumed, c - slots + 1, "waiting for a free slot"));
      KOLO_TRY(fill(i, my_slot(i)));
      ops_.publish(kPosted, c + 1);
      return Status();
    };
    auto finish_chunk = [&](uint64_t i) -> Status {
      const uint64_t c = first_ + i;
      if (shape.second_here) {
        KOLO_TRY(ops_.wait_for_all(kReduced, c + 1, "waiting for the peers' reduced slices"));
        KOLO_TRY(second(i));
      }
      ops_.publish(kConsumed, c + 1);
      return Status();
    };
    KOLO_TRY(fill_chunk(0));
    for (uint64_t i = 0; i < shape.chunks; ++i) {
      if (i + 1 < shape.chunks) KOLO_TRY(fill_chunk(i + 1));
      const uint64_t c = first_ + i;
      if (shape.posted_from < 0) {
        KOLO_TRY(ops_.wait_for_all(kPosted, c + 1, "waiting for the peers' data"));
      } else if (shape.posted_from != ops_.index()) {
        KOLO_TRY(ops_.wait_for(shape.posted_from, kPosted, c + 1, "waiting for the root's data"));
      }
      KOLO_TRY(first(i));
      if (!shape.two_phase) {
        ops_.publish(kConsumed, c + 1);
        continue;
      }
      ops_.publish(kReduced, c + 1);
      if (i >= 1) KOLO_TRY(finish_chunk(i - 1));
    }
    if (shape.two_phase) KOLO_TRY(finish_chunk(shape.chunks - 1));
    return Status();
  }

 private:
  Ops& ops_;
  uint64_t first_;
};

}  // namespace kolo
