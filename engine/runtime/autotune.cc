#include "engine/runtime/autotune.h"

#include <cmath>

#include "support/log.h"

namespace kolo::runtime {
namespace {

constexpr size_t kThresholds[] = {size_t{1} << 20, size_t{8} << 20, size_t{32} << 20, size_t{64} << 20,
                                  size_t{128} << 20};
constexpr double kCycles[] = {0.5, 1, 2, 5};
constexpr int kThresholdCount = 5, kCycleCount = 4;
// A window is long enough to average over steps, short enough to tune in seconds.
constexpr int kWindowCycles = 20;
constexpr double kWindowSeconds = 0.5;

uint8_t index_of(int t, int c) { return static_cast<uint8_t>(t * kCycleCount + c); }

}  // namespace

Autotuner::Autotuner(bool enabled, size_t base_threshold, double base_cycle_ms)
    : enabled_(enabled), base_threshold_(base_threshold), base_cycle_ms_(base_cycle_ms) {
  for (int c = 0; c < kCycleCount; ++c) {
    if (std::fabs(kCycles[c] - base_cycle_ms) < std::fabs(kCycles[base_cycle_index_] - base_cycle_ms)) {
      base_cycle_index_ = c;
    }
  }
  current_ = index_of(0, base_cycle_index_);
}

size_t Autotuner::threshold(uint8_t setting) const {
  if (setting == kOff || setting >= kThresholdCount * kCycleCount) return base_threshold_;
  return kThresholds[setting / kCycleCount];
}

double Autotuner::cycle_ms(uint8_t setting) const {
  if (setting == kOff || setting >= kThresholdCount * kCycleCount) return base_cycle_ms_;
  return kCycles[setting % kCycleCount];
}

void Autotuner::record(size_t bytes, double now) {
  if (!enabled_ || done()) return;
  if (window_start_ < 0) {
    // The first cycle after a change starts the window; its bytes ran under the old setting.
    window_start_ = now;
    return;
  }
  window_bytes_ += bytes;
  ++window_cycles_;
  if (window_cycles_ >= kWindowCycles && now - window_start_ >= kWindowSeconds) next(now);
}

void Autotuner::next(double now) {
  const double score = window_bytes_ / (now - window_start_);
  log_info(Subsys::kEngine, "autotune: fusion threshold ", threshold(current_) >> 20, " MB, cycle time ",
           cycle_ms(current_), " ms: ", score / 1e6, " MB/s");
  if (score > best_score_) {
    best_score_ = score;
    best_ = current_;
  }
  window_start_ = -1;
  window_bytes_ = 0;
  window_cycles_ = 0;
  ++step_;
  if (phase_ == 0 && step_ < kThresholdCount) {
    current_ = index_of(step_, base_cycle_index_);
  } else if (phase_ == 0) {
    phase_ = 1;
    step_ = 0;
    current_ = index_of(best_ / kCycleCount, 0);
  } else if (step_ < kCycleCount) {
    current_ = index_of(best_ / kCycleCount, step_);
  } else {
    phase_ = 2;
    current_ = best_;
    log_warn(Subsys::kEngine, "autotune chose fusion threshold ", threshold(best_), " bytes (",
             threshold(best_) >> 20, " MB) and cycle time ", cycle_ms(best_), " ms (", best_score_ / 1e6, " MB/s)");
  }
}

}  // namespace kolo::runtime
