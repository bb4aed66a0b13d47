#include "engine/local/local_program.h"

#include <string>

#include "engine/executors/device_ipc/device_slot_programs.h"
#include "engine/local/local_programs.h"
#include "engine/verifier/verifier.h"

namespace kolo {
namespace {

// Addresses the recorded program computes with but never touches: each buffer gets its own
// range, and a pointer maps back to (buffer, offset). In place, the aliased buffer's
// pointer lies in the other's range, as the API lays them out, and is named by that one
// (the verifier's layouts alias the same way).
constexpr uintptr_t kRange = uintptr_t{1} << 40;
constexpr uintptr_t kInputBase = (kBufInput + 1) * kRange, kOutputBase = (kBufOutput + 1) * kRange,
                    kScratchBase = (kBufScratch + 1) * kRange, kStagingBase = (kBufStaging + 1) * kRange;
char* address(uintptr_t a) { return reinterpret_cast<char*>(a); }

class RecordOps {
 public:
  RecordOps(int ranks, int me, size_t slot_bytes, uint32_t slots, DType dtype, Schedule* out)
      : ranks_(ranks), me_(me), slot_bytes_(slot_bytes), slots_(slots), esize_(dtype_size(dtype)), dtype_(dtype),
        s_(*out) {}

  int size() const { return ranks_; }
  int index() const { return me_; }
  int global_rank(int index) const { return index; }
  int index_of(int rank) const { return rank >= 0 && rank < ranks_ ? rank : -1; }
  uint32_t slots() const { return slots_; }
  size_t slot_bytes() const { return slot_bytes_; }
  char* slot(int index, uint64_t chunk) const {
    return address(kStagingBase + (static_cast<uint64_t>(index) * slots_ + chunk % slots_) * slot_bytes_);
  }

  Status copy(void* dst, const void* src, size_t bytes) {
    return add(StepKind::kCopy, dst, &src, 1, bytes / esize_, ReduceOp::kSum, ScaleUse::kNone);
  }
  Status copy_out(void* dst, const void* src, size_t bytes) { return copy(dst, src, bytes); }
  Status reduce_out(void* dst, const void* const* srcs, int n, size_t count, DType dtype, ReduceOp op, ScaleUse use) {
    return reduce(dst, srcs, n, count, dtype, op, use);
  }
  Status scale_copy(void* dst, const void* src, size_t count, DType, ScaleUse use) {
    return add(StepKind::kCopy, dst, &src, 1, count, ReduceOp::kSum, use);
  }
  Status reduce(void* dst, const void* const* srcs, int n, size_t count, DType, ReduceOp op, ScaleUse use) {
    return add(StepKind::kReduce, dst, srcs, n, count, op, use);
  }
  char* scratch(size_t bytes) {
    s_.scratch_bytes = std::max(s_.scratch_bytes, bytes);
    return address(kScratchBase);
  }

  void publish(int counter, uint64_t value) { progress(StepKind::kSignal, -1, counter, value); }
  Status wait_for(int index, int counter, uint64_t at_least, const char*) {
    progress(StepKind::kWait, index, counter, at_least);
    return Status();
  }
  Status wait_for_all(int counter, uint64_t at_least, const char*) {
    if (ranks_ > 1) progress(StepKind::kWait, -1, counter, at_least);
    return Status();
  }
  Status check_peers(int) { return Status(); }  // a recording runs one call on every rank
  // A device slot program's barrier (one kernel on a device): this rank's number posted,
  // then every peer's awaited. drop_barrier: the one left out (a test that the verifier
  // notices; -1: none).
  Status barrier() {
    ++barriers_;
    if (static_cast<int64_t>(barriers_) == drop_barrier_) return Status();
    publish(kBarrier, barriers_);
    return wait_for_all(kBarrier, barriers_, "barrier");
  }
  void drop_barrier(int64_t which) { drop_barrier_ = which; }

 private:
  Slice slice(const void* p, size_t bytes) const {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    const int buffer = static_cast<int>(a / kRange) - 1;  // the bases' order is the buffers'
    return {buffer, a % kRange, bytes};
  }

  Status add(StepKind kind, void* dst, const void* const* srcs, int n, size_t count, ReduceOp op, ScaleUse use) {
    auto slice_of = [this](const void* p, size_t bytes) { return slice(p, bytes); };
    append_in_order(s_, data_step(kind, dtype_, op, count, use, dst, srcs, n, slice_of));
    return Status();
  }
  void progress(StepKind kind, int peer, int counter, uint64_t value) {
    append_in_order(s_, progress_step(kind, peer, counter, value));
  }

  int ranks_, me_;
  size_t slot_bytes_;
  uint32_t slots_;
  size_t esize_;
  DType dtype_;
  Schedule& s_;
  uint64_t barriers_ = 0;
  int64_t drop_barrier_ = -1;
};

// A recorded call's buffers: distinct ranges, aliased as the API lays out in-place calls
// (reduce_scatter's output lies in its input, every other collective's input lies in its
// output; allgather(v): at this rank's block).
CollCall recorded_call(const CollSpec& spec, const CollSpec& mine, int r) {
  CollCall call;
  call.spec = mine;
  call.send = address(kInputBase);
  call.recv = address(kOutputBase);
  if (!mine.in_place) return call;
  const size_t es = dtype_size(spec.dtype);
  if (spec.kind == CollKind::kReduceScatter) {
    call.recv = address(kInputBase + r * mine.bytes());
  } else if (spec.kind == CollKind::kAllgather) {
    call.send = address(kOutputBase + r * mine.bytes());
  } else if (spec.kind == CollKind::kAllgatherv) {
    call.send = address(kOutputBase + spec.displs[r] * es);
  } else {
    call.send = address(kOutputBase);
  }
  return call;
}

}  // namespace

std::vector<Schedule> record_local_programs(const CollSpec& spec, int ranks, Algorithm algorithm, size_t slot_bytes,
                                            uint32_t slots) {
  std::vector<Schedule> out(ranks);
  const bool reduces = spec.kind == CollKind::kAllreduce || spec.kind == CollKind::kReduce;
  for (int r = 0; r < ranks; ++r) {
    const CollSpec mine = spec_for_rank(spec, r);
    Schedule& s = out[r];
    s.algorithms = {reduces ? algorithm : Algorithm::kOneShot};
    s.slots = slots;
    s.slot_bytes = slot_bytes;
    const CollCall call = recorded_call(spec, mine, r);
    RecordOps ops(ranks, r, slot_bytes, slots, spec.dtype, &s);
    uint64_t next_chunk = 0;
    (void)LocalPrograms<RecordOps>(ops, next_chunk).run(call, algorithm);
  }
  return out;
}

std::vector<Schedule> record_device_programs(const CollSpec& spec, int ranks, Algorithm algorithm, size_t slot_bytes,
                                             int64_t drop_barrier) {
  std::vector<Schedule> out(ranks);
  for (int r = 0; r < ranks; ++r) {
    const CollSpec mine = spec_for_rank(spec, r);
    Schedule& s = out[r];
    s.algorithms = {spec.kind == CollKind::kAllreduce ? algorithm : Algorithm::kOneShot};
    s.slots = 2;
    s.slot_bytes = slot_bytes;
    const CollCall call = recorded_call(spec, mine, r);
    RecordOps ops(ranks, r, slot_bytes, 2, spec.dtype, &s);
    ops.drop_barrier(drop_barrier);
    uint64_t next_chunk = 0;
    (void)DeviceSlotPrograms<RecordOps>(ops, next_chunk).run(call, algorithm);
  }
  return out;
}

}  // namespace kolo
