// The lock a communicator's calls take, one call at a time (engine/call_runner.h). A
// std::mutex cost a small allreduce about 60 instructions of its 1,350 in glibc's trylock
// and unlock (issue 52); this is the same guarantee in one compare-exchange to take it and
// one exchange to give it back, sleeping in the kernel (atomic wait, a futex on Linux) only
// while another thread holds it. Lockable, for std::unique_lock and std::lock_guard.
#pragma once

#include <atomic>

namespace kolo {

class CallLock {
 public:
  bool try_lock() {
    int free = kFree;
    return state_.compare_exchange_strong(free, kHeld, std::memory_order_acquire, std::memory_order_relaxed);
  }
  void lock() {
    if (try_lock()) return;
    // Mark it contended, so that the holder's unlock wakes a sleeper; sleep while held.
    while (state_.exchange(kContended, std::memory_order_acquire) != kFree) state_.wait(kContended);
  }
  void unlock() {
    if (state_.exchange(kFree, std::memory_order_release) == kContended) state_.notify_one();
  }

 private:
  static constexpr int kFree = 0, kHeld = 1, kContended = 2;
  std::atomic<int> state_{kFree};
};

}  // namespace kolo
