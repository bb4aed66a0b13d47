// Appends steps to a Schedule with less noise in the algorithm code.
#pragma once

#include <utility>
#include <vector>

#include "engine/schedule.h"

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

// The whole collective on one rank: out = scale(in). Every algorithm's p == 1 case.
inline Schedule single_rank_copy(const char* algorithm, DType dtype, size_t bytes, ScaleUse scale) {
  Schedule sched;
  sched.algorithm = algorithm;
  ScheduleBuilder(sched, dtype, ReduceOp::kSum).copy({kBufOutput, 0, bytes}, {kBufInput, 0, bytes}, scale);
  return sched;
}

// Where an allreduce-like algorithm reads this rank's contribution: with a pre-scale, the
// scaled input is made once in the output (and read from there); in place, the output;
// else the input. Returns the buffer and the step that makes it ready (-1: none).
inline std::pair<int, int> contribution_source(ScheduleBuilder& b, size_t bytes, bool in_place, bool prescaled) {
  if (!prescaled) return {in_place ? kBufOutput : kBufInput, -1};
  return {kBufOutput, b.copy({kBufOutput, 0, bytes}, {kBufInput, 0, bytes}, ScaleUse::kPre)};
}

// Element range [offset, offset + count) of part `index` when `total` is split into
// `parts` near-equal parts (the first total % parts parts get one more).
inline std::pair<size_t, size_t> split_part(size_t total, size_t parts, size_t index) {
  size_t base = total / parts;
  size_t extra = total % parts;
  size_t offset = index * base + (index < extra ? index : extra);
  return {offset, base + (index < extra ? 1 : 0)};
}

}  // namespace kolo
