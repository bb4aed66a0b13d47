// CUDA element-wise reduction and scaling: the device twins of kernels/host_kernels.cc.
// The math is the functors and conversions of kernels/functors.h, compiled for the device;
// nothing numeric is defined here.
//
// One kernel per (dtype, op): nsrcs and the scale mode are run-time values that are the
// same for every thread (so branching on them never diverges a warp). Templating them as
// well would multiply compile time for sm_80 + sm_90 by ~20 for no bandwidth gain.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/vector_pack.cuh"
#include "kernels/cuda_kernels.h"
#include "kernels/functors.h"
#include "kernels/host_kernels.h"

namespace kolo {
namespace {

constexpr int kThreads = 256;
// Grid-stride loops cover any count; more blocks than this only adds scheduling work.
constexpr size_t kMaxBlocks = size_t{1} << 20;

// The sources travel by value in the kernel's parameter space: no allocation, no copy.
struct SrcPtrs {
  const void* ptr[kMaxReduceInputs];
};

// The scale applied to each result. Floating compute types always multiply (by 1 for the
// identity, which is exact); integers pick IntDivScaler or IntDoubleScaler at run time, as
// reduce_into does on the host.
template <class C, bool kIsInt = std::is_integral_v<C>>
struct LaunchScaler {
  MulScaler<C> mul_;
  __device__ __forceinline__ C operator()(C v) const { return mul_(v); }
};

template <class C>
struct LaunchScaler<C, true> {
  int mode_;  // 0 identity, 1 integer division, 2 through double
  IntDivScaler<C> div_;
  IntDoubleScaler<C> dbl_;
  __device__ __forceinline__ C operator()(C v) const {
    if (mode_ == 0) return v;
    return mode_ == 1 ? div_(v) : dbl_(v);
  }
};

template <class C>
LaunchScaler<C> make_launch_scaler(Scale scale) {
  if constexpr (std::is_integral_v<C>) {
    const int mode = scale.identity() ? 0 : (scale.factor == 1.0 ? 1 : 2);
    return LaunchScaler<C>{mode, IntDivScaler<C>(scale.divisor),
                           IntDoubleScaler<C>{scale.factor, static_cast<double>(scale.divisor)}};
  } else {
    return LaunchScaler<C>{
        MulScaler<C>{static_cast<C>(scale.factor / static_cast<double>(scale.divisor))}};
  }
}

// dst[i] = scale(op(srcs[0][i], ..., srcs[nsrcs-1][i])). With vec, every pointer is
// 16-byte aligned and each thread first handles whole 16-byte packs; the elements past the
// last whole pack (or all of them, without vec) go one per thread.
template <DType D, ReduceOp O>
__global__ void __launch_bounds__(kThreads)
    reduce_kernel(typename DTypeTraits<D>::Storage* dst, SrcPtrs srcs, int nsrcs,
                  size_t count, LaunchScaler<typename DTypeTraits<D>::Compute> scale,
                  bool vec) {
  using Tr = DTypeTraits<D>;
  using S = typename Tr::Storage;
  using C = typename Tr::Compute;
  using P = Pack<S>;
  const typename OpFn<O, C>::type op;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;

  size_t done = 0;
  if (vec) {
    const size_t npacks = count / P::kCount;
    for (size_t p = first; p < npacks; p += stride) {
      P in;
      in.bits = static_cast<const uint4*>(srcs.ptr[0])[p];
      C acc[P::kCount];
#pragma unroll
      for (int e = 0; e < P::kCount; ++e) acc[e] = Tr::load(in.elem[e]);
      // Unrolled with constant k so srcs.ptr[k] stays a parameter-space load, not a copy
      // of the array to local memory.
#pragma unroll
      for (int k = 1; k < kMaxReduceInputs; ++k) {
        if (k < nsrcs) {
          in.bits = static_cast<const uint4*>(srcs.ptr[k])[p];
#pragma unroll
          for (int e = 0; e < P::kCount; ++e) acc[e] = op(acc[e], Tr::load(in.elem[e]));
        }
      }
      P out;
#pragma unroll
      for (int e = 0; e < P::kCount; ++e) out.elem[e] = Tr::store(scale(acc[e]));
      reinterpret_cast<uint4*>(dst)[p] = out.bits;
    }
    done = npacks * P::kCount;
  }
  for (size_t i = done + first; i < count; i += stride) {
    C v = Tr::load(static_cast<const S*>(srcs.ptr[0])[i]);
#pragma unroll
    for (int k = 1; k < kMaxReduceInputs; ++k) {
      if (k < nsrcs) v = op(v, Tr::load(static_cast<const S*>(srcs.ptr[k])[i]));
    }
    dst[i] = Tr::store(scale(v));
  }
}

Status launch_error(const char* caller, cudaError_t err) {
  return error(Code::kSystem, caller, ": kernel launch failed: ", cudaGetErrorName(err), " (",
               cudaGetErrorString(err), ")");
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

using LaunchFn = Status (*)(const char*, void*, const void* const*, int, size_t, Scale,
                            cudaStream_t);

template <DType D, ReduceOp O>
Status launch(const char* caller, void* dst, const void* const* srcs, int nsrcs, size_t count,
              Scale scale, cudaStream_t stream) {
  using Tr = DTypeTraits<D>;
  using S = typename Tr::Storage;
  SrcPtrs ptrs{};
  bool vec = aligned16(dst);
  for (int k = 0; k < nsrcs; ++k) {
    ptrs.ptr[k] = srcs[k];
    vec = vec && aligned16(srcs[k]);
  }
  const size_t per_thread = vec ? static_cast<size_t>(Pack<S>::kCount) : 1;
  const size_t threads_needed = (count + per_thread - 1) / per_thread;
  size_t blocks = (threads_needed + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  reduce_kernel<D, O><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<S*>(dst), ptrs, nsrcs, count,
      make_launch_scaler<typename Tr::Compute>(scale), vec);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return launch_error(caller, err);
  return Status::ok_status();
}

template <DType D>
LaunchFn pick_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return &launch<D, ReduceOp::kSum>;
    case ReduceOp::kProd: return &launch<D, ReduceOp::kProd>;
    case ReduceOp::kMin: return &launch<D, ReduceOp::kMin>;
    default: return &launch<D, ReduceOp::kMax>;
  }
}

LaunchFn pick(DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kInt8: return pick_op<DType::kInt8>(op);
    case DType::kUint8: return pick_op<DType::kUint8>(op);
    case DType::kInt32: return pick_op<DType::kInt32>(op);
    case DType::kUint32: return pick_op<DType::kUint32>(op);
    case DType::kInt64: return pick_op<DType::kInt64>(op);
    case DType::kUint64: return pick_op<DType::kUint64>(op);
    case DType::kFloat16: return pick_op<DType::kFloat16>(op);
    case DType::kBFloat16: return pick_op<DType::kBFloat16>(op);
    case DType::kFloat32: return pick_op<DType::kFloat32>(op);
    case DType::kFloat64: return pick_op<DType::kFloat64>(op);
    case DType::kFloat8E4M3: return pick_op<DType::kFloat8E4M3>(op);
    default: return pick_op<DType::kFloat8E5M2>(op);
  }
}

