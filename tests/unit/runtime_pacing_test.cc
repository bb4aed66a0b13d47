// When the runtime's background thread starts its next cycle (engine/runtime/pacing.h):
// at once while it holds requests and waiting can only delay a peer, never a loop of
// empty cycles, and a back-off while every rank is stuck.
#include <gtest/gtest.h>

#include "engine/runtime/pacing.h"

namespace kolo::runtime {
namespace {

constexpr double kCycleMs = 1.0;

TEST(RuntimePacing, IdleRankWaitsForWorkOrTick) {
  LastCycle last;
  EXPECT_EQ(last.wait_ms(false, kCycleMs), kCycleMs);  // before any cycle
  last.record(true, false);
  EXPECT_EQ(last.wait_ms(false, kCycleMs), kCycleMs);  // nothing to hold: its own work wakes it
  last.record(false, true);
  EXPECT_EQ(last.wait_ms(false, kCycleMs), kCycleMs);
}

TEST(RuntimePacing, HolderEntersAtOnceAfterProgressOrWhenAPeerPaces) {
  LastCycle last;
  last.record(true, false);  // a cached cycle ran part of what this rank holds
  EXPECT_EQ(last.wait_ms(true, kCycleMs), 0.0);
  last.record(false, true);  // nothing moved, but an idle rank paces the next cycle
  EXPECT_EQ(last.wait_ms(true, kCycleMs), 0.0);
}

TEST(RuntimePacing, EveryRankStuckBacksOffUpToTheCycleTime) {
  LastCycle last;
  last.record(false, false);  // every rank holds names another lacks, nothing moved
  EXPECT_EQ(last.wait_ms(true, kCycleMs), LastCycle::kFirstBackoffMs);
  last.record(false, false);
  EXPECT_EQ(last.wait_ms(true, kCycleMs), 2 * LastCycle::kFirstBackoffMs);
  double previous = 0;
  for (int i = 0; i < 40; ++i) {  // doubles, never past the cycle time, never overflows
    last.record(false, false);
    const double wait = last.wait_ms(true, kCycleMs);
    EXPECT_GE(wait, previous);
    EXPECT_LE(wait, kCycleMs);
    previous = wait;
  }
  EXPECT_EQ(previous, kCycleMs);
  last.record(true, false);  // progress ends the back-off
  EXPECT_EQ(last.wait_ms(true, kCycleMs), 0.0);
  last.record(false, false);
  EXPECT_EQ(last.wait_ms(true, kCycleMs), LastCycle::kFirstBackoffMs);
  EXPECT_EQ(last.wait_ms(true, 0.01), 0.01);  // a cycle time below the first back-off
}

}  // namespace
}  // namespace kolo::runtime
