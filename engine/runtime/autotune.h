// KOLO_AUTOTUNE=1: picks the fusion threshold and cycle time on-line from the throughput
// the runtime measures (bytes allreduced per second of wall time). The search is
// coordinate descent over a small grid: five thresholds at the configured cycle time, then
// four cycle times at the best threshold, one measurement window each, then it stays at
// the best point and logs it. Horovod uses Bayesian optimisation over the same two knobs;
// with two knobs and a response that is close to unimodal in each, nine windows of a grid
// find the same region without a Gaussian-process library, and each step is easy to read
// in the log. Only rank 0 measures and decides; its choice travels in the header of the
// ready vector (negotiation.h), so every rank fuses with the same threshold.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kolo::runtime {

class Autotuner {
 public:
  static constexpr uint8_t kOff = 255;

  Autotuner(bool enabled, size_t base_threshold, double base_cycle_ms);
  // The grid index to use now (rank 0), kOff when tuning is off.
  uint8_t setting() const { return enabled_ ? current_ : kOff; }
  // Rank 0, after each cycle that ran something: bytes it reduced, and the time now.
  void record(size_t bytes, double now);
  bool done() const { return phase_ == 2; }

  size_t threshold(uint8_t setting) const;
  double cycle_ms(uint8_t setting) const;

 private:
  void next(double now);

  bool enabled_;
  size_t base_threshold_;
  double base_cycle_ms_;
  uint8_t current_ = 0;
  int phase_ = 0;  // 0: thresholds, 1: cycle times, 2: done
  int step_ = 0;
  int base_cycle_index_ = 1;
  uint8_t best_ = 0;
  double best_score_ = -1;
  double window_start_ = -1;
  size_t window_bytes_ = 0;
  int window_cycles_ = 0;
};

}  // namespace kolo::runtime
