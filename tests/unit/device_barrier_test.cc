// The one-host step barrier (kernels/barrier_body.h) through the emulated device: two
// ranks' barriers on two streams meet; a barrier whose peer never posts gives up at its
// deadline naming the peer; kolo_comm_abort's word ends the wait; a failed barrier makes
// the next one return at once.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>

#include "kernels/device_kernels.h"

namespace kolo {
namespace {

const device::DeviceOps& emu() { return device::emulated_ops(); }

// Two ranks' words in one process: words[r][p] is rank p's word in rank r's region.
struct TwoRanks {
  alignas(128) BarrierWord words[2][2] = {};
  volatile uint32_t abort = 0;
  volatile uint32_t status[2] = {};
  volatile uint32_t failed[2] = {};  // the device copies of status

  BarrierArgs args(int me, uint64_t value, double seconds, uint64_t tag = 7) {
    BarrierArgs a;
    for (int p = 0; p < 2; ++p) {
      a.post[p] = &words[p][me];
      a.wait[p] = &words[me][p];
    }
    a.ranks = 2;
    a.value = value;
    a.tag = tag;
    a.timeout_ns = static_cast<uint64_t>(seconds * 1e9);
    a.abort = &abort;
    a.status = &status[me];
    a.failed = &failed[me];
    return a;
  }
};

TEST(DeviceBarrier, TwoRanksOnTwoStreamsMeet) {
  TwoRanks t;
  void* s[2];
  for (void*& stream : s) ASSERT_TRUE(emu().stream_create(&stream).ok());
  for (uint64_t value = 1; value <= 50; ++value) {
    for (int me = 0; me < 2; ++me) ASSERT_TRUE(device_barrier(emu(), t.args(me, value, 10), s[me]).ok());
  }
  for (void* stream : s) ASSERT_TRUE(emu().stream_synchronize(stream, Deadline(20)).ok());
  EXPECT_EQ(t.status[0], 0u);
  EXPECT_EQ(t.status[1], 0u);
  EXPECT_EQ(t.words[0][1].number, 50u);  // rank 1 posted its last number into rank 0's region
  for (void* stream : s) ASSERT_TRUE(emu().stream_destroy(stream).ok());
}

TEST(DeviceBarrier, PeerThatNeverPostsIsNamedAtTheDeadline) {
  TwoRanks t;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(device_barrier(emu(), t.args(0, 1, 0.05), nullptr).ok());
  ASSERT_TRUE(emu().stream_synchronize(nullptr, Deadline(10)).ok());
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(t.status[0], kBarrierTimedOut + 1) << "gave up waiting for rank 1";
  EXPECT_EQ(t.failed[0], t.status[0]) << "the device copy says the same";
  EXPECT_GE(waited, 0.05);
  EXPECT_LT(waited, 5.0);
  // The next barrier returns at once: the collective has failed.
  t.words[0][1].number = 0;
  ASSERT_TRUE(device_barrier(emu(), t.args(0, 2, 100), nullptr).ok());
  ASSERT_TRUE(emu().stream_synchronize(nullptr, Deadline(5)).ok());
  EXPECT_EQ(t.status[0], kBarrierTimedOut + 1);
}

// Tags that change every barrier, as consecutive calls' do: a peer one barrier ahead
// never makes this rank read the next call's tag.
TEST(DeviceBarrier, TagsOfConsecutiveCallsNeverMixUp) {
  TwoRanks t;
  void* s[2];
  for (void*& stream : s) ASSERT_TRUE(emu().stream_create(&stream).ok());
  for (uint64_t value = 1; value <= 200; ++value) {
    for (int me = 0; me < 2; ++me) ASSERT_TRUE(device_barrier(emu(), t.args(me, value, 10, value * 31), s[me]).ok());
  }
  for (void* stream : s) ASSERT_TRUE(emu().stream_synchronize(stream, Deadline(20)).ok());
  EXPECT_EQ(t.status[0], 0u);
  EXPECT_EQ(t.status[1], 0u);
  for (void* stream : s) ASSERT_TRUE(emu().stream_destroy(stream).ok());
}

// Ranks making different calls: both learn it at the first barrier, naming the other.
TEST(DeviceBarrier, DifferentCallsAreAMismatchOnEveryRank) {
  TwoRanks t;
  void* s[2];
  for (void*& stream : s) ASSERT_TRUE(emu().stream_create(&stream).ok());
  for (int me = 0; me < 2; ++me) ASSERT_TRUE(device_barrier(emu(), t.args(me, 1, 10, 100 + me), s[me]).ok());
  for (void* stream : s) ASSERT_TRUE(emu().stream_synchronize(stream, Deadline(20)).ok());
  EXPECT_EQ(t.status[0], kBarrierMismatch + 1);
  EXPECT_EQ(t.status[1], kBarrierMismatch + 0);
  for (void* stream : s) ASSERT_TRUE(emu().stream_destroy(stream).ok());
}

TEST(DeviceBarrier, AbortEndsTheWait) {
  TwoRanks t;
  ASSERT_TRUE(device_barrier(emu(), t.args(0, 1, 100), nullptr).ok());
  __atomic_store_n(&t.abort, 1u, __ATOMIC_RELEASE);  // as kolo_comm_abort does
  ASSERT_TRUE(emu().stream_synchronize(nullptr, Deadline(10)).ok());
  EXPECT_EQ(t.status[0], kBarrierAborted);
}

TEST(DeviceBarrier, BadArgumentsAreRefused) {
  TwoRanks t;
  BarrierArgs a = t.args(0, 1, 1);
  a.ranks = kMaxIpcRanks + 1;
  EXPECT_EQ(device_barrier(emu(), a, nullptr).code(), Code::kInvalidArgument);
  a = t.args(0, 1, 1);
  a.status = nullptr;
  EXPECT_EQ(device_barrier(emu(), a, nullptr).code(), Code::kInvalidArgument);
  a = t.args(0, 1, 1);
  a.failed = nullptr;
  EXPECT_EQ(device_barrier(emu(), a, nullptr).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace kolo
