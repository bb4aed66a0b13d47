// The flight recorder: each communicator's last KOLO_TRACE_CALLS calls (default 1024), what
// they were, how they were planned and when they entered, started and ended, so that a hang
// or a failure can be read after the fact (tools/kolo_trace reads the dumps of all ranks).
//
// Recording costs a few stores and two reads of the CPU's timestamp counter per call (the
// small-call lane's: one, kLaneTimedEvery says why): the ring is preallocated, nothing is
// formatted until a dump. A dump is one JSON file per rank
// and communicator, written on the communicator's first failure and on kolo_comm_dump()
// (both where KOLO_TRACE_DIR names a folder, or the caller names one), and on SIGUSR1 (where
// KOLO_TRACE_DIR is set and the application has no handler of its own). Dumps hold no
// tensor data and no store secret.
#pragma once

#include <atomic>
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

// The small-call lane's calls (call_runner.h) read the clock as they enter, and as they end
// only where they waited past spinning (about 200 us, CallRunner::last_call_waited), failed,
// or their number is a multiple of this (alike on every rank): the timestamp counter costs
// about 5 ns a read in a call of 140 (issue 52). Their entry, and so how long a call that
// hangs has waited, is always there; kolo-trace counts an untimed call's wait as none (next
// to the millisecond it calls a straggler's lag).
constexpr uint64_t kLaneTimedEvery = 16;

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

  // The call thread (one at a time, under the communicator's call lock): entered() takes
  // the next slot and returns its index, for the calls that follow; `seq`: the
  // communicator's collective number (Communicator::last_call_seq). started() only where
  // the call waited to start (for the call lock, or device work before it): else it started
  // when it entered. Inline, a dozen plain stores: this is on every call's path.
  size_t entered(const CollSpec& spec, uint64_t seq, uint16_t group_index, uint16_t group_size, uint64_t now) {
    const size_t index = written_.load(std::memory_order_relaxed);
    const bool p2p = spec.kind == CollKind::kSend || spec.kind == CollKind::kRecv;
    const uint64_t p2p_seq = !p2p || spec.peer < 0 || spec.peer >= size_ ? 0
                             : ++(spec.kind == CollKind::kSend ? p2p_sent_ : p2p_received_)[spec.peer];
    Slot& s = slot(index);
    begin_write(s);
    put(s.seq, seq);
    put(s.count, spec.count);
    put(s.entered, now);
    put(s.started, 0);
    put(s.shape, static_cast<uint64_t>(spec.kind) | uint64_t{static_cast<uint8_t>(spec.dtype)} << 8 |
                     uint64_t{static_cast<uint8_t>(spec.wire)} << 16 | uint64_t{static_cast<uint8_t>(spec.op)} << 24 |
                     uint64_t{group_size} << 32 | uint64_t{group_index} << 48);
    put(s.place, uint64_t{static_cast<uint32_t>(spec.root)} | uint64_t{static_cast<uint32_t>(spec.peer)} << 32);
    put(s.p2p_device, p2p_seq << 1 | (spec.device ? 1 : 0));
    put(s.outcome, static_cast<uint64_t>(CallState::kEntered));
    end_write(s);
    written_.store(index + 1, std::memory_order_release);
    return index;
  }
  void started(size_t index, uint64_t now) {
    Slot& s = slot(index);
    begin_write(s);
    put(s.started, now);
    put(s.outcome, static_cast<uint64_t>(CallState::kRunning));
    end_write(s);
  }
  // `now` 0: a call that ended untimed (the small-call lane reads the clock at the end of
  // one call in kLaneTimedEvery, Communicator::run_on_lane): its outcome alone, one store,
  // which a dump reads whole without the seqlock; its slot keeps ended 0.
  void ended(size_t index, const Plan* plan, bool ok, bool device, uint64_t now) {
    Slot& s = slot(index);
    const CallState state = !ok ? CallState::kFailed : device ? CallState::kOnStream : CallState::kDone;
    const uint64_t outcome =
        static_cast<uint64_t>(state) |
        (plan == nullptr ? 0
                         : uint64_t{1} << 8 | uint64_t{static_cast<uint8_t>(plan->executor)} << 16 |
                               uint64_t{static_cast<uint8_t>(plan->algorithm)} << 24 |
                               uint64_t{static_cast<uint8_t>(plan->protocol)} << 32);
    if (now == 0) {
      s.outcome.store(outcome, std::memory_order_release);
      return;
    }
    begin_write(s);
    put(s.ended, now);
    put(s.outcome, outcome);
    end_write(s);
  }

  // Writes this communicator's ring to <folder>/kolo-trace.<comm>.rank<R>.json (atomically:
  // a temporary file renamed). Any thread; a slot being written meanwhile is skipped.
  Result<std::string> dump(const DumpRequest& request) const;
  bool failure_dumped() const { return failure_dumped_.load(std::memory_order_acquire); }
  // The dump as text (the file's contents).
  std::string to_json(const DumpRequest& request) const;

 private:
  // A seqlock per slot: only the call thread writes; a dump copies a slot whose version is
  // even and unchanged across the copy. The fields are relaxed atomics (plain stores on the
  // machines kolo runs on), so that a dump reading one while it is written is no data race,
  // only a copy to retry.
  struct Slot {
    std::atomic<uint64_t> version{0};  // odd while the call thread writes
    std::atomic<uint64_t> seq{0}, count{0}, entered{0}, started{0}, ended{0};
    std::atomic<uint64_t> shape{0};       // kind, dtype, wire, op (a byte each), group size, group index
    std::atomic<uint64_t> place{0};       // root, peer (32 bits each)
    std::atomic<uint64_t> p2p_device{0};  // p2p_seq << 1 | device
    std::atomic<uint64_t> outcome{0};     // state, planned, executor, algorithm, protocol (a byte each)
    CallRecord get() const;
  };
  static void put(std::atomic<uint64_t>& field, uint64_t value) { field.store(value, std::memory_order_relaxed); }
  // A mask, not a remainder: a 64-bit division costs a small call a few nanoseconds, twice.
  Slot& slot(size_t index) { return slots_[index & mask_]; }
  static void begin_write(Slot& s) {
    s.version.store(s.version.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
  }
  static void end_write(Slot& s) {
    s.version.store(s.version.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  std::vector<Slot> slots_;  // capacity rounded up to a power of two
  size_t mask_;              // slots_.size() - 1
  size_t capacity_;          // the calls a dump holds
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
// all): how many were written, or the first failure (each is tried).
Result<int> dump_all_recorders(const DumpRequest& request);
// Makes SIGUSR1 dump every recorder to KOLO_TRACE_DIR, once per process, where that is set
// and SIGUSR1 has the default disposition (an application's own handler is left alone).
void arm_trace_signal();

}  // namespace kolo
