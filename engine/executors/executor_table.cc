#include "engine/executors/executor.h"

#include "support/device/device.h"

namespace kolo {
namespace {

// Indexed by ExecutorKind.
constexpr ExecutorRow kRows[kExecutorCount] = {
    {ExecutorKind::kSchedule, "schedule", declare_schedule_executor, create_schedule_executor},
    {ExecutorKind::kLocal, "local", declare_local_executor, create_local_executor},
    {ExecutorKind::kDeviceStaged, "device_staged", declare_staged_device_executor, create_staged_device_executor},
    {ExecutorKind::kNccl, "nccl", declare_nccl_executor, create_nccl_executor},
    {ExecutorKind::kDeviceIpc, "device_ipc", declare_ipc_device_executor, create_ipc_device_executor},
    {ExecutorKind::kCompressed, "compressed", declare_compressed_link_executor, create_compressed_link_executor},
};

}  // namespace

Status refuse_graph_capture(const CollCall& call, int rank, const char* executor) {
  Result<bool> capturing = device::runtime().stream_capturing(call.stream);
  if (!capturing.ok()) return capturing.status();
  if (!capturing.value()) return Status();
  return error(Code::kUnsupported, "rank ", rank, ": the ", executor, " path cannot be captured in a CUDA graph yet; ",
               "capture with KOLO_BACKEND=nccl, or run the collective outside the capture");
}

Status check_device_group(const PlannedCall* calls, size_t n, int rank) {
  for (size_t i = 1; i < n; ++i) {
    if (calls[i].call.stream != calls[0].call.stream || calls[i].call.device != calls[0].call.device) {
      return error(Code::kInvalidArgument, "rank ", rank, ": a group of device calls on different streams or devices (",
                   calls[0].call.stream, " on device ", calls[0].call.device, " and ", calls[i].call.stream,
                   " on device ", calls[i].call.device, "); kolo runs a group on one stream");
    }
  }
  return Status();
}

const ExecutorRow& executor_row(ExecutorKind kind) { return kRows[static_cast<int>(kind)]; }

}  // namespace kolo
