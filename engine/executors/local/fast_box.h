// Small one-host collectives through "fast boxes" (the one-host executor's small-message
// protocol; Open MPI's shared-memory fast box and NCCL's LL protocol follow the same idea):
// each rank writes its whole contribution into a box in its own shared memory, with the
// call's signature and a flag in the box's first cache line, so that a peer's one cache
// miss on the flag brings the signature and the first 32 bytes of payload with it.
//
// A call is one publication per rank and one wait per peer it reads: no staging slot, no
// chunk counters, no "consumed" round trip. Each rank has kBoxes boxes, used in turn by
// its fast calls: a rank that posts fast call f + kBoxes into the box of call f must know
// that every peer has finished call f, which it does once each has posted call f + 1.
// Collectives in which every rank reads every peer learn that in the call itself; the root
// of a broadcast or reduce waits for nobody, so it may run up to kBoxes - 1 calls ahead of
// its slowest peer before it waits (what MPI's eager broadcasts allow too).
//
// Which calls come here is the planner's choice (choose_local_protocol, Plan::protocol),
// from what every rank passes alike; a rank that takes the staging-slot path where its
// peer takes this one (their calls differ) is noticed while waiting, from the op
// signatures (KOLO_ERR_MISMATCH).
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "engine/collective.h"
#include "engine/executors/local/op_signature.h"
#include "support/clock.h"
#include "support/status.h"
#include "transport/shared_domain.h"

namespace kolo {

class FastBoxes {
 public:
  static constexpr int kBoxes = 8;
  static constexpr size_t kBoxBytes = kFastAreaBytes / kBoxes;
  static constexpr size_t kHeaderBytes = 32;  // tag, op, shape, count
  static constexpr size_t kPayloadBytes = kBoxBytes - kHeaderBytes;

  // What one rank's contribution may be (4 KB and a little more): PlanContext::fast_box_bytes.
  FastBoxes(SharedDomain& domain, OpSignatures& signatures);

  // Runs the call, whose op signature is set (OpSignatures::set); publishes it once this
  // rank's box is posted.
  Status run(const CollCall& call, const Deadline& deadline);

 private:
  struct Box;
  Box& box(int index, uint64_t call) const;
  // Waits until member `index` has posted fast call `tag - 1` (its box holds `tag`).
  Status wait_posted(int index, uint64_t tag, const Deadline& deadline, const char* what);
  Status wait_box(int index, uint64_t call, const Deadline& deadline, const char* what);
  Status reduce_boxes(const CollCall& call, uint64_t f, void* dst, size_t offset);

  SharedDomain& d_;
  OpSignatures& signatures_;
  const int n_, me_;            // the domain's size and this rank's index (no virtual call per use)
  std::vector<char*> areas_;    // per member: its fast area (no virtual call per box)
  uint64_t calls_ = 0;          // fast calls run so far (numbered alike on every rank)
  std::vector<uint64_t> seen_;  // per member: the highest tag seen in its boxes
  std::vector<char> scratch_;   // more than kMaxReduceInputs ranks: partial sums
};

}  // namespace kolo
