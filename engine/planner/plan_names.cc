// The names of plan()'s choices, for logs, the timeline, kolo-plan and the flight recorder.
#include "engine/planner/plan.h"

namespace kolo {

std::string plan_label(const Plan& p) {
  std::string text = str_cat(executor_name(p.executor), " ", algorithm_name(p.algorithm));
  if (p.executor == ExecutorKind::kSchedule) text += str_cat(" (", p.schedule.steps.size(), " steps)");
  if (p.protocol != Protocol::kSteps) text += str_cat(", protocol ", protocol_name(p.protocol));
  if (p.barrier != BarrierKind::kNone) text += str_cat(", barrier ", barrier_name(p.barrier));
  if (p.streamed_outputs) text += ", outputs streamed past the caches";
  if (p.chunk_plan) {
    text += p.chunk_elems != 0 ? str_cat("; chunks of ", p.chunk_elems, " elements, each ") : "; one chunk, ";
    text += str_cat("run as: ", plan_label(*p.chunk_plan));
  }
  return text;
}

std::string plan_summary(const CollSpec& spec, int ranks, const Plan& p) {
  return str_cat(coll_name(spec.kind), " of ", spec.bytes(), " B on ", ranks, " ranks: ", plan_label(p));
}

const char* protocol_name(Protocol protocol) {
  switch (protocol) {
    case Protocol::kSteps: return "steps";
    case Protocol::kFastBox: return "fast_box";
    case Protocol::kSlots: return "slots";
    case Protocol::kZeroCopy: return "zero_copy";
    case Protocol::kFlagged: return "flagged";
    case Protocol::kCompressedSlots: return "compressed_slots";
    case Protocol::kAlone: return "alone";
    case Protocol::kStagedChunks: return "staged_chunks";
    case Protocol::kNccl: return "nccl";
  }
  return "?";
}

const char* barrier_name(BarrierKind barrier) {
  switch (barrier) {
    case BarrierKind::kNone: return "none";
    case BarrierKind::kSharedMemory: return "shared_memory";
    case BarrierKind::kDeviceKernel: return "device_kernel";
    case BarrierKind::kDeviceHost: return "device_host";
  }
  return "?";
}

const char* executor_name(ExecutorKind kind) {
  switch (kind) {
    case ExecutorKind::kSchedule: return "schedule";
    case ExecutorKind::kLocal: return "local";
    case ExecutorKind::kDeviceStaged: return "device_staged";
    case ExecutorKind::kNccl: return "nccl";
    case ExecutorKind::kDeviceIpc: return "device_ipc";
    case ExecutorKind::kCompressed: return "compressed";
  }
  return "?";
}

}  // namespace kolo
