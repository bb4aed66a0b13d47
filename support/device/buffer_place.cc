#include "support/device/buffer_place.h"

namespace kolo::device {

BufferPlace BufferPlace::known(bool device, int device_index) {
  BufferPlace place;
  place.seen_ = true;
  place.device_ = device;
  place.index_ = device ? device_index : -1;
  return place;
}

std::string BufferPlace::describe() const {
  return device_ ? str_cat("memory of device ", index_) : std::string("host memory");
}

Status BufferPlace::add(const char* what, const void* buffer) {
  // In place: the buffer asked about already (one driver query less per call).
  if (buffer == nullptr || buffer == last_) return Status();
  // Without a device runtime ("none") all memory is the host's: no question to ask (a
  // small call's every nanosecond counts, issue 52).
  const DeviceOps& rt = runtime();
  const PointerInfo info = rt.kind.runs_kernels ? rt.pointer_info(buffer) : PointerInfo{};
  const BufferPlace here = known(info.kind == MemoryKind::kDevice, info.device);
  if (!seen_) {
    *this = here;
    last_ = buffer;
    return Status();
  }
  if (here.device_ != device_ || here.index_ != index_) {
    return error(Code::kInvalidArgument, what, " is ", here.describe(), " but the other buffers are ", describe(),
                 "; a call's buffers must all be host memory or all memory of one device");
  }
  last_ = buffer;
  return Status();
}

}  // namespace kolo::device
