// The layout of a shared-memory domain's segment: one memfd mapping shared by the ranks of
// one communicator on one host. Everything here is plain data in shared memory; only
// atomics are used across processes.
//
//   SegmentHeader | RankControl[ranks] | staging[ranks][slots][slot_bytes]
//                 | Channel[ranks][ranks] (from, to) each followed by ring_bytes of data
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transport/shared_domain.h"

namespace kolo::shm {

constexpr uint64_t kSegmentMagic = 0x326d68736f6c6f6bull;  // "kolohsm2"
constexpr int kMaxDomainRanks = 256;
constexpr int kCpuMaskWords = 16;  // CPUs 0..1023

// A futex word and the number of processes sleeping on it: a publisher only pays for the
// wake-up system call when someone sleeps.
struct alignas(64) Bell {
  std::atomic<uint32_t> word{0};
  std::atomic<uint32_t> sleepers{0};
};

struct alignas(64) RankControl {
  Bell bell;                                      // rung on every counter update
  SharedRankLine line;                            // counters and words (shared_domain.h)
  alignas(64) Bell inbox;                         // rung when a channel to this rank changes
  alignas(64) std::atomic<uint32_t> cma_readable{0};          // 1: this rank reads peers with process_vm_readv
  std::atomic<uint64_t> cpu_mask[kCpuMaskWords];  // the CPUs this rank may run on (bits)
  std::atomic<uint64_t> copy_mbs{0};              // this rank's measured copy rate, MB/s
  std::atomic<uint64_t> cache_kb{0};              // and its last-level cache, KiB
  std::atomic<uint64_t> probe_address{0};         // where peers find kProbeValue in this process
  std::atomic<uint32_t> fenced{0};                // 1: registered for membarrier's global fence (shm_domain.cc)
  alignas(64) char area[kRankAreaBytes];          // laid out by the executor that uses the domain
  alignas(64) char fast[kFastAreaBytes];          // likewise
  alignas(64) char exchange[kExchangeAreaBytes];  // likewise
};

struct alignas(64) ChannelControl {
  alignas(64) std::atomic<uint64_t> head{0};  // bytes written by the sender
  alignas(64) std::atomic<uint64_t> tail{0};  // bytes consumed by the receiver
};

struct alignas(64) SegmentHeader {
  uint64_t magic;
  uint32_t ranks;
  uint32_t slots;
  uint64_t slot_bytes;
  uint64_t ring_bytes;
  uint64_t total_bytes;
  std::atomic<uint32_t> failed{0};      // any rank that fails sets it: the others stop at once
  std::atomic<int32_t> failed_rank{-1};  // the first to fail; or the member seen exited, the cause
  std::atomic<uint32_t> failed_exited{0};  // failed_rank exited (the others name it, not the echo)
  std::atomic<uint32_t> failed_why_ready{0};  // failed_why holds what the first to fail saw
  char failed_why[256];
};

struct SegmentGeometry {
  uint32_t ranks = 0;
  uint32_t slots = 0;
  uint64_t slot_bytes = 0;
  uint64_t ring_bytes = 0;

  static size_t align(size_t n) { return (n + 4095) & ~size_t{4095}; }
  size_t control_offset() const { return align(sizeof(SegmentHeader)); }
  size_t staging_offset() const { return control_offset() + align(sizeof(RankControl) * ranks); }
  size_t staging_bytes_per_rank() const { return slot_bytes * slots; }
  size_t channel_offset() const { return staging_offset() + staging_bytes_per_rank() * ranks; }
  size_t channel_stride() const { return align(sizeof(ChannelControl) + ring_bytes); }
  size_t total_bytes() const { return channel_offset() + channel_stride() * ranks * ranks; }
};

}  // namespace kolo::shm
