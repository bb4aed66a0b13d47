// The KOLO_* settings a communicator runs by, read once when it is made (read_comm_settings)
// and lent from there: to the planner (through make_plan_context, engine/plan_inputs.h) and
// to the executors (ExecutorEnv::settings). No executor reads the environment itself, so
// kolo-plan, which reads the same settings with the same function, plans what runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/collective.h"
#include "support/status.h"

namespace kolo {

// KOLO_DEVICE_BARRIER: how device_ipc's ranks wait for each other (plan.cc decides from it
// and what the set-up found, device_barrier_kind).
enum class DeviceBarrierSetting : uint8_t { kAuto, kKernel, kHost };
const char* device_barrier_setting_name(DeviceBarrierSetting setting);

struct CommSettings {
  size_t chunk_bytes = size_t{1} << 20;      // KOLO_CHUNK_BYTES: the ring algorithms' pipeline chunk
  Algorithm forced = Algorithm::kAuto;       // KOLO_ALGO
  bool nccl_backend = false;                 // KOLO_BACKEND=nccl: device calls go to NCCL
  bool lazy_links = true;                    // KOLO_LAZY_CONNECT
  bool device_ipc = true;                    // KOLO_DEVICE_IPC: kernels over the peers' memory
  bool device_flagged = true;                // KOLO_DEVICE_FLAGGED: device_ipc's one-kernel collectives
  bool device_auto_register = true;          // KOLO_DEVICE_AUTO_REGISTER: user buffers shared per call
  DeviceBarrierSetting device_barrier = DeviceBarrierSetting::kAuto;  // KOLO_DEVICE_BARRIER
  size_t shm_stream_bytes = SIZE_MAX;        // KOLO_SHM_STREAM_BYTES (0 = off = SIZE_MAX)
  double timeout_seconds = 300;              // KOLO_TIMEOUT (kolo_comm_set_timeout changes the communicator's)
  // What the device executors must know of the process's environment: the NCCL library to
  // load, whether NCCL's communicators block (NCCL_COMM_BLOCKING), and where an MPS
  // control daemon would keep its pipes (CUDA_MPS_PIPE_DIRECTORY).
  std::string nccl_library = "libnccl.so.2";
  bool nccl_comm_blocking = false;  // NCCL_COMM_BLOCKING=1
  std::string mps_pipe_directory = "/tmp/nvidia-mps";
};

// The settings from the environment; an error names a value out of range.
Result<CommSettings> read_comm_settings();

}  // namespace kolo
