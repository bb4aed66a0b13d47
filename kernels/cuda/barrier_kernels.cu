// CUDA wrapper of the one-host step barrier (kernels/barrier_body.h): one thread of one
// block runs the body, which the emulated device runs as it is.
#include <cuda_runtime.h>

#include "kernels/barrier_body.h"
#include "kernels/cuda_kernels.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
#error "the barrier's release/acquire loads, %globaltimer and __nanosleep need sm_70 or newer"
#endif

namespace kolo {
namespace {

__global__ void barrier_kernel(BarrierArgs a) { barrier_thread(a, static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x); }

}  // namespace

Status cuda_barrier_preload() {
  cudaFuncAttributes attributes;
  const cudaError_t err = cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(&barrier_kernel));
  if (err != cudaSuccess) return error(Code::kSystem, "loading the barrier kernel: ", cudaGetErrorString(err));
  return Status();
}

// The launch's own result (not cudaGetLastError, which would take other libraries' errors).
Status cuda_barrier_launch(const void* args, unsigned grid, unsigned block, void* stream) {
  void* params[] = {const_cast<void*>(args)};
  const cudaError_t err = cudaLaunchKernel(reinterpret_cast<const void*>(&barrier_kernel), dim3(grid), dim3(block), params,
                                           0, static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) return error(Code::kSystem, "barrier kernel launch: ", cudaGetErrorString(err));
  return Status();
}

}  // namespace kolo
