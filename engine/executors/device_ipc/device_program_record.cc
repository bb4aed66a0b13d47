#include "engine/executors/device_ipc/device_program_record.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "engine/executors/device_ipc/compressed_program.h"
#include "engine/executors/device_ipc/flagged_program.h"
#include "engine/executors/device_ipc/zero_copy_program.h"
#include "engine/local/local_ops.h"
#include "engine/verifier/verifier.h"

namespace kolo {
namespace {

// Addresses the recorded programs compute with but never touch: buffer b (schedule.h's,
// or a rank_buffer) gets the range [(b + 1) << 40, (b + 2) << 40), and a pointer maps back
// to (buffer, offset).
constexpr uintptr_t kRange = uintptr_t{1} << 40;
char* address(int buffer, size_t offset = 0) {
  return reinterpret_cast<char*>(static_cast<uintptr_t>(buffer + 1) * kRange + offset);
}

// Rank q's input and output as buffers `input` and `output`: distinct ranges, aliased as
// the API lays out in-place calls (reduce_scatter's output lies in its input, every other
// collective's input lies in its output; allgather(v): at the rank's block), as the
// verifier's layouts alias them.
std::pair<char*, char*> buffers(const CollSpec& spec, int q, int input, int output) {
  char* send = address(input);
  char* recv = address(output);
  if (!spec_for_rank(spec, q).in_place) return {send, recv};  // a reduce: only at the root
  const size_t es = dtype_size(spec.dtype), block = spec_for_rank(spec, q).bytes();
  switch (spec.kind) {
    case CollKind::kReduceScatter: recv = address(input, q * block); break;
    case CollKind::kAllgather: send = address(output, q * block); break;
    case CollKind::kAllgatherv: send = address(output, spec.displs[q] * es); break;
    default: send = recv;
  }
  return {send, recv};
}

// The steps all three programs take: copies, reduces, barriers, flags. Each step depends
// on the one before (the programs run in order on one stream).
class Recorder {
 public:
  Recorder(const CollSpec& spec, int ranks, int me, Schedule* out)
      : spec_(spec), ranks_(ranks), me_(me), es_(dtype_size(spec.dtype)), s_(*out) {}

  int size() const { return ranks_; }
  int index() const { return me_; }
  int rank() const { return me_; }

  Status copy(void* dst, const void* src, size_t bytes) {
    return data(dst, &src, 1, bytes / es_, ReduceOp::kSum, ScaleUse::kNone);
  }
  Status scale_copy(void* dst, const void* src, size_t count, ScaleUse use) {
    return data(dst, &src, 1, count, ReduceOp::kSum, use);
  }
  Status reduce(void* dst, const void* const* srcs, int n, size_t count, DType, ReduceOp op, ScaleUse use) {
    return data(dst, srcs, n, count, op, use);
  }
  // A barrier kernel: this rank's number posted, every peer's awaited. drop_barrier: the
  // one left out (-1: none).
  Status barrier() {
    if (static_cast<int64_t>(++barriers_) == drop_barrier_) return Status();
    progress(StepKind::kSignal, -1, kBarrier, barriers_);
    if (ranks_ > 1) progress(StepKind::kWait, -1, kBarrier, barriers_);
    return Status();
  }
  void drop_barrier(int64_t which) { drop_barrier_ = which; }

 protected:
  // Elements of the call's dtype (a wire buffer's values as FLOAT32 cells); a reduce of one
  // source is a copy. Nothing for nothing.
  Status data(void* dst, const void* const* srcs, int n, size_t count, ReduceOp op, ScaleUse use) {
    if (count == 0) return Status();
    auto slice_of = [this](const void* p, size_t bytes) { return slice(p, bytes); };
    append_in_order(s_, data_step(n == 1 ? StepKind::kCopy : StepKind::kReduce, spec_.dtype, op, count, use, dst, srcs,
                                  n, slice_of));
    return Status();
  }
  void progress(StepKind kind, int peer, int counter, uint64_t value) {
    append_in_order(s_, progress_step(kind, peer, counter, value));
  }
  char* scratch(size_t offset, size_t bytes) {
    s_.scratch_bytes = std::max(s_.scratch_bytes, offset + bytes);
    return address(kBufScratch, offset);
  }

