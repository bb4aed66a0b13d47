// What the drop-in asks of a device, through kolo's device runtime (support/device): the
// current device (ncclCommCuDevice) and a PreMulSum scalar that lives in device memory.
// kolo's C API has neither, so this reaches into libkolo's C++ runtime, which libkolo
// exports; both libraries are built from the same tree.
#include <cstdint>

#include "api/nccl/nccl_internal.h"
#include "support/clock.h"
#include "support/device/device.h"
#include "support/env.h"

namespace kolo_nccl {

int current_device() {
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  if (dev.device_count() <= 0) return -1;
  kolo::Result<int> device = dev.current_device();
  return device.ok() ? device.value() : -1;
}

ncclResult_t read_scalar(const char* function, const ncclComm* comm, const void* p, ncclDataType_t dtype,
                         void* stream, double* out) {
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  if (dev.pointer_info(p).kind != kolo::device::MemoryKind::kDevice) {
    *out = scalar_value(p, dtype);
    return ncclSuccess;
  }
  // NCCL reads a device scalar while the collective runs, in stream order. kolo takes its
  // prescale by value, so the value is copied out after the stream's earlier work: this
  // blocks the calling thread until then (bounded by KOLO_TIMEOUT).
  uint64_t bits = 0;
  kolo::Status status = dev.memcpy_async(&bits, p, dtype_bytes(dtype), stream);
  if (status.ok()) status = dev.stream_synchronize(stream, kolo::Deadline(kolo::env_timeout_seconds()));
  if (!status.ok()) {
    return fail(ncclUnhandledCudaError, words(function, " on ", rank_of(comm), ": reading the PreMulSum scalar at ",
                                              p, " (device memory): ", status.message()));
  }
  *out = scalar_value(&bits, dtype);
  return ncclSuccess;
}

}  // namespace kolo_nccl

namespace kolo_nccl {

ncclResult_t set_thread_device(const char* function, int device) {
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  const int count = dev.device_count();
  if (count <= 0) return ncclSuccess;
  if (device < 0 || device >= count) {
    return fail(ncclInvalidArgument, words(function, ": device ", device, " does not exist (", count, " devices)"));
  }
  kolo::Status status = dev.set_device(device);
  if (!status.ok()) {
    return fail(ncclUnhandledCudaError, words(function, ": making device ", device, " current: ", status.message()));
  }
  return ncclSuccess;
}

}  // namespace kolo_nccl
