// Monotonic time and deadlines: every wait in kolo takes a Deadline.
#pragma once

#include <chrono>
#include <cstdint>

namespace kolo {

using Clock = std::chrono::steady_clock;

inline double now_seconds() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

class Deadline {
 public:
  explicit Deadline(double seconds_from_now)
      : at_(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(seconds_from_now))) {}
  bool expired() const { return Clock::now() >= at_; }
  // Milliseconds left, clamped to [0, cap_ms]; for poll().
  int remaining_ms(int cap_ms = 1000) const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
    if (left < 0) return 0;
    return left > cap_ms ? cap_ms : static_cast<int>(left);
  }
  Clock::time_point at() const { return at_; }
  double remaining_seconds() const {
    return std::chrono::duration<double>(at_ - Clock::now()).count();
  }

 private:
  Clock::time_point at_;
};

}  // namespace kolo
