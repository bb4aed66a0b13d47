#include "engine/planner/comm_settings.h"

#include <cstdlib>

#include "support/env.h"

namespace kolo {

const char* device_barrier_setting_name(DeviceBarrierSetting setting) {
  switch (setting) {
    case DeviceBarrierSetting::kAuto: return "auto";
    case DeviceBarrierSetting::kKernel: return "kernel";
    case DeviceBarrierSetting::kHost: return "host";
  }
  return "?";
}

Result<CommSettings> read_comm_settings() {
  CommSettings s;
  Result<long long> chunk = env_int("KOLO_CHUNK_BYTES");  // at least 1024 (the table's range)
  if (!chunk.ok()) return chunk.status();
  s.chunk_bytes = static_cast<size_t>(chunk.value());
  Result<Algorithm> algorithm = parse_algorithm_name(env_string("KOLO_ALGO"));
  if (!algorithm.ok()) return algorithm.status();
  s.forced = algorithm.value();
  const std::string backend = env_string("KOLO_BACKEND");
  if (backend != "kolo" && backend != "nccl" && !backend.empty()) {
    return error(Code::kInvalidArgument, "KOLO_BACKEND='", backend, "' is not kolo or nccl");
  }
  s.nccl_backend = backend == "nccl";
  s.lazy_links = env_string("KOLO_LAZY_CONNECT") == "1";
  s.device_ipc = env_string("KOLO_DEVICE_IPC") != "0";
  s.device_flagged = env_string("KOLO_DEVICE_FLAGGED") != "0";
  s.device_auto_register = env_string("KOLO_DEVICE_AUTO_REGISTER") != "0";
  const std::string barrier = env_string("KOLO_DEVICE_BARRIER");
  if (barrier == "kernel") {
    s.device_barrier = DeviceBarrierSetting::kKernel;
  } else if (barrier == "host") {
    s.device_barrier = DeviceBarrierSetting::kHost;
  } else if (barrier != "auto" && !barrier.empty()) {
    return error(Code::kInvalidArgument, "KOLO_DEVICE_BARRIER='", barrier, "' is not auto, kernel or host");
  }
  if (env_is_set("KOLO_SHM_STREAM_BYTES")) {
    Result<long long> bytes = env_int("KOLO_SHM_STREAM_BYTES");  // >= 0 (the table's range)
    if (!bytes.ok()) return bytes.status();
    // Outputs from this size on are written past the caches (engine/executors/local).
    if (bytes.value() != 0) s.shm_stream_bytes = static_cast<size_t>(bytes.value());
  }
  s.timeout_seconds = env_timeout_seconds();
  s.nccl_library = env_string("KOLO_NCCL_LIBRARY");
  // NCCL's own variable: kolo must know whether the communicators it makes block.
  const char* blocking = std::getenv("NCCL_COMM_BLOCKING");
  s.nccl_comm_blocking = blocking != nullptr && std::string(blocking) == "1";
  const char* pipes = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  if (pipes != nullptr && *pipes != '\0') s.mps_pipe_directory = pipes;
  return s;
}

}  // namespace kolo
