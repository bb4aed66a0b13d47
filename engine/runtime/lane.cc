#include "engine/runtime/lane.h"

#include <cstring>

#include "kernels/device_kernels.h"
#include "kernels/host_kernels.h"
#include "support/device/device.h"
#include "support/env.h"

namespace kolo::runtime {

Lane::~Lane() {
  device::ScopedDevice on(device_);
  // Queued work may still read the buffers: let the stream finish first (bounded).
  if (stream_ != nullptr) (void)device::runtime().stream_synchronize(stream_, Deadline(env_timeout_seconds()));
  release(fusion_);
  release(scratch_);
  if (stream_ != nullptr) (void)device::runtime().stream_destroy(stream_);
}

Status Lane::use(int device) {
  on_device_ = device >= 0;
  if (device < 0 || device == device_) return Status();
  on_device_ = false;
  if (stream_ != nullptr) {
    return error(Code::kInvalidUsage, "the runtime's tensors are on device ", device_, "; a tensor on device ", device,
                 " cannot join them");
  }
  device::ScopedDevice on(device);
  KOLO_TRY(on.status());
  KOLO_TRY(device::runtime().stream_create(&stream_));
  device_ = device;
  on_device_ = true;
  return Status();
}

void Lane::place(CollCall& call) const {
  call.spec.device = on_device_;
  call.stream = on_device_ ? stream_ : nullptr;
  call.device = on_device_ ? device_ : -1;
}

Status Lane::wait_ready(void* event) {
  if (!on_device() || event == nullptr) return Status();
  device::ScopedDevice on(device_);
  return device::runtime().stream_wait_event(stream_, event);
}

Status Lane::zero(void* dst, size_t bytes) {
  if (bytes == 0) return Status();
  if (!on_device()) {
    std::memset(dst, 0, bytes);
    return Status();
  }
  device::ScopedDevice on(device_);
  return device::runtime().memset_async(dst, 0, bytes, stream_);
}

Status Lane::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status();
  if (!on_device()) {
    std::memcpy(dst, src, bytes);
    return Status();
  }
  device::ScopedDevice on(device_);
  return device::runtime().memcpy_async(dst, src, bytes, stream_);
}

Status Lane::scale_copy(void* dst, const void* src, size_t count, DType dtype, Scale scale) {
  if (!on_device()) return kolo::scale_copy(dst, src, count, dtype, scale);
  device::ScopedDevice on(device_);
  return device_scale_copy(dst, src, count, dtype, scale, stream_);
}

Result<char*> Lane::fusion(size_t bytes) { return grow(fusion_, bytes); }
Result<char*> Lane::scratch(size_t bytes) { return grow(scratch_, bytes); }

Result<char*> Lane::grow(Buffer& buffer, size_t bytes) {
  if (!on_device()) {
    if (buffer.host.size() < bytes) buffer.host.resize(bytes);
    return buffer.host.data();
  }
  if (buffer.bytes >= bytes && buffer.data != nullptr) return buffer.data;
  device::ScopedDevice on(device_);
  // The old buffer may still be read by queued work: wait for the stream before freeing.
  if (buffer.data != nullptr) KOLO_TRY(finish(env_timeout_seconds()));
  release(buffer);
  void* p = nullptr;
  KOLO_TRY(device::runtime().malloc(&p, bytes));
  buffer.data = static_cast<char*>(p);
  buffer.bytes = bytes;
  return buffer.data;
}

void Lane::release(Buffer& buffer) {
  if (buffer.data != nullptr) (void)device::runtime().free(buffer.data);
  buffer.data = nullptr;
  buffer.bytes = 0;
}

Status Lane::finish(double timeout_seconds) {
  if (!on_device()) return Status();
  device::ScopedDevice on(device_);
  return device::runtime().stream_synchronize(stream_, Deadline(timeout_seconds));
}

}  // namespace kolo::runtime
