// Where the executor's copies and collectives run for a group of tensors: on the host
// (copies now, on the runtime's thread; collectives block) or on one device (copies as
// kernels and collectives enqueued on the runtime's own stream of that device, after the
// stream has waited for each request's ready event). A device lane is finished by
// waiting for its stream, with the deadline, before the requests complete: a completed
// request's outputs are ready for any stream, as Horovod's synchronize() promises.
#pragma once

#include <vector>

#include "engine/collective.h"
#include "kernels/dtype.h"
#include "support/status.h"

namespace kolo::runtime {

class Lane {
 public:
  Lane() = default;  // the host
  ~Lane();
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  // Switches to `device` (< 0: the host), creating that device's stream on first use.
  // One device per runtime: tensors on another device than the first are refused at
  // enqueue (the runtime's check), so a switch happens at most once.
  Status use(int device);
  bool on_device() const { return on_device_; }

  // Collectives of this lane run on its stream and device.
  void place(CollCall& call) const;
  Status wait_ready(void* event);  // the stream waits for a producer's event
  Status zero(void* dst, size_t bytes);
  Status copy(void* dst, const void* src, size_t bytes);
  Status scale_copy(void* dst, const void* src, size_t count, DType dtype, Scale scale);
  // A buffer of this lane's memory of at least `bytes` (the fusion buffer; grows).
  Result<char*> fusion(size_t bytes);
  // Scratch output (a joined rank's zeros, a failed allocation's output).
  Result<char*> scratch(size_t bytes);
  // Device: waits for the stream (at most `timeout_seconds`); host: nothing to wait for.
  Status finish(double timeout_seconds);

 private:
  struct Buffer {
    char* data = nullptr;
    size_t bytes = 0;
    std::vector<char> host;
  };
  Result<char*> grow(Buffer& buffer, size_t bytes);
  void release(Buffer& buffer);

  int device_ = -1;          // the device of stream_
  void* stream_ = nullptr;   // created on the first use of a device
  bool on_device_ = false;   // the current group's tensors are device memory
  Buffer fusion_, scratch_;
};

}  // namespace kolo::runtime
