// Appends steps to a Schedule with less noise in the algorithm code, and the opening that
// every schedule generator shares (ScheduleDraft).
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

#include "engine/schedules/algorithms.h"
#include "engine/schedules/schedule.h"

namespace kolo {

class ScheduleBuilder {
 public:
  ScheduleBuilder(Schedule& schedule, DType dtype, ReduceOp op) : s_(schedule), dtype_(dtype), op_(op) {}

  int send(int peer, uint32_t tag, Slice src, std::vector<int> deps = {}) {
    Step step;
    step.kind = StepKind::kSend;
    step.peer = peer;
    step.tag = tag;
    step.srcs = {src};
    return add(std::move(step), std::move(deps));
  }
  int recv(int peer, uint32_t tag, Slice dst, std::vector<int> deps = {}) {
    Step step;
    step.kind = StepKind::kRecv;
    step.peer = peer;
    step.tag = tag;
    step.dst = dst;
    return add(std::move(step), std::move(deps));
  }
  // dst = scale(op(srcs...)); srcs.size() in 1..8.
  int reduce(Slice dst, std::vector<Slice> srcs, ScaleUse scale, std::vector<int> deps = {}) {
    Step step;
    step.kind = StepKind::kReduce;
    step.dst = dst;
    step.srcs = std::move(srcs);
    step.count = dst.bytes / dtype_size(dtype_);
    step.scale = scale;
    return add(std::move(step), std::move(deps));
  }
  int copy(Slice dst, Slice src, ScaleUse scale, std::vector<int> deps = {}) {
    Step step;
    step.kind = StepKind::kCopy;
    step.dst = dst;
    step.srcs = {src};
    step.count = dst.bytes / dtype_size(dtype_);
    step.scale = scale;
    return add(std::move(step), std::move(deps));
  }
  // Reserves scratch bytes; returns their offset.
  size_t scratch(size_t bytes) {
    size_t offset = s_.scratch_bytes;
    s_.scratch_bytes += (bytes + 63) / 64 * 64;
    return offset;
  }
  // The index the next step will get.
  int next_step() const { return static_cast<int>(s_.steps.size()); }

 private:
  int add(Step step, std::vector<int> deps) {
    step.dtype = dtype_;
    step.op = op_;
    std::erase(deps, -1);  // -1 = "no step", so callers can pass optional dependencies
    step.deps = std::move(deps);
    s_.steps.push_back(std::move(step));
    return static_cast<int>(s_.steps.size()) - 1;
  }

  Schedule& s_;
  DType dtype_;
  ReduceOp op_;
};

// What a generator's communicator of one rank amounts to.
enum class OneRank {
  // A reduction (allreduce, reduce, reduce-scatter) has nobody to combine with: the whole
  // collective is out = scale(in), one copy with both scales.
  kCopy,
  // The generator's own steps are already right without peers (gathers and broadcasts
  // copy their own block; a barrier or point-to-point call needs nothing more).
  kGeneral,
};

namespace schedule_detail {
// Base-from-member: the schedule is constructed before the builder that refers to it.
struct OwnedSchedule {
  Schedule schedule;
};
}  // namespace schedule_detail

// The opening of every generator, in one place: a schedule named after its algorithm and
// a builder that appends to it with the call's dtype and op; with OneRank::kCopy and one
// rank, the schedule is already complete (finished()) and the generator returns take().
class ScheduleDraft : private schedule_detail::OwnedSchedule, public ScheduleBuilder {
 public:
  ScheduleDraft(Algorithm algorithm, const CollSpec& spec, const PlanContext& ctx, OneRank one_rank)
      : ScheduleDraft(algorithm, spec.dtype, spec.op) {
    if (ctx.size != 1 || one_rank != OneRank::kCopy) return;
    // A copy combines nothing, so it records kSum rather than the call's op.
    const size_t bytes = spec.bytes();
    ScheduleBuilder(schedule, spec.dtype, ReduceOp::kSum)
        .copy({kBufOutput, 0, bytes}, {kBufInput, 0, bytes}, ScaleUse::kBoth);
    finished_ = true;
  }
  // For schedules whose messages carry no data of a call (the barrier).
  ScheduleDraft(Algorithm algorithm, DType dtype, ReduceOp op) : ScheduleBuilder(schedule, dtype, op) {
    schedule.algorithms = {algorithm};
  }
  ScheduleDraft(const ScheduleDraft&) = delete;
  ScheduleDraft& operator=(const ScheduleDraft&) = delete;

  // True when the opening already built the whole collective.
  bool finished() const { return finished_; }
  Schedule take() { return std::move(schedule); }

 private:
  bool finished_ = false;
};

// Where an allreduce-like algorithm reads this rank's contribution: with a pre-scale, the
// scaled input is made once in the output (and read from there); in place, the output;
// else the input. Returns the buffer and the step that makes it ready (-1: none).
inline std::pair<int, int> contribution_source(ScheduleBuilder& b, size_t bytes, bool in_place, bool prescaled) {
  if (!prescaled) return {in_place ? kBufOutput : kBufInput, -1};
  return {kBufOutput, b.copy({kBufOutput, 0, bytes}, {kBufInput, 0, bytes}, ScaleUse::kPre)};
}

// The pre-scaled input made once in fresh scratch, where the output cannot hold it
// (reduce-scatter: the output is one block; reduce: only the root has an output).
// Returns the scratch slice and the copy that fills it.
inline std::pair<Slice, int> prescaled_in_scratch(ScheduleBuilder& b, size_t bytes) {
  const Slice scaled{kBufScratch, b.scratch(bytes), bytes};
  return {scaled, b.copy(scaled, {kBufInput, 0, bytes}, ScaleUse::kPre)};
}

// Element range [offset, offset + count) of part `index` when `total` is split into
// `parts` near-equal parts (the first total % parts parts get one more).
inline std::pair<size_t, size_t> split_part(size_t total, size_t parts, size_t index) {
  size_t base = total / parts;
  size_t extra = total % parts;
  size_t offset = index * base + (index < extra ? index : extra);
  return {offset, base + (index < extra ? 1 : 0)};
}

// How many pieces a pipelined algorithm cuts `count` elements into: one per chunk_bytes
// (so sending, receiving and reducing overlap), at least one, at most one per element.
inline int pieces_for(size_t count, size_t elem, size_t chunk_bytes) {
  size_t bytes = count * elem;
  size_t pieces = std::max<size_t>(1, (bytes + chunk_bytes - 1) / std::max<size_t>(chunk_bytes, 1));
  return static_cast<int>(std::min<size_t>(pieces, std::max<size_t>(count, 1)));
}

}  // namespace kolo
