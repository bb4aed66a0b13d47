// The flight recorder: each communicator's last KOLO_TRACE_CALLS calls (default 1024), what
// they were, how they were planned and when they entered, started and ended, so that a hang
// or a failure can be read after the fact (tools/kolo_trace reads the dumps of all ranks).
//
// Recording costs a few stores and two reads of the CPU's timestamp counter per call: the
// ring is preallocated, nothing is formatted until a dump. A dump is one JSON file per rank
// and communicator, written on the communicator's first failure and on kolo_comm_dump()
// (both where KOLO_TRACE_DIR names a folder, or the caller names one), and on SIGUSR1 (where
// KOLO_TRACE_DIR is set and the application has no handler of its own). Dumps hold no
// tensor data and no store secret.
#pragma once

#include <atomic>
#include <type_traits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/collective.h"
#include "engine/planner/plan.h"
#include "support/clock.h"
#include "support/status.h"

namespace kolo {

// support/clock.h's cpu_ticks(); they become wall time only in a dump (TickClock).
inline uint64_t trace_ticks() { return cpu_ticks(); }

enum class CallState : uint8_t { kEntered, kRunning, kDone, kFailed, kOnStream };
const char* call_state_name(CallState state);

// One call as recorded. `seq` numbers the communicator's collectives from 1 in call order,
// the same on every rank (a group's calls take one number each); a send or recv carries the
// number of the last collective before it and its own per-peer count in p2p_seq.
struct CallRecord {
  uint64_t seq = 0;
  uint64_t p2p_seq = 0;
  CollKind kind = CollKind::kAllreduce;
  DType dtype = DType::kFloat32;
  DType wire = DType::kCount;
  ReduceOp op = ReduceOp::kSum;
  int32_t root = 0, peer = -1;
  uint64_t count = 0;
  uint16_t group_index = 0, group_size = 1;
  bool device = false;
  bool planned = false;  // the plan fields below are set
  ExecutorKind executor = ExecutorKind::kSchedule;
  Algorithm algorithm = Algorithm::kAuto;
  Protocol protocol = Protocol::kSteps;
  CallState state = CallState::kEntered;
  uint64_t entered = 0, started = 0, ended = 0;  // trace_ticks(); 0 = not yet
};

static_assert(std::is_trivially_copyable_v<CallRecord>, "the flight recorder copies records as words");

// Where a dump goes and why; folder "" = KOLO_TRACE_DIR.
struct DumpRequest {
  std::string folder;
  std::string reason;  // "failure", "request", "signal"
  std::string error;   // the communicator's first failure, if any
};

class FlightRecorder {
 public:
  // `capacity` > 0 calls. `comm` names the communicator in dumps (its store prefix).
  FlightRecorder(size_t capacity, std::string comm, int rank, int size);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // The call thread (one at a time, under the communicator's call lock from started() on):
  // entered() takes the next slot and returns its index, for the calls that follow; `seq`:
  // the communicator's collective number (Communicator::last_call_seq).
  size_t entered(const CollSpec& spec, uint64_t seq, uint16_t group_index, uint16_t group_size, uint64_t now);
  void started(size_t slot, uint64_t now);
  void ended(size_t slot, const Plan* plan, bool ok, uint64_t now);

  // Writes this communicator's ring to <folder>/kolo-trace.<comm>.rank<R>.json (atomically:
  // a temporary file renamed). Any thread; a slot being written meanwhile is skipped.
  Result<std::string> dump(const DumpRequest& request) const;
  bool failure_dumped() const { return failure_dumped_.load(std::memory_order_acquire); }
  // The dump as text (the file's contents).
  std::string to_json(const DumpRequest& request) const;

 private:
  // A seqlock per slot: only the call thread writes; a dump copies a slot whose version is
  // even and unchanged across the copy. The record is kept as relaxed atomic words, so that
  // a dump reading it while it is written is no data race (only a copy to retry).
  struct Slot {
    static constexpr size_t kWords = (sizeof(CallRecord) + 7) / 8;
    std::atomic<uint64_t> version{0};  // odd while the call thread writes the record
    std::atomic<uint64_t> words[kWords] = {};
    CallRecord get() const;
    void put(const CallRecord& record);  // between begin_write and end_write
  };
  Slot& slot(size_t index) { return slots_[index % slots_.size()]; }
  static void begin_write(Slot& s) {
    s.version.store(s.version.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
  }
  static void end_write(Slot& s) {
    s.version.store(s.version.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  std::vector<Slot> slots_;
  // A failure's dump is written: a signal's (kolorun's, when another rank failed) would
  // only replace it with the same calls under a less telling reason.
  mutable std::atomic<bool> failure_dumped_{false};
  std::atomic<uint64_t> written_{0};  // calls entered so far (the next slot's index)
  std::vector<uint64_t> p2p_sent_, p2p_received_;  // per peer
  std::string comm_;
  int rank_, size_;
};

// KOLO_TRACE_CALLS: the ring's size (0: no recorder).
size_t trace_capacity();
// Dumps every live recorder of this process (SIGUSR1's handler thread, kolo_comm_dump of
// all). Returns how many were written.
int dump_all_recorders(const DumpRequest& request);
// Makes SIGUSR1 dump every recorder to KOLO_TRACE_DIR, once per process, where that is set
// and SIGUSR1 has the default disposition (an application's own handler is left alone).
void arm_trace_signal();

}  // namespace kolo
