// When the background thread starts its next cycle.
//
// A cycle is a collective: it completes only once every rank's thread has entered it, and
// a thread that enters early just waits inside the min-allreduce (the transport spins
// briefly, then sleeps until the last rank arrives). That wait is what wakes the ranks
// together. So a rank that holds requests some peer has not submitted yet enters the next
// cycle at once instead of sleeping until its next tick: when the peer's request arrives,
// the enqueue wakes the peer's thread, it enters, and the cycle completes then, not at
// the holder's next tick (which is what a cached cycle used to cost: 50 us to 1 ms).
//
// Entering at once must not become a loop of empty cycles. That happens only when every
// rank enters at once and nothing can change, so a holder enters at once only while
//   - the last cycle made progress (ran something or negotiated something new), or
//   - some rank came to the last cycle holding nothing: that rank enters the next cycle
//     only on its own new work or tick, so it paces the others.
// Otherwise every rank holds names another lacks and nothing moved (ranks submit in
// different orders, or one never submits). The rank whose user submits next enters at
// once, but the others cannot be woken from another process: they wait for their own
// work or a short back-off that doubles with each such cycle, up to the cycle time. That
// bounds the wait of a transient reordering to tens of microseconds, and the idle cycles
// of a stall to a handful before they settle at the cycle time (Horovod's rate).
//
// What a rank knows of the last cycle comes from its shared result, and the rest is the
// rank's own queue; either way the decision only changes when a rank enters, never which
// collectives the ranks run. Fusion needs no batching delay: requests that arrive while a cycle runs
// are taken together by the next one, so batches grow with the work they wait behind.
#pragma once

#include <algorithm>

namespace kolo::runtime {

// What a rank remembers of the cycles so far (the same on every rank).
class LastCycle {
 public:
  static constexpr double kFirstBackoffMs = 0.05;

  // progressed: the cycle ran an operation or took the slow path; some_rank_idle: some
  // rank brought no pending request to it.
  void record(bool progressed, bool some_rank_idle) {
    progressed_ = progressed;
    some_rank_idle_ = some_rank_idle;
    stuck_ = progressed || some_rank_idle ? 0 : stuck_ + 1;
  }

  // How long the thread may wait for work of its own before it enters the next cycle
  // anyway, in ms from now (the caller also stops at its tick): 0 = at once.
  // holding: this rank has pending requests.
  double wait_ms(bool holding, double cycle_ms) const {
    if (!holding) return cycle_ms;
    if (progressed_ || some_rank_idle_) return 0;
    double backoff = kFirstBackoffMs;
    for (int i = 1; i < stuck_ && backoff < cycle_ms; ++i) backoff *= 2;
    return std::min(backoff, cycle_ms);
  }

 private:
  bool progressed_ = false;
  bool some_rank_idle_ = false;
  int stuck_ = 0;  // cycles in a row in which every rank held requests and nothing moved
};

}  // namespace kolo::runtime
