// Loading every (dtype, op) instantiation of a kernel now, not at its first launch (CUDA's
// lazy loading may wait for the kernels running: cuda_kernels.h says why), for the .cu
// files whose kernels are one per (dtype, op).
#pragma once

#include <cuda_runtime.h>

#include "kernels/reduce_body.h"  // dispatch_reduce
#include "support/status.h"

namespace kolo {

// KernelOf<D, O>::run() gives the kernel's address; `what` names it in the error.
template <template <DType, ReduceOp> class KernelOf>
Status preload_every_dtype_and_op(const char* what) {
  for (int d = 0; d < static_cast<int>(DType::kCount); ++d) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
      const DType dtype = static_cast<DType>(d);
      cudaFuncAttributes attributes;
      const cudaError_t err = cudaFuncGetAttributes(&attributes, dispatch_reduce<KernelOf>(dtype, op));
      if (err != cudaSuccess) {
        return error(Code::kSystem, "loading the ", what, " kernel (", dtype_name(dtype), " ", op_name(op), "): ",
                     cudaGetErrorName(err), " (", cudaGetErrorString(err), ")");
      }
    }
  }
  return Status::ok_status();
}

}  // namespace kolo
