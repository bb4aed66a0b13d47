// The per-thread body of the reduce / scale-copy kernel, written once for both devices:
// cuda/reduce_kernels.cu wraps it in a __global__ function (thread = blockIdx.x *
// blockDim.x + threadIdx.x), device_kernels.cc runs it block by block on the emulated
// device's stream worker. Nothing here reads blockIdx or threadIdx, so the index math,
// the grid-stride loops, the 16-byte vector path, its prologue and its tail that run on
// an H100 are the ones the unit tests run in CI. The math is kernels/functors.h.
//
// Work split (planned on the host by plan_reduce in device_kernels.cc):
//   head    elements before dst's first 16-byte boundary, one per thread (< 16 of them);
//   packs   16-byte vectors from there on, one per thread per grid-stride step; only when
//           every source has dst's misalignment mod 16, otherwise npacks = 0;
//   tail    the elements after the last whole pack (all of them when npacks = 0).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/dtype.h"
#include "kernels/functors.h"
#include "kernels/host_kernels.h"

#if defined(__CUDACC__)
#define KOLO_UNROLL _Pragma("unroll")
#define KOLO_ROLLED _Pragma("unroll 1")  // a loop kept whole: one body, not one per trip (compile time)
#else
#define KOLO_UNROLL _Pragma("GCC unroll 16")
#define KOLO_ROLLED
#endif

