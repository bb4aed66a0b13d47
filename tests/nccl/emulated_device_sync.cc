// What a GPU program does with cudaStreamSynchronize, for the device scenario of
// nccl_dropin_test on kolo's emulated device, which has no CUDA runtime: the stream is
// synchronized through kolo's device runtime (in libkolo, the one the drop-in uses). The
// only file of the test program that sees a kolo header; the rest sees only nccl.h.
#include "support/clock.h"
#include "support/device/device.h"

extern "C" int nccl_test_stream_synchronize(void* stream) {
  return kolo::device::runtime().stream_synchronize(stream, kolo::Deadline(60)).ok() ? 0 : 1;
}