  const CollSpec& spec_;
  const int ranks_, me_;
  const size_t es_;
  Schedule& s_;

 private:
  // This rank's own buffers by their own names, whatever range named them.
  Slice slice(const void* p, size_t bytes) const {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    int buffer = static_cast<int>(a / kRange) - 1;
    if (buffer >= kBufRanks && (buffer - kBufRanks) / 2 == me_) buffer = (buffer - kBufRanks) % 2;
    return {buffer, a % kRange, bytes};
  }
  uint64_t barriers_ = 0;
  int64_t drop_barrier_ = -1;
};

// zero_copy_program.h's ops: the peers' buffers as rank_buffer ranges.
class ZeroCopyRecorder : public Recorder {
 public:
  using Recorder::Recorder;
  char* send_of(int index) const { return at(index).first; }
  char* recv_of(int index) const { return at(index).second; }
  CollCall call() const {
    CollCall c;
    c.spec = spec_for_rank(spec_, me_);
    std::tie(c.send, c.recv) = buffers(spec_, me_, kBufInput, kBufOutput);
    return c;
  }

 private:
  std::pair<char*, char*> at(int q) const {
    if (q == me_) return buffers(spec_, q, kBufInput, kBufOutput);
    return buffers(spec_, q, rank_buffer(q, kBufInput), rank_buffer(q, kBufOutput));
  }
};

// compressed_program.h's ops: two slots of (in, out) halves per rank, a wire value a cell.
class CompressedRecorder : public Recorder {
 public:
  CompressedRecorder(const CollSpec& spec, int ranks, int me, Schedule* out, size_t chunk_values, size_t slot_bytes)
      : Recorder(spec, ranks, me, out), chunk_values_(chunk_values), slot_bytes_(slot_bytes) {}
  char* slot(int index, uint64_t chunk) const {
    return address(kBufStaging, (static_cast<size_t>(index) * 2 + chunk % 2) * slot_bytes_);
  }
  size_t half_bytes() const { return slot_bytes_ / 2; }
  size_t chunk_values() const { return chunk_values_; }
  size_t wire_bytes(size_t count) const { return count * sizeof(float); }
  Status compress(void* dst, const float* src, size_t count, ScaleUse use) { return scale_copy(dst, src, count, use); }
  Status decompress_sum(float* dst, const void* const* srcs, int n, size_t count, ScaleUse use) {
    return data(dst, srcs, n, count, ReduceOp::kSum, use);
  }
  Status recompress_sum(void* dst, const void* const* srcs, int n, size_t count, ScaleUse use) {
    return data(dst, srcs, n, count, ReduceOp::kSum, use);
  }

 private:
  const size_t chunk_values_, slot_bytes_;
};

// flagged_program.h's ops: boxes as staging slots, flags as counters, calls numbered from 1
// as the kernel numbers them.
class FlaggedRecorder : public Recorder {
 public:
  FlaggedRecorder(const CollSpec& spec, int ranks, int me, Schedule* out, size_t box_bytes, int parities,
                  size_t registers_at)
      : Recorder(spec, ranks, me, out), box_bytes_(box_bytes), parities_(parities), registers_at_(registers_at) {}
  Status begin() {
    ++call_;
    parity_ = parities_ == 2 ? static_cast<int>(call_ % 2) : 0;
    return Status();
  }
  char* box(int owner, int sender) const {
    return address(kBufStaging, (static_cast<size_t>(owner) * 2 * ranks_ + parity_ * ranks_ + sender) * box_bytes_);
  }
  Status header(int to) {
    progress(StepKind::kSignal, -1, flag_counter(to, parity_), 2 * call_);
    return Status();
  }
  Status post(int to, char* at, const void* src, size_t count, ScaleUse use) {
    KOLO_TRY(scale_copy(at, src, count, use));
    if (to != me_) progress(StepKind::kSignal, -1, flag_counter(to, parity_), 2 * call_ + 1);
    return Status();
  }
  Status await_header(int from) {
    progress(StepKind::kWait, from, flag_counter(me_, parity_), 2 * call_);
    return Status();
  }
  Status await(int from, const char*) {
    progress(StepKind::kWait, from, flag_counter(me_, parity_), 2 * call_ + 1);
    return Status();
  }
  // The kernel's registers: private, as scratch is.
  char* registers(size_t bytes) { return scratch(registers_at_, bytes); }
  Status end() { return Status(); }

