// Element-wise kernels on device memory, through the device runtime (support/device):
// the same contracts, argument checks and bit-exact results as reduce_into / scale_copy
// (kernels/host_kernels.h), run by the kernel body of kernels/reduce_body.h.
//   cuda      the __global__ wrapper in cuda/reduce_kernels.cu (builds with nvcc);
//   emulated  the same body, block by block, on the stream's worker thread;
//   none      kUnsupported.
// Calls are asynchronous on the stream (nullptr: the default stream); the Status covers
// argument and launch errors. One input with no scale is a memcpy_async on the stream.
// Includes no CUDA header.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/barrier_body.h"
#include "kernels/compress.h"
#include "kernels/dtype.h"
#include "kernels/flagged_body.h"
#include "support/device/device.h"
#include "support/status.h"

namespace kolo {

constexpr unsigned kKernelThreads = 256;  // threads per block
// Grid-stride loops cover any count; more blocks than this only adds scheduling work.
constexpr unsigned kKernelMaxBlocks = 1u << 20;

// While one lives on this thread, the reduce and scale-copy kernels it launches skip their
// work when *status (device memory: device_ipc's copy of its barrier status) is nonzero at
// the time they run (a barrier before them gave up). Set by device_ipc around its calls.
// Under a guard a copy (one input, no scale) runs as a kernel too, not as a plain
// memcpy_async, so that it is guarded: after a failed barrier nothing reads a peer's
// memory, which the peer may free.
class ScopedKernelGuard {
 public:
  explicit ScopedKernelGuard(const uint32_t* status);
  ~ScopedKernelGuard();
  ScopedKernelGuard(const ScopedKernelGuard&) = delete;
  ScopedKernelGuard& operator=(const ScopedKernelGuard&) = delete;

 private:
  const uint32_t* previous_;
};

// With the runtime this process chose (device::runtime()).
Status device_reduce_into(void* dst, const void* const* srcs, int nsrcs, size_t count,
                          DType dtype, ReduceOp op, Scale scale, void* stream);
Status device_scale_copy(void* dst, const void* src, size_t count, DType dtype, Scale scale,
                         void* stream);

// With a given backend and grid cap (tests force 1..3 blocks so that the grid-stride
// loops take several steps). max_blocks >= 1.
Status device_reduce_into(const device::DeviceOps& dev, void* dst, const void* const* srcs,
                          int nsrcs, size_t count, DType dtype, ReduceOp op, Scale scale,
                          void* stream, unsigned max_blocks = kKernelMaxBlocks);
Status device_scale_copy(const device::DeviceOps& dev, void* dst, const void* src, size_t count,
                         DType dtype, Scale scale, void* stream,
                         unsigned max_blocks = kKernelMaxBlocks);

// Wire codecs (kernels/compress.h) on the device, for a direct reduce over peers' memory:
// wire = encode(scale * src); dst = scale * sum_k decode(wires[k]); wire_out =
// encode(scale * sum_k decode(wires[k])). Same checks, layout and bits as the host
// functions: the cuda backend runs kernels/cuda/compress_kernels.cu, the emulated one the
// host twins (kernels/compress.cc) on the stream's worker.
Status device_compress(const device::DeviceOps& dev, void* wire, const float* src, size_t count,
                       WireFormat fmt, Scale scale, void* stream);
Status device_decompress_sum(const device::DeviceOps& dev, float* dst, const void* const* wires,
                             int nwires, size_t count, WireFormat fmt, Scale scale, void* stream);
Status device_recompress_sum(const device::DeviceOps& dev, void* wire_out, const void* const* wires,
                             int nwires, size_t count, WireFormat fmt, Scale scale, void* stream);

// The one-host step barrier (kernels/barrier_body.h) on the stream: one thread posts this
// rank's number to every peer and waits for theirs, until args.timeout_ns or abort.
Status device_barrier(const device::DeviceOps& dev, const BarrierArgs& args, void* stream);

// A one-kernel collective (kernels/flagged_body.h) on the stream: args names the call, the
// boxes and the words; pre (applied to each contribution, where not the identity) and post
// (to the result) are filled in here for reductions, and copies turned into bytes.
Status device_flagged(const device::DeviceOps& dev, FlaggedArgs args, Scale pre, Scale post, void* stream);

// Loads every kernel on the current device (cuda: see cuda_kernels.h; once per device and
// process), so that no launch has to load one while a barrier kernel spins. The
// device_ipc executor calls it at set-up, before its first kernel. Nothing to do elsewhere.
Status device_preload_kernels(const device::DeviceOps& dev);

// How a launch splits the work (kernels/reduce_body.h), exposed for tests: head elements
// up to dst's 16-byte boundary, then npacks 16-byte vectors when every source shares
// dst's misalignment mod 16 (else 0: element by element), then the tail; grid blocks of
// kKernelThreads.
struct ReducePlan {
  size_t head = 0;
  size_t npacks = 0;
  unsigned grid = 1;
};
ReducePlan plan_reduce(const void* dst, const void* const* srcs, int nsrcs, size_t count,
                       DType dtype, unsigned max_blocks = kKernelMaxBlocks);

}  // namespace kolo
