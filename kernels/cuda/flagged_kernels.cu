// CUDA wrapper of the one-kernel collectives (kernels/flagged_body.h), which the emulated
// device runs as it is. The wrapper adds what needs a block: the call's number, read once
// per block from the rank's counter, and the counter advanced by the last block to finish
// (every block has read it by then; the next launch on the stream starts after this one).
#include <cuda_runtime.h>

#include "kernels/cuda_kernels.h"
#include "kernels/cuda/preload.cuh"
#include "kernels/device_kernels.h"
#include "kernels/flagged_body.h"

namespace kolo {
namespace {

template <DType D, ReduceOp O>
__global__ void __launch_bounds__(kKernelThreads) flagged_kernel(FlaggedArgs a) {
  __shared__ uint32_t seq, skip;
  if (threadIdx.x == 0) {
    seq = *static_cast<volatile uint32_t*>(a.sequence) + 1;
    skip = *a.failed;  // a wait before this call gave up: the peers may be gone
  }
  __syncthreads();
  const size_t thread = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t nthreads = static_cast<size_t>(gridDim.x) * blockDim.x;
  if (skip == 0) {
    flagged_write<D, O>(a, seq, thread, nthreads);
    flagged_read<D, O>(a, seq, thread, nthreads);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(a.done, 1u) == gridDim.x - 1) {
      *static_cast<volatile uint32_t*>(a.done) = 0;
      *static_cast<volatile uint32_t*>(a.sequence) = seq;
    }
  }
}

template <DType D, ReduceOp O>
struct KernelOf {
  static const void* run() { return reinterpret_cast<const void*>(&flagged_kernel<D, O>); }
};

}  // namespace

Status cuda_flagged_preload() { return preload_every_dtype_and_op<KernelOf>("flagged"); }

// The launch's own result (not cudaGetLastError, which would take other libraries' errors).
Status cuda_flagged_launch(const void* args, unsigned grid, unsigned block, void* stream) {
  const FlaggedArgs& a = *static_cast<const FlaggedArgs*>(args);
  void* params[] = {const_cast<FlaggedArgs*>(&a)};
  const cudaError_t err = cudaLaunchKernel(dispatch_reduce<KernelOf>(a.dtype, a.op), dim3(grid), dim3(block), params, 0,
                                           static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) {
    return error(Code::kSystem, "flagged kernel launch (", dtype_name(a.dtype), " ", op_name(a.op), ", grid ",
                 grid, " x ", block, ") failed: ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  }
  return Status::ok_status();
}

}  // namespace kolo
