// Internal to the verifier: one-host programs (engine/local/). Their ranks exchange no
// messages; they share the host's staging slots (kBufStaging, one region of symbolic cells
// for all ranks) and order themselves through monotonic per-rank counters (kSignal,
// kWait). Each rank runs its steps in order, so the verifier runs every rank as far as it
// can, blocking at a wait until the awaited counter gets there.
//
// Happens-before across ranks: a wait for rank q's counter c >= v comes after q's first
// signal that set c to v or more, and after everything q did before it (a vector clock per
// rank, joined at each wait). Two accesses to one staging cell from different ranks, one
// of them a write, must be ordered so; FastTrack's bookkeeping per cell (the last write,
// and the reads since it that no later read comes after) finds every pair that is not.
// The relation does not depend on the order the verifier picks to run ranks in (each
// rank's steps are fixed and counters only grow), so one run proves every order.
//
// Where a program names a peer's input or output (rank_buffer, verifier.h), every rank's
// input and output cells are tracked the same way, and two more rules hold: another rank
// touches rank q's buffers only after q's first step (before it they are q's caller's:
// its input may not be ready) and before q's last step (after it q has returned, and its
// caller may reuse them). q's input counts as written by q's first step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/schedules/schedule.h"
#include "engine/verifier/verifier.h"
#include "engine/verifier/verifier_values.h"
#include "support/status.h"

namespace kolo::verifier {

constexpr int kStagingRegion = 3;   // the region index staging cells get (per-rank ones are 0..2)
constexpr int kCounters = kProgramCounters;  // counters per rank (verifier.h)
constexpr int kMaxSharedRanks = 256;

// Whether any rank's schedule signals, waits or names the staging buffer or a rank_buffer.
bool is_one_host(const std::vector<Schedule>& schedules);

// What the one-host run needs from the verifier: it executes copies and reduces (reading
// and writing staging slices through SharedMemory::read/write) and formats failures.
class SharedHost {
 public:
  virtual Status execute(int rank, size_t step) = 0;
  virtual Status fail_step(int rank, size_t step, const std::string& why) const = 0;
  virtual Status fail_program(const std::string& why) const = 0;

 protected:
  ~SharedHost() = default;
};

class SharedMemory {
 public:
  SharedMemory(const std::vector<Schedule>& schedules, size_t elem_bytes, SharedHost& host)
      : s_(schedules), p_(static_cast<int>(schedules.size())), es_(elem_bytes), host_(host) {}

  // The structure a one-host program needs beyond an ordinary schedule's: at most 256
  // ranks, one staging geometry, steps in order (step i depends on step i - 1), no
  // messages, counters in [0, kCounters), waits on another rank (or -1: every other),
  // signals that never go back, staging slices element-aligned inside one slot, peers'
  // buffers of a rank that exists (their bounds: the caller's structure check). layouts:
  // every rank's buffers, kept.
  Status check(const std::vector<Layout>& layouts);
  // A checked staging slice's cells in the shared region: (first, count).
  std::pair<size_t, size_t> cells(const Slice& s) const;
  // Runs every rank to its end twice: races, deadlock and unwritten reads first, then
  // the values (copies and reduces through host.execute).
  Status run();
  // The current step of `rank` reads or writes the values of a staging slice.
  Status read(int rank, size_t step, const Slice& s, std::vector<int32_t>& out);
  Status write(int rank, size_t step, const Slice& s, const std::vector<int32_t>& values);

 private:
  struct ReadNode {
    int32_t rank;
    uint32_t epoch;  // step + 1
    int32_t next;
  };
  struct Signal {
    uint64_t value;
    size_t snapshot;  // offset of the signalling rank's clock in snapshots_
  };

  Status check_slice(int r, size_t i, const Slice& s);
  Status pass(bool values);
  bool tracked(int r, const Slice& s, size_t* first, size_t* count, int* owner) const;
  Status access(int r, size_t i, const Slice& s, bool write);
  Status returned() const;
  Status unwritten(int r, size_t i, const Slice& s, size_t cell) const;
  bool arrived(int r, const Step& st, int* short_peer) const;
  void join(int r, int q, int counter, uint64_t value);
  bool ordered(int r, int q, uint32_t epoch) const { return q == r || clock_[r * p_ + q] >= epoch; }
  Status race(int q, uint32_t epoch, const char* q_does, int r, size_t i, const char* r_does, size_t cell) const;
  std::string where(size_t cell) const;
  std::string slice_str(const Slice& s) const;
  std::string touching(int r, size_t i, size_t cell) const;
  void release(int32_t list);

  const std::vector<Schedule>& s_;
  const int p_;
  const size_t es_;
  SharedHost& host_;
  uint32_t slots_ = 0;
  size_t slot_bytes_ = 0;
  std::vector<size_t> base_;  // first cell of each slot (owner * slots + slot), then the end
  const std::vector<Layout>* layouts_ = nullptr;
  bool peers_ = false;            // some rank names a rank_buffer: rank buffers are tracked too
  std::vector<size_t> rank_base_;  // then: first cell of each rank's input and output regions, then the end
  // Per cell: value id (values pass); last writer (rank, epoch) and the head of its reads
  // list in nodes_ (race pass).
  std::vector<int32_t> value_;
  std::vector<int16_t> writer_;
  std::vector<uint32_t> written_at_;
  std::vector<int32_t> reads_;
  std::vector<ReadNode> nodes_;
  int32_t free_ = -1;
  std::vector<uint32_t> clock_;      // p x p: clock_[r * p + q] = steps of q that r's current step comes after
  std::vector<uint64_t> counter_;    // p x kCounters
  std::vector<std::vector<Signal>> signals_;  // per (rank, counter): the signals that raised it
  std::vector<uint32_t> snapshots_;
  Status unwritten_;  // race pass: the first read of staging nothing had written
};

}  // namespace kolo::verifier
