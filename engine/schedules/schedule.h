// A schedule is data: for one rank, an ordered list of steps over byte ranges of a few
// buffers, with the dependencies between steps. Algorithms produce it; the host executor
// runs it; the planner (later) checks and times the same structure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/collective.h"
#include "kernels/dtype.h"
#include "support/status.h"

namespace kolo {

// Buffers a step can name: the input and output of its call (Step::call), the one
// scratch buffer of the whole schedule, or (one-host programs, engine/local) the staging
// slots of every rank of the host, which every rank reads and writes: byte
// ((owner * slots + slot) * slot_bytes + offset) of kBufStaging is `offset` in slot `slot`
// of rank `owner` (Schedule::slots, Schedule::slot_bytes).
enum : int { kBufInput = 0, kBufOutput = 1, kBufScratch = 2, kBufStaging = 3 };

struct Slice {
  int buffer = kBufInput;
  size_t offset = 0;  // bytes
  size_t bytes = 0;
};

enum class StepKind : uint8_t {
  kSend,    // srcs[0] -> peer
  kRecv,    // peer -> dst
  kReduce,  // dst = scale(op(srcs...)), 1..8 sources, `count` elements of `dtype`
  kCopy,    // dst = scale(srcs[0]); `count` elements of `dtype`
  // One-host programs only: progress published through per-rank monotonic counters in
  // shared memory instead of messages.
  kSignal,  // this rank's counter `counter` becomes `value`
  kWait,    // until rank `peer`'s counter `counter` is >= `value` (peer -1: every other rank)
};

// Which of the call's scale factors a reduce or copy applies.
enum class ScaleUse : uint8_t { kNone, kPre, kPost, kBoth };

// The factor a step applies, for any call that carries a prescale and a postscale (a
// CollCall, the schedule executor's binding of one): how every executor resolves ScaleUse.
template <class Call>
Scale scale_for(ScaleUse use, const Call& call) {
  switch (use) {
    case ScaleUse::kNone: return Scale{};
    case ScaleUse::kPre: return call.prescale;
    case ScaleUse::kPost: return call.postscale;
    case ScaleUse::kBoth:
      return Scale{call.prescale.factor * call.postscale.factor, call.prescale.divisor * call.postscale.divisor};
  }
  return Scale{};
}

struct Step {
  StepKind kind = StepKind::kCopy;
  int call = 0;       // which call of a concatenated schedule this step belongs to
  int peer = -1;      // send/recv
  uint32_t tag = 0;   // send/recv: equal on the matching steps of the two ranks
  std::vector<Slice> srcs;
  Slice dst;
  DType dtype = DType::kUint8;
  ReduceOp op = ReduceOp::kSum;
  size_t count = 0;   // elements, for reduce/copy
  ScaleUse scale = ScaleUse::kNone;
  std::vector<int> deps;  // indices of earlier steps of this rank that must complete first
  int counter = 0;        // signal/wait
  uint64_t value = 0;     // signal/wait
};

struct Schedule {
  // One per call concatenated into this schedule (a group runs as one schedule).
  std::vector<Algorithm> algorithms{Algorithm::kAuto};
  std::vector<Step> steps;
  size_t scratch_bytes = 0;
  int calls() const { return static_cast<int>(algorithms.size()); }
  // One-host programs: the staging slots (kBufStaging) per rank and their size.
  uint32_t slots = 0;
  size_t slot_bytes = 0;
};

// Appends `tail` to `head`: its calls, scratch offsets and dependencies are shifted past
// head's. Used to run a group of calls together; tags stay per call.
void append_schedule(Schedule& head, const Schedule& tail);

// The calls' algorithm names, each once, joined by '+' ("ring", "ring+direct").
std::string schedule_algorithm_name(const Schedule& schedule);

// Human-readable listing, one step per line (for KOLO_DEBUG=TRACE and tests).
std::string schedule_to_string(const Schedule& schedule);

// The same as JSON: {"algorithm", "scratch_bytes", "steps": [{"kind", "peer", "tag",
// "srcs": [{"buffer", "offset", "bytes"}], "dst", "count", "scale", "deps"}]} (kolo-plan).
std::string schedule_to_json(const Schedule& schedule);

// A program's copy over its ops (the device_ipc programs): nothing onto itself (in place),
// nothing empty, so that neither a kernel nor a recorded step stands for no work.
template <class Ops>
Status program_copy(Ops& ops, void* dst, const void* src, size_t bytes) {
  if (dst == src || bytes == 0) return Status();
  return ops.copy(dst, src, bytes);
}

// Recording a program as a Schedule (engine/local/local_program.cc,
// engine/executors/device_ipc/device_program_record.cc): a program runs in order, so each
// step depends on the one before.
inline void append_in_order(Schedule& s, Step st) {
  if (!s.steps.empty()) st.deps.push_back(static_cast<int>(s.steps.size()) - 1);
  s.steps.push_back(std::move(st));
}
// A copy or reduce of `count` elements, its buffers named by `slice_of(pointer, bytes)`.
template <class SliceOf>
Step data_step(StepKind kind, DType dtype, ReduceOp op, size_t count, ScaleUse use, const void* dst,
               const void* const* srcs, int n, SliceOf slice_of) {
  Step st;
  st.kind = kind;
  st.dtype = dtype;
  st.op = op;
  st.count = count;
  st.scale = use;
  const size_t bytes = count * dtype_size(dtype);
  st.dst = slice_of(dst, bytes);
  for (int k = 0; k < n; ++k) st.srcs.push_back(slice_of(srcs[k], bytes));
  return st;
}
// A signal or a wait of a counter (peer -1: every peer).
inline Step progress_step(StepKind kind, int peer, int counter, uint64_t value) {
  Step st;
  st.kind = kind;
  st.peer = peer;
  st.counter = counter;
  st.value = value;
  return st;
}

}  // namespace kolo
