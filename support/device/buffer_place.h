// Where a call's buffers are: host memory, or memory of one device. The one place that
// asks the device runtime what a pointer is and checks that every buffer of a call (a
// collective, a runtime request, a runtime output) is in the same place; the C API, the
// runtime's enqueue and its output allocator all use it.
#pragma once

#include <string>

#include "support/device/device.h"
#include "support/status.h"

namespace kolo::device {

class BufferPlace {
 public:
  BufferPlace() = default;
  // A place already known (a runtime request's, checked against its output).
  static BufferPlace known(bool device, int device_index);

  // Adds a buffer (null: not used, nothing to check). The first decides the place; a later
  // one elsewhere is kInvalidArgument naming `what` and both places ("recv is memory of
  // device 1 but the other buffers are host memory").
  // `what`: a literal; a string is made of it only in the error.
  Status add(const char* what, const void* buffer);

  bool seen() const { return seen_; }
  bool on_device() const { return device_; }
  int device_index() const { return device_ ? index_ : -1; }
  std::string describe() const;  // "host memory" or "memory of device N"

 private:
  bool seen_ = false;
  bool device_ = false;
  int index_ = -1;
  const void* last_ = nullptr;  // the buffer added last
};

}  // namespace kolo::device
