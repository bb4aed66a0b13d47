// device_ipc: allreduce with a wire type, through the slots (compressed_program.h,
// ipc_programs.h).
#include "engine/executors/device_ipc/ipc_programs.h"

#include "engine/executors/device_ipc/compressed_program.h"
#include "kernels/device_kernels.h"
#include "support/device/device.h"

namespace kolo {
namespace {

// The compressed program's ops: the codec kernels on the call's stream, over the slots of
// the ranks' regions.
class CompressedKernelOps : public IpcKernelOps {
 public:
  CompressedKernelOps(const IpcRun& run, const CollCall& call)
      : IpcKernelOps(run, call), dev_(device::runtime()), fmt_(wire_format(call.spec.wire)) {}
  size_t half_bytes() const { return kIpcChunkBytes; }
  size_t chunk_values() const { return kIpcChunkBytes / sizeof(float); }
  size_t wire_bytes(size_t count) const { return kolo::wire_bytes(fmt_, count); }
  Status compress(void* dst, const float* src, size_t count, ScaleUse use) {
    return device_compress(dev_, dst, src, count, fmt_, scale_for(use, call_), call_.stream);
  }
  Status decompress_sum(float* dst, const void* const* srcs, int n, size_t count, ScaleUse use) {
    return device_decompress_sum(dev_, dst, srcs, n, count, fmt_, scale_for(use, call_), call_.stream);
  }
  Status recompress_sum(void* dst, const void* const* srcs, int n, size_t count, ScaleUse use) {
    return device_recompress_sum(dev_, dst, srcs, n, count, fmt_, scale_for(use, call_), call_.stream);
  }

 private:
  const device::DeviceOps& dev_;
  const WireFormat fmt_;
};

}  // namespace

Status enqueue_compressed(const IpcRun& run, const CollCall& call, Algorithm algorithm, uint64_t& chunks) {
  CompressedKernelOps ops(run, call);
  return CompressedProgram<CompressedKernelOps>(ops, chunks).run(call, algorithm);
}

}  // namespace kolo