 private:
  const size_t box_bytes_;
  const int parities_;
  const size_t registers_at_;
  uint64_t call_ = 0;
  int parity_ = 0;
};

// Bytes of a rank's output (the verifier's layout_for).
size_t output_bytes(const CollSpec& spec, int ranks) {
  const size_t es = dtype_size(spec.dtype);
  switch (spec.kind) {
    case CollKind::kAllgather:
    case CollKind::kAlltoall: return spec.count * es * ranks;
    case CollKind::kAllgatherv: {
      size_t end = 0;
      for (int r = 0; r < ranks; ++r) end = std::max(end, (spec.displs[r] + spec.counts[r]) * es);
      return end;
    }
    default: return spec.count * es;
  }
}

Schedule empty_schedule(Algorithm algorithm) {
  Schedule s;
  s.algorithms = {algorithm};
  return s;
}

}  // namespace

std::vector<Schedule> record_zero_copy_programs(const CollSpec& spec, int ranks, int64_t drop_barrier) {
  std::vector<Schedule> out(ranks, empty_schedule(spec.kind == CollKind::kAllreduce ? Algorithm::kTwoShot
                                                                                      : Algorithm::kOneShot));
  for (int r = 0; r < ranks; ++r) {
    ZeroCopyRecorder ops(spec, ranks, r, &out[r]);
    ops.drop_barrier(drop_barrier);
    (void)ZeroCopyProgram<ZeroCopyRecorder>(ops).run(ops.call());
  }
  return out;
}

std::vector<Schedule> record_compressed_programs(const CollSpec& spec, int ranks, Algorithm algorithm,
                                                 size_t chunk_values, int64_t drop_barrier) {
  // A slot's halves hold a chunk's values and the two-shot's shares rounded up to 16 each.
  const size_t slot_bytes = 2 * sizeof(float) * (chunk_values + 16 * static_cast<size_t>(ranks));
  std::vector<Schedule> out(ranks, empty_schedule(algorithm));
  for (int r = 0; r < ranks; ++r) {
    out[r].slots = 2;
    out[r].slot_bytes = slot_bytes;
    CompressedRecorder ops(spec, ranks, r, &out[r], chunk_values, slot_bytes);
    ops.drop_barrier(drop_barrier);
    CollCall call;
    call.spec = spec_for_rank(spec, r);
    std::tie(call.send, call.recv) = buffers(spec, r, kBufInput, kBufOutput);
    uint64_t chunks = 0;
    (void)CompressedProgram<CompressedRecorder>(ops, chunks).run(call, algorithm);
  }
  return out;
}

std::vector<Schedule> record_flagged_programs(const CollSpec& spec, int ranks, int calls, int parities) {
  const size_t es = dtype_size(spec.dtype);
  const size_t most = spec.kind == CollKind::kAllgatherv && !spec.counts.empty()
                          ? *std::max_element(spec.counts.begin(), spec.counts.end())
                          : spec.count;
  const size_t box_bytes = std::max<size_t>(1, most) * es;
  // Scratch: the earlier calls' results, then the registers.
  const size_t registers_at = (output_bytes(spec, ranks) + 63) / 64 * 64;
  std::vector<Schedule> out(ranks, empty_schedule(Algorithm::kOneShot));
  for (int r = 0; r < ranks; ++r) {
    out[r].slots = 2 * static_cast<uint32_t>(ranks);
    out[r].slot_bytes = box_bytes;
    FlaggedRecorder ops(spec, ranks, r, &out[r], box_bytes, parities, registers_at);
    for (int c = 1; c <= calls; ++c) {
      CollCall call;
      call.spec = spec_for_rank(spec, r);
      std::tie(call.send, call.recv) = buffers(spec, r, kBufInput, kBufOutput);
      if (c < calls) call.recv = address(kBufScratch);
      if (c < calls) out[r].scratch_bytes = std::max(out[r].scratch_bytes, registers_at);
      (void)FlaggedProgram<FlaggedRecorder>(ops).run(call);
    }
  }
  return out;
}

}  // namespace kolo
