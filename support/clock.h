// Monotonic time and deadlines: every wait in kolo takes a Deadline.
#pragma once

#include <chrono>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace kolo {

using Clock = std::chrono::steady_clock;

inline double now_seconds() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// The CPU's timestamp counter where it is cheap (x86: rdtsc, constant-rate on the CPUs kolo
// runs on), else the steady clock in nanoseconds: for stamps that must cost next to nothing
// (the flight recorder, the breakdown probes), turned into time only when read.
inline uint64_t cpu_ticks() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
#endif
}

class Deadline {
 public:
  explicit Deadline(double seconds_from_now) : at_(Clock::now() + duration_of(seconds_from_now)) {}
  // A deadline that starts counting when it is first asked, not now: for a call that is over
  // in microseconds unless a peer is late, and whose waits ask only after spinning a while
  // (the one-host fast boxes: about 200 us, next to a timeout of seconds), so that such a call
  // reads no clock at all. Asked from the thread that made it only.
  static Deadline from_first_question(double seconds) {
    Deadline d;
    d.lazy_seconds_ = seconds;
    return d;
  }
  bool expired() const { return Clock::now() >= at(); }
  // Milliseconds left, clamped to [0, cap_ms]; for poll().
  int remaining_ms(int cap_ms = 1000) const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at() - Clock::now()).count();
    if (left < 0) return 0;
    return left > cap_ms ? cap_ms : static_cast<int>(left);
  }
  Clock::time_point at() const {
    if (lazy_seconds_ >= 0) {
      at_ = Clock::now() + duration_of(lazy_seconds_);
      lazy_seconds_ = -1;
    }
    return at_;
  }
  double remaining_seconds() const {
    return std::chrono::duration<double>(at() - Clock::now()).count();
  }
  // False while a from_first_question deadline has not been asked: its wait, if any, spun
  // and did not sleep (the shared-memory waits ask as they stop spinning, after about 200 us).
  bool asked() const { return lazy_seconds_ < 0; }

 private:
  Deadline() = default;
  static Clock::duration duration_of(double seconds) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  mutable Clock::time_point at_{};
  mutable double lazy_seconds_ = -1;  // >= 0: not asked yet (from_first_question)
};

}  // namespace kolo