// One input and no scale is a copy, bit for bit, as on the host.
Status copy_async(const char* caller, void* dst, const void* src, size_t count, DType dtype,
                  cudaStream_t stream) {
  if (dst == src) return Status::ok_status();
  const cudaError_t err =
      cudaMemcpyAsync(dst, src, count * dtype_size(dtype), cudaMemcpyDefault, stream);
  if (err != cudaSuccess) {
    return error(Code::kSystem, caller, ": cudaMemcpyAsync failed: ", cudaGetErrorName(err),
                 " (", cudaGetErrorString(err), ")");
  }
  return Status::ok_status();
}

}  // namespace

Status cuda_reduce_into(void* dst, const void* const* srcs, int nsrcs, size_t count,
                        DType dtype, ReduceOp op, Scale scale, void* stream) {
  constexpr const char* kCaller = "cuda_reduce_into";
  KOLO_TRY(check_reduce_args(kCaller, dst, srcs, nsrcs, count, dtype, op, scale));
  if (count == 0) return Status::ok_status();
  const auto s = static_cast<cudaStream_t>(stream);
  if (nsrcs == 1 && scale.identity()) return copy_async(kCaller, dst, srcs[0], count, dtype, s);
  return pick(dtype, op)(kCaller, dst, srcs, nsrcs, count, scale, s);
}

Status cuda_scale_copy(void* dst, const void* src, size_t count, DType dtype, Scale scale,
                       void* stream) {
  constexpr const char* kCaller = "cuda_scale_copy";
  const void* srcs[1] = {src};
  KOLO_TRY(check_reduce_args(kCaller, dst, srcs, 1, count, dtype, ReduceOp::kSum, scale));
  if (count == 0) return Status::ok_status();
  const auto s = static_cast<cudaStream_t>(stream);
  if (scale.identity()) return copy_async(kCaller, dst, src, count, dtype, s);
  return pick(dtype, ReduceOp::kSum)(kCaller, dst, srcs, 1, count, scale, s);
}

}  // namespace kolo
