// What each rank of the one-host executor says about the collective it runs, in shared
// memory, so that a peer that calls something else gets KOLO_ERR_MISMATCH naming both
// calls instead of wrong data or a hang. The current signature sits in the words of the
// rank's counter line (a peer that sees our post reads it without another cache miss);
// the last kSignatureRing signatures sit in the rank's area, for a peer that is behind.
#pragma once

#include <atomic>
#include <cstdint>

#include "engine/collective.h"
#include "support/status.h"
#include "transport/shared_domain.h"

namespace kolo {

// The last ops' signatures each rank keeps: more than a rank can run ahead of a peer that
// still reads them (FastBoxes::kBoxes - 1 fast calls, or the staging slots' 64 chunks at
// most; fast_box.cc checks).
constexpr int kSignatureRing = 80;

// Also the stall check of every wait of the one-host executor: a peer that announced this
// op (or an earlier one) as another call will never post what the wait needs.
class OpSignatures final : public SharedDomain::StallCheck {
 public:
  explicit OpSignatures(SharedDomain& domain);
  Status operator()(int index) const override { return check_if_arrived(index); }

  // What this rank is about to run (op number `sequence`, 0-based), for this rank's checks
  // and the fast boxes' headers; publish() shows it to the peers. `avg`: the call was AVG,
  // which spec carries as a sum and a divisor; announced (and named) as avg.
  void set(uint64_t sequence, const CollSpec& spec, bool two_shot, bool avg = false);
  // The staging slots publish before the op posts anything (a peer that waits on our
  // counters checks our signature); the fast boxes after posting their box, whose header
  // carries the same: off the path from one call's post to the next (issue 52).
  void publish();
  // Checks that member `index` (or every peer, index -1) runs the same.
  Status check(int index) const;
  // For a wait that goes on: a mismatch once member `index` has announced this op (or run
  // past it) as another call, or announced an earlier op that differs from what this rank
  // ran as that op; Ok while it is behind on the same program.
  Status check_if_arrived(int index) const;
  uint64_t sequence() const { return sequence_; }  // the op announced last (0-based)
  // What this rank announced, packed (for the fast boxes' headers, fast_box.h).
  uint64_t shape() const { return shape_; }
  uint64_t count() const { return count_; }
  // KOLO_ERR_MISMATCH: member `index` runs (shape, count) where this rank runs its own.
  Status mismatch(int index, uint64_t shape, uint64_t count) const;

  struct Signature;  // one op's, in shared memory (op_signature.cc)

 private:
  Status check_one(int index) const;

  SharedDomain& d_;
  const int index_;    // this rank's, and where its signatures go (no virtual call per op)
  Signature* const now_;
  Signature* const ring_;
  uint64_t sequence_ = 0;
  uint64_t shape_ = 0;
  uint64_t count_ = 0;
};

}  // namespace kolo
