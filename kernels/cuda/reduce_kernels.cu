// CUDA element-wise reduction and scaling: the thin __global__ wrapper around the
// per-thread body of kernels/reduce_body.h, which the emulated device runs as it is
// (kernels/device_kernels.cc plans the launch and checks the arguments). Nothing numeric
// and no index math beyond the thread's own index is defined here.
//
// One kernel per (dtype, op): nsrcs and the scale mode are run-time values that are the
// same for every thread (so branching on them never diverges a warp). Templating them as
// well would multiply compile time for sm_80 + sm_90 by ~20 for no bandwidth gain.
#include <cuda_runtime.h>

#include "kernels/cuda_kernels.h"
#include "kernels/cuda/preload.cuh"
#include "kernels/device_kernels.h"
#include "kernels/reduce_body.h"

namespace kolo {
namespace {

template <DType D, ReduceOp O>
__global__ void __launch_bounds__(kKernelThreads) reduce_kernel(ReduceArgs a) {
  // device_ipc: a barrier queued before this kernel gave up, so the peers' buffers may be
  // wrong or gone: touch nothing. One read of the (host) status word per block.
  if (a.skip_if != nullptr) {
    __shared__ uint32_t skip;
    if (threadIdx.x == 0) skip = *static_cast<const volatile uint32_t*>(a.skip_if);
    __syncthreads();
    if (skip != 0) return;
  }
  reduce_thread<D, O>(a, static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                      static_cast<size_t>(gridDim.x) * blockDim.x);
}

// The launch's own result, from cudaLaunchKernel's return value (what <<<>>> discards):
// cudaGetLastError would also consume, and misreport as ours, an error another library
// left pending on this thread.
template <DType D, ReduceOp O>
struct CudaLaunch {
  static cudaError_t run(const ReduceArgs& a, unsigned grid, unsigned block, cudaStream_t stream) {
    void* params[] = {const_cast<ReduceArgs*>(&a)};
    return cudaLaunchKernel(reinterpret_cast<const void*>(&reduce_kernel<D, O>), dim3(grid), dim3(block), params, 0, stream);
  }
};

template <DType D, ReduceOp O>
struct KernelOf {
  static const void* run() { return reinterpret_cast<const void*>(&reduce_kernel<D, O>); }
};

}  // namespace

Status cuda_reduce_preload() { return preload_every_dtype_and_op<KernelOf>("reduce"); }

Status cuda_reduce_launch(const void* args, unsigned grid, unsigned block, void* stream) {
  const ReduceArgs& a = *static_cast<const ReduceArgs*>(args);
  const cudaError_t err =
      dispatch_reduce<CudaLaunch>(a.dtype, a.op, a, grid, block, static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) {
    return error(Code::kSystem, "reduce kernel launch (", dtype_name(a.dtype), " ", op_name(a.op), ", grid ",
                 grid, " x ", block, ") failed: ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
  }
  return Status::ok_status();
}

}  // namespace kolo
