// What executors that work in memory shared by the ranks of one host need of a transport:
// per-rank staging slots every rank can read and write, monotonic per-rank counters to
// publish progress on, a few words next to them, a per-rank area, and the one way to wait
// (with a deadline, noticing a dead or failed peer and kolo_comm_abort).
//
// The transport owns the memory and the waits; the executor (engine/local) owns what the
// counters, words and areas mean. The shared-memory transport (transport/shm) implements
// it today; a device transport can implement it over mapped peer memory.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "support/clock.h"
#include "support/status.h"

namespace kolo {

constexpr int kSharedCounters = 4;  // per rank
constexpr int kSharedWords = 4;     // per rank, in the counters' cache line
constexpr size_t kRankAreaBytes = 2048;
// Per rank, for small messages whose payload travels with its flag (engine/executors/local/fast_box.h):
// eight boxes of 65 cache lines, laid out by the executor.
constexpr size_t kFastAreaBytes = 8 * 65 * 64;

// Kept for the device_ipc executor's host-side step barrier (engine/executors/
// ipc_host_barrier.cc): the last word of each rank's line holds its barrier number, the
// last kDeviceBarrierAreaBytes of its rank area the tags. Nothing else uses them.
constexpr int kDeviceBarrierWord = kSharedWords - 1;
constexpr size_t kDeviceBarrierAreaBytes = 64;

// For the small per-call exchanges of device calls (transport/ipc/ipc_peer_buffers.h: which
// user buffers the peers read in place): per rank, an area for a word and what it guards.
constexpr size_t kExchangeAreaBytes = 640;

// One cache line per rank: its counters and a few words, so a peer that sees a counter
// move reads the words without another cache miss.
struct alignas(64) SharedRankLine {
  std::atomic<uint64_t> counters[kSharedCounters];
  std::atomic<uint64_t> words[kSharedWords];
};
static_assert(sizeof(SharedRankLine) == 64);

class SharedDomain {
 public:
  virtual ~SharedDomain() = default;

  // Members are the communicator ranks on this host, in local order; index = position.
  virtual int size() const = 0;
  virtual int index() const = 0;
  virtual int global_rank(int index) const = 0;
  virtual int index_of(int global_rank) const = 0;  // -1 when not a member

  // Staging: `slots()` slots of `slot_bytes()` per rank; chunk c uses slot c % slots().
  virtual uint32_t slots() const = 0;
  virtual size_t slot_bytes() const = 0;
  virtual char* slot(int index, uint64_t chunk) const = 0;
  // The same as plain numbers, for executors that compute slot addresses in their inner
  // loops without a virtual call: slot(index, chunk) ==
  // base + rank_stride * index + slot_bytes * (chunk % slots).
  struct SlotGeometry {
    char* base = nullptr;
    size_t rank_stride = 0;
    size_t slot_bytes = 0;
    uint32_t slots = 0;
  };
  virtual SlotGeometry slot_geometry() const = 0;
  // The CPUs the members may run on together (the union of their affinity masks): equal on
  // every rank, for choices all make alike; fewer than the members means they take turns.
  virtual int agreed_cores() const = 0;
  // The slowest member's measured copy rate (GB/s) and the smallest last-level cache
  // (support/host_rates.h): equal on every rank, for the planner's one-host model.
  virtual double agreed_copy_gbs() const = 0;
  virtual double agreed_cache_bytes() const = 0;

  virtual SharedRankLine& line(int index) const = 0;
  virtual char* rank_area(int index) const = 0;  // kRankAreaBytes, 64-byte aligned
  virtual char* fast_area(int index) const = 0;  // kFastAreaBytes, 64-byte aligned
  virtual char* exchange_area(int index) const = 0;  // kExchangeAreaBytes, 64-byte aligned

  // Called while a wait on member `index` is slow (once its spinning ends, then after every
  // sleep), so that the executor can notice a peer that will never publish what the wait
  // needs (it runs another call): an error ends the wait.
  class StallCheck {
   public:
    virtual Status operator()(int index) const = 0;

   protected:
    ~StallCheck() = default;
  };

  // My counter becomes value (monotonic); wakes whoever waits on me.
  virtual void publish(int counter, uint64_t value) = 0;
  // Waits until member `index`'s counter reaches at_least; `what` names the wait in errors.
  virtual Status wait_for(int index, int counter, uint64_t at_least, const Deadline& deadline, const char* what,
                          const StallCheck& stall) = 0;
  // The same for every other member.
  virtual Status wait_for_all(int counter, uint64_t at_least, const Deadline& deadline, const char* what,
                              const StallCheck& stall) = 0;

  // A word the executor placed in my memory (my fast area), next to the data it guards, so
  // that a peer's one cache miss brings both: published and waited for like a counter.
  virtual void publish_word(std::atomic<uint64_t>& word, uint64_t value) = 0;
  // Waits until `word`, which member `index` publishes, reaches at_least.
  virtual Status wait_word(int index, const std::atomic<uint64_t>& word, uint64_t at_least, const Deadline& deadline,
                           const char* what, const StallCheck& stall) = 0;
  // Makes every member's waits return at once with an error (this rank failed, seeing
  // `why`: the first to mark says it to the others, whose errors then quote the cause).
  virtual void mark_failed(const std::string& why) = 0;
  // Ok while every member lives and none has failed; else an error naming the rank. From
  // any thread, without waiting (for executors whose waits run elsewhere: device kernels).
  virtual Status members_alive() const = 0;
};

}  // namespace kolo
