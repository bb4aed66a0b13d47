// What the drop-in asks of a device, through kolo's device runtime (support/device): the
// current device (ncclCommCuDevice) and a PreMulSum scalar that lives in device memory.
// kolo's C API has neither, so this reaches into libkolo's C++ runtime, which libkolo
// exports; both libraries are built from the same tree.
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

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

ncclResult_t check_devices(const char* function, int ndev, const int* devlist) {
  const int count = kolo::device::runtime().device_count();
  for (int i = 0; i < ndev; ++i) {
    const int device = devlist != nullptr ? devlist[i] : i;
    if (device >= 0 && (count <= 0 || device < count)) continue;
    const std::string where = devlist != nullptr ? words("devlist[", i, "] = ", device) : words("device ", device);
    return fail(ncclInvalidArgument,
                words(function, ": communicator ", i, " of ", ndev, ": ", where, " does not exist (",
                      count > 0 ? words(count, " devices") : std::string("no device runtime: need a number >= 0"),
                      ")"));
  }
  return ncclSuccess;
}

}  // namespace kolo_nccl

namespace kolo_nccl {

namespace {

// The events that order one stream after another (order_streams), one per device (a
// CUDA event belongs to its device). Recorded again for each use, and never destroyed: a
// wait enqueued on a stream may still refer to one after the call returns (kolo's emulated
// device keeps a pointer to it until the wait runs), so it must outlive every wait.
// g_order_mutex makes each record-then-wait one step (another thread's record in between
// would be the one waited for).
std::mutex g_order_mutex;
std::map<int, void*> g_order_events;

// Orders `after`'s later work after the work enqueued on `before` until now: an event
// recorded on before, waited on by after (nothing when they are the same stream).
ncclResult_t order_streams(const char* function, const ncclComm* comm, void* before, void* after) {
  if (before == after) return ncclSuccess;
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  std::lock_guard<std::mutex> lock(g_order_mutex);
  void*& event = g_order_events[current_device()];
  kolo::Status status;
  if (event == nullptr) {
    status = dev.event_create(&event);
    if (!status.ok()) event = nullptr;  // tried again next time
  }
  if (status.ok()) status = dev.event_record(event, before);
  if (status.ok()) status = dev.stream_wait_event(after, event);
  if (!status.ok()) {
    return fail(ncclUnhandledCudaError, words(function, " on ", rank_of(comm), ": ordering stream ", after,
                                              " after stream ", before, " (an event): ", status.message()));
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t local_copy(const char* function, const ncclComm* comm, void* dst, const void* src, size_t bytes,
                        void* stream) {
  return local_copy_after(function, comm, dst, src, bytes, stream, stream);
}

ncclResult_t local_copy_after(const char* function, const ncclComm* comm, void* dst, const void* src, size_t bytes,
                              void* src_stream, void* stream) {
  if (bytes == 0 || dst == src) return ncclSuccess;
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  const bool device = dev.pointer_info(dst).kind == kolo::device::MemoryKind::kDevice ||
                      dev.pointer_info(src).kind == kolo::device::MemoryKind::kDevice;
  if (!device) {
    std::memmove(dst, src, bytes);
    return ncclSuccess;
  }
  if (ncclResult_t r = order_streams(function, comm, src_stream, stream); r != ncclSuccess) return r;
  const kolo::Status status = dev.memcpy_async(dst, src, bytes, stream);
  if (!status.ok()) {
    return fail(ncclUnhandledCudaError, words(function, " on ", rank_of(comm), ": copying ", bytes, " bytes from ", src,
                                              " to ", dst, " on the stream: ", status.message()));
  }
  return ncclSuccess;
}

}  // namespace kolo_nccl

double kolo_nccl::timeout_seconds() { return kolo::env_timeout_seconds(); }
