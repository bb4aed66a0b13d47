// What the drop-in asks of a device, through kolo's device runtime (support/device): the
// current device (ncclCommCuDevice) and a PreMulSum scalar that lives in device memory.
// kolo's C API has neither, so this reaches into libkolo's C++ runtime, which libkolo
// exports; both libraries are built from the same tree.
#include <cstdint>
#include <cstring>

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

ncclResult_t read_scalar(const char* function, const ncclComm* comm, const void* p, ncclDataType_t dtype, void* stream,
                         double* out) {
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
    return fail(ncclUnhandledCudaError, words(function, " on ", rank_of(comm), ": reading the PreMulSum scalar at ", p,
                                              " (device memory): ", status.message()));
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

namespace kolo_nccl {

ncclResult_t local_copy(const char* function, const ncclComm* comm, void* dst, const void* src, size_t bytes,
                        void* stream) {
  if (bytes == 0 || dst == src) return ncclSuccess;
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  const bool device = dev.pointer_info(dst).kind == kolo::device::MemoryKind::kDevice ||
                      dev.pointer_info(src).kind == kolo::device::MemoryKind::kDevice;
  if (!device) {
    std::memmove(dst, src, bytes);
    return ncclSuccess;
  }
  const kolo::Status status = dev.memcpy_async(dst, src, bytes, stream);
  if (!status.ok()) {
    return fail(ncclUnhandledCudaError, words(function, " on ", rank_of(comm), ": copying ", bytes, " bytes from ", src,
                                              " to ", dst, " on the stream: ", status.message()));
  }
  return ncclSuccess;
}

}  // namespace kolo_nccl

double kolo_nccl::timeout_seconds() { return kolo::env_timeout_seconds(); }
