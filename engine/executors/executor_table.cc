#include "engine/executors/executor.h"

namespace kolo {
namespace {

// Indexed by ExecutorKind.
constexpr ExecutorRow kRows[kExecutorCount] = {
    {ExecutorKind::kSchedule, "schedule", create_schedule_executor},
    {ExecutorKind::kLocal, "local", create_local_executor},
    {ExecutorKind::kDeviceStaged, "device_staged", create_staged_device_executor},
};

}  // namespace

const ExecutorRow& executor_row(ExecutorKind kind) { return kRows[static_cast<int>(kind)]; }

}  // namespace kolo