namespace kolo {

// 16 bytes of elements: one vector load or store (uint4 on the device, memcpy on the
// host, which the compiler turns into one 16-byte move).
template <class S>
struct alignas(16) Pack16 {
  static constexpr int kCount = 16 / static_cast<int>(sizeof(S));
  S elem[kCount];
};

template <class S>
KOLO_HD_INLINE Pack16<S> load_pack(const void* p) {
#if defined(__CUDA_ARCH__)
  union {
    uint4 bits;
    Pack16<S> pack;
  } u;
  u.bits = *static_cast<const uint4*>(p);
  return u.pack;
#else
  Pack16<S> r;
  std::memcpy(r.elem, p, 16);
  return r;
#endif
}

template <class S>
KOLO_HD_INLINE void store_pack(void* p, const Pack16<S>& v) {
#if defined(__CUDA_ARCH__)
  union {
    uint4 bits;
    Pack16<S> pack;
  } u;
  u.pack = v;
  *static_cast<uint4*>(p) = u.bits;
#else
  std::memcpy(p, v.elem, 16);
#endif
}

// The Scale as the kernel reads it, precomputed on the host. mode picks the scaler that
// reduce_into uses on the host for the same call (kernels/host_kernels.cc).
struct ReduceScaleArgs {
  enum Mode : int { kIdentity = 0, kIntDiv = 1, kIntDouble = 2, kMul = 3 };
  int mode = kIdentity;
  float mf = 1.0f;   // factor / divisor for float compute
  double md = 1.0;   // factor / divisor for double compute
  double factor = 1.0;
  int64_t divisor = 1;
};

// Everything one launch needs, plain bytes: a __global__ parameter on CUDA, Launch::args
// on the emulated device. dtype and op pick the instantiation (one per pair).
struct ReduceArgs {
  void* dst = nullptr;
  const void* src[kMaxReduceInputs] = {};
  int nsrcs = 0;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  size_t count = 0;
  size_t head = 0;    // elements before the vector part (< 16)
  size_t npacks = 0;  // 16-byte packs after the head; 0: element by element throughout
  ReduceScaleArgs scale;
  // When nonzero here, a barrier queued before this kernel gave up (a peer's different
  // call, a dead peer), so the peers' buffers it names may be wrong or gone: the kernel
  // touches nothing. Read once per block by the wrappers (device_kernels.cc and
  // cuda/reduce_kernels.cu), not by the body.
  const uint32_t* skip_if = nullptr;
};

// The scaler reduce_into picks on the host for the same Scale, chosen by mode at run time
// (uniform across the grid, so the branch never diverges a warp): floats multiply by m
// (the identity leaves the bits alone, as the host's IdentityScaler does), integers divide
// exactly or go through double.
template <class C, bool kIsInt = std::is_integral_v<C>>
struct BodyScaler {
  bool identity_;
  MulScaler<C> mul_;
  KOLO_HD_INLINE explicit BodyScaler(const ReduceScaleArgs& s)
      : identity_(s.mode == ReduceScaleArgs::kIdentity), mul_{static_cast<C>(sizeof(C) == 4 ? s.mf : s.md)} {}
  KOLO_HD_INLINE C operator()(C v) const { return identity_ ? v : mul_(v); }
};

template <class C>
struct BodyScaler<C, true> {
  int mode_;
  IntDivScaler<C> div_;
  IntDoubleScaler<C> dbl_;
  KOLO_HD_INLINE explicit BodyScaler(const ReduceScaleArgs& s)
      : mode_(s.mode), div_(s.divisor), dbl_{s.factor, static_cast<double>(s.divisor)} {}
  KOLO_HD_INLINE C operator()(C v) const {
    if (mode_ == ReduceScaleArgs::kIdentity) return v;
    return mode_ == ReduceScaleArgs::kIntDiv ? div_(v) : dbl_(v);
  }
};

// One element: dst[i] = scale(op(src[0][i], ..., src[nsrcs-1][i])).
template <DType D, ReduceOp O>
KOLO_HD_INLINE void reduce_element(const ReduceArgs& a, const BodyScaler<typename DTypeTraits<D>::Compute>& sc,
                                   size_t i) {
  using Tr = DTypeTraits<D>;
  using S = typename Tr::Storage;
  const typename OpFn<O, typename Tr::Compute>::type op;
  typename Tr::Compute v = Tr::load(static_cast<const S*>(a.src[0])[i]);
  // Unrolled with constant k so that on the device a.src[k] stays a parameter-space load.
  KOLO_UNROLL
  for (int k = 1; k < kMaxReduceInputs; ++k) {
    if (k < a.nsrcs) v = op(v, Tr::load(static_cast<const S*>(a.src[k])[i]));
  }
  static_cast<S*>(a.dst)[i] = Tr::store(sc(v));
}

// One 16-byte pack starting at element e0 (16-byte aligned in dst and every source).
template <DType D, ReduceOp O>
KOLO_HD_INLINE void reduce_pack(const ReduceArgs& a, const BodyScaler<typename DTypeTraits<D>::Compute>& sc,
                                size_t e0) {
  using Tr = DTypeTraits<D>;
  using S = typename Tr::Storage;
  using C = typename Tr::Compute;
  using P = Pack16<S>;
  const typename OpFn<O, C>::type op;
  P in = load_pack<S>(static_cast<const S*>(a.src[0]) + e0);
  C acc[P::kCount];
  KOLO_UNROLL
  for (int e = 0; e < P::kCount; ++e) acc[e] = Tr::load(in.elem[e]);
  KOLO_UNROLL
  for (int k = 1; k < kMaxReduceInputs; ++k) {
    if (k < a.nsrcs) {
      in = load_pack<S>(static_cast<const S*>(a.src[k]) + e0);
      KOLO_UNROLL
      for (int e = 0; e < P::kCount; ++e) acc[e] = op(acc[e], Tr::load(in.elem[e]));
    }
  }
  P out;
  KOLO_UNROLL
  for (int e = 0; e < P::kCount; ++e) out.elem[e] = Tr::store(sc(acc[e]));
  store_pack<S>(static_cast<S*>(a.dst) + e0, out);
}

// Thread `thread` of `nthreads` (the whole grid): head, packs and tail, each with a
// grid-stride loop, so any grid from one block up covers the whole buffer.
template <DType D, ReduceOp O>
KOLO_HD_INLINE void reduce_thread(const ReduceArgs& a, size_t thread, size_t nthreads) {
  using C = typename DTypeTraits<D>::Compute;
  constexpr size_t kPack = static_cast<size_t>(Pack16<typename DTypeTraits<D>::Storage>::kCount);
  const BodyScaler<C> sc(a.scale);
  for (size_t i = thread; i < a.head; i += nthreads) reduce_element<D, O>(a, sc, i);
  for (size_t p = thread; p < a.npacks; p += nthreads) reduce_pack<D, O>(a, sc, a.head + p * kPack);
  for (size_t i = a.head + a.npacks * kPack + thread; i < a.count; i += nthreads) {
    reduce_element<D, O>(a, sc, i);
  }
}

// Calls K<D, O>::run(args...) for the run-time dtype and op (C++17: the .cu includes it).
// Host code only.
template <template <DType, ReduceOp> class K, DType D, class... A>
auto dispatch_reduce_op(ReduceOp op, A&&... args) {
  switch (op) {
    case ReduceOp::kSum: return K<D, ReduceOp::kSum>::run(args...);
    case ReduceOp::kProd: return K<D, ReduceOp::kProd>::run(args...);
    case ReduceOp::kMin: return K<D, ReduceOp::kMin>::run(args...);
    default: return K<D, ReduceOp::kMax>::run(args...);
  }
}

template <template <DType, ReduceOp> class K, class... A>
auto dispatch_reduce(DType dtype, ReduceOp op, A&&... args) {
  switch (dtype) {
    case DType::kInt8: return dispatch_reduce_op<K, DType::kInt8>(op, args...);
    case DType::kUint8: return dispatch_reduce_op<K, DType::kUint8>(op, args...);
    case DType::kInt32: return dispatch_reduce_op<K, DType::kInt32>(op, args...);
    case DType::kUint32: return dispatch_reduce_op<K, DType::kUint32>(op, args...);
    case DType::kInt64: return dispatch_reduce_op<K, DType::kInt64>(op, args...);
    case DType::kUint64: return dispatch_reduce_op<K, DType::kUint64>(op, args...);
    case DType::kFloat16: return dispatch_reduce_op<K, DType::kFloat16>(op, args...);
    case DType::kBFloat16: return dispatch_reduce_op<K, DType::kBFloat16>(op, args...);
    case DType::kFloat32: return dispatch_reduce_op<K, DType::kFloat32>(op, args...);
    case DType::kFloat64: return dispatch_reduce_op<K, DType::kFloat64>(op, args...);
    case DType::kFloat8E4M3: return dispatch_reduce_op<K, DType::kFloat8E4M3>(op, args...);
    default: return dispatch_reduce_op<K, DType::kFloat8E5M2>(op, args...);
  }
}

}  // namespace kolo
