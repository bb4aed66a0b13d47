// What a GPU program does with cudaStreamSynchronize, for the device scenario of
// nccl_dropin_test on kolo's emulated device, which has no CUDA runtime: the stream is
// synchronized through kolo's device runtime (in libkolo, the one the drop-in uses). The
// only file of the test program that sees a kolo header; the rest sees only nccl.h.
#include <chrono>
#include <cstddef>
#include <thread>

#include "support/clock.h"
#include "support/device/device.h"

extern "C" int nccl_test_stream_synchronize(void* stream) {
  return kolo::device::runtime().stream_synchronize(stream, kolo::Deadline(60)).ok() ? 0 : 1;
}

// A second stream, for the self send/receive across streams (cudaStreamCreate).
extern "C" int nccl_test_stream_create(void** stream) {
  return kolo::device::runtime().stream_create(stream).ok() ? 0 : 1;
}
extern "C" int nccl_test_stream_destroy(void* stream) {
  return kolo::device::runtime().stream_destroy(stream).ok() ? 0 : 1;
}

namespace {
void sleep_50ms(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }
}  // namespace

// Work that writes `bytes` of `value` at p on `stream`, late (a kernel that takes a while):
// 50 ms of waiting, then a memset, both enqueued on the stream.
extern "C" int nccl_test_fill_late(void* stream, void* p, int value, size_t bytes) {
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  if (!dev.launch_host_func(stream, sleep_50ms, nullptr).ok()) return 1;
  return dev.memset_async(p, value, bytes, stream).ok() ? 0 : 1;
}
