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

Status BufferPlace::add(const std::string& what, const void* buffer) {
  // In place: the buffer asked about already (one driver query less per call).
  if (buffer == nullptr || buffer == last_) return Status();
  const PointerInfo info = runtime().pointer_info(buffer);
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
