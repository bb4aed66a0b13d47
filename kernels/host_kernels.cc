// Host twins of the CUDA reduction kernels. The dtype, op and (when unscaled) the number
// of inputs are template parameters, picked once per call, so the loop over elements is a
// straight line of loads, functor calls and one store that the compiler vectorises.
#include "kernels/host_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/functors.h"
#include "kernels/target_clones.h"

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#endif

namespace kolo {
namespace {

// Elements per block. The main loop only ever sees full blocks, a compile-time trip count:
// GCC's -O2 vectoriser ("very cheap" cost model) refuses loops that would need a scalar
// epilogue, so a runtime count would stay scalar. The short tail runs scalar instead.
constexpr size_t kBlock = 256;

// The loops are built for SSE2 and AVX2 (KOLO_CLONES, kernels/target_clones.h).

// The fused loop for exactly 1 + sizeof...(K) inputs. The inputs are combined by a fold
// over the index pack rather than an inner loop, so the vectoriser sees one flat loop body
// (at -O2 an inner loop is not unrolled before vectorisation). ivdep: dst may be srcs[0],
// but element j only reads element j, so iterations never depend on each other.
template <class Tr, class Op, class Sc, size_t... K>
__attribute__((always_inline)) inline void fused_block(typename Tr::Storage* dst,
                                                       const typename Tr::Storage* s0,
                                                       const typename Tr::Storage* const* rest,
                                                       size_t n, const Sc& sc,
                                                       std::index_sequence<K...>) {
  using C = typename Tr::Compute;
  [[maybe_unused]] const Op op;
  [[maybe_unused]] const typename Tr::Storage* const p[sizeof...(K) + 1] = {rest[K]..., nullptr};
#pragma GCC ivdep
  for (size_t j = 0; j < n; ++j) {
    C v = Tr::load(s0[j]);
    ((v = op(v, Tr::load(p[K][j]))), ...);
    dst[j] = Tr::store(sc(v));
  }
}

// One block of n elements starting at element off. N > 0: exactly N inputs, fused in one
// pass. N == 0: nsrcs inputs at run time, accumulated in a block-sized buffer of the
// compute type (used for scaled reductions, where the extra cache traffic matters less
// than keeping the instantiation count down, and for narrow floats); the result is still
// rounded once.
template <class Tr, class Op, class Sc, int N>
__attribute__((always_inline)) inline void reduce_block(typename Tr::Storage* dst,
                                                        const typename Tr::Storage* const* src,
                                                        int nsrcs, size_t off, size_t n,
                                                        const Sc& sc) {
  using C = typename Tr::Compute;
  if constexpr (N > 0) {
    const typename Tr::Storage* rest[N];
    for (int k = 1; k < N; ++k) rest[k - 1] = src[k] + off;
    fused_block<Tr, Op, Sc>(dst + off, src[0] + off, rest, n, sc,
                            std::make_index_sequence<N - 1>());
  } else {
    const Op op;
    C acc[kBlock];
    for (size_t j = 0; j < n; ++j) acc[j] = Tr::load(src[0][off + j]);
    for (int k = 1; k < nsrcs; ++k) {
      const typename Tr::Storage* s = src[k] + off;
      for (size_t j = 0; j < n; ++j) acc[j] = op(acc[j], Tr::load(s[j]));
    }
#pragma GCC ivdep
    for (size_t j = 0; j < n; ++j) dst[off + j] = Tr::store(sc(acc[j]));
  }
}

template <class Tr, class Op, class Sc, int N>
KOLO_CLONES void reduce_loop(void* dst_v, const void* const* srcs_v, int nsrcs,
                             size_t count, const Sc& sc) {
  using S = typename Tr::Storage;
  S* dst = static_cast<S*>(dst_v);
  const S* src[kMaxReduceInputs];
  for (int k = 0; k < nsrcs; ++k) src[k] = static_cast<const S*>(srcs_v[k]);
  size_t off = 0;
  for (; count - off >= kBlock; off += kBlock) {
    reduce_block<Tr, Op, Sc, N>(dst, src, nsrcs, off, kBlock, sc);
  }
  if (off < count) reduce_block<Tr, Op, Sc, N>(dst, src, nsrcs, off, count - off, sc);
}

template <DType D, ReduceOp O>
void reduce_typed(void* dst, const void* const* srcs, int nsrcs, size_t count, Scale scale) {
  using Tr = DTypeTraits<D>;
  using C = typename Tr::Compute;
  using Fn = typename OpFn<O, C>::type;
  if (scale.identity()) {
    const IdentityScaler id;
    // Narrow floats are bound by the conversions, not by memory; the fused loop holds
    // nsrcs conversions in flight and spills, while the block-buffer loop converts one
    // input at a time and measured faster (fp16 sum of 2, SSE2: 58 vs 67 ms per 64 MB).
    if constexpr (!std::is_same_v<typename Tr::Storage, C>) {
      return reduce_loop<Tr, Fn, IdentityScaler, 0>(dst, srcs, nsrcs, count, id);
    } else {
      switch (nsrcs) {
        case 1: return reduce_loop<Tr, Fn, IdentityScaler, 1>(dst, srcs, nsrcs, count, id);
        case 2: return reduce_loop<Tr, Fn, IdentityScaler, 2>(dst, srcs, nsrcs, count, id);
        case 3: return reduce_loop<Tr, Fn, IdentityScaler, 3>(dst, srcs, nsrcs, count, id);
        case 4: return reduce_loop<Tr, Fn, IdentityScaler, 4>(dst, srcs, nsrcs, count, id);
        case 5: return reduce_loop<Tr, Fn, IdentityScaler, 5>(dst, srcs, nsrcs, count, id);
        case 6: return reduce_loop<Tr, Fn, IdentityScaler, 6>(dst, srcs, nsrcs, count, id);
        case 7: return reduce_loop<Tr, Fn, IdentityScaler, 7>(dst, srcs, nsrcs, count, id);
        default: return reduce_loop<Tr, Fn, IdentityScaler, 8>(dst, srcs, nsrcs, count, id);
      }
    }
  }
  if constexpr (std::is_integral_v<C>) {
    if (scale.factor == 1.0) {
      const IntDivScaler<C> sc(scale.divisor);
      return reduce_loop<Tr, Fn, IntDivScaler<C>, 0>(dst, srcs, nsrcs, count, sc);
    }
    const IntDoubleScaler<C> sc{scale.factor, static_cast<double>(scale.divisor)};
    return reduce_loop<Tr, Fn, IntDoubleScaler<C>, 0>(dst, srcs, nsrcs, count, sc);
  } else {
    const MulScaler<C> sc{static_cast<C>(scale.factor / static_cast<double>(scale.divisor))};
    return reduce_loop<Tr, Fn, MulScaler<C>, 0>(dst, srcs, nsrcs, count, sc);
  }
}

template <DType D>
void reduce_op(void* dst, const void* const* srcs, int nsrcs, size_t count, ReduceOp op,
               Scale scale) {
  switch (op) {
    case ReduceOp::kSum: return reduce_typed<D, ReduceOp::kSum>(dst, srcs, nsrcs, count, scale);
    case ReduceOp::kProd: return reduce_typed<D, ReduceOp::kProd>(dst, srcs, nsrcs, count, scale);
    case ReduceOp::kMin: return reduce_typed<D, ReduceOp::kMin>(dst, srcs, nsrcs, count, scale);
    default: return reduce_typed<D, ReduceOp::kMax>(dst, srcs, nsrcs, count, scale);
  }
}

void reduce_dispatch(void* dst, const void* const* srcs, int nsrcs, size_t count, DType dtype,
                     ReduceOp op, Scale scale) {
  switch (dtype) {
    case DType::kInt8: return reduce_op<DType::kInt8>(dst, srcs, nsrcs, count, op, scale);
    case DType::kUint8: return reduce_op<DType::kUint8>(dst, srcs, nsrcs, count, op, scale);
    case DType::kInt32: return reduce_op<DType::kInt32>(dst, srcs, nsrcs, count, op, scale);
    case DType::kUint32: return reduce_op<DType::kUint32>(dst, srcs, nsrcs, count, op, scale);
    case DType::kInt64: return reduce_op<DType::kInt64>(dst, srcs, nsrcs, count, op, scale);
    case DType::kUint64: return reduce_op<DType::kUint64>(dst, srcs, nsrcs, count, op, scale);
    case DType::kFloat16: return reduce_op<DType::kFloat16>(dst, srcs, nsrcs, count, op, scale);
    case DType::kBFloat16:
      return reduce_op<DType::kBFloat16>(dst, srcs, nsrcs, count, op, scale);
    case DType::kFloat32: return reduce_op<DType::kFloat32>(dst, srcs, nsrcs, count, op, scale);
    case DType::kFloat64: return reduce_op<DType::kFloat64>(dst, srcs, nsrcs, count, op, scale);
    case DType::kFloat8E4M3:
      return reduce_op<DType::kFloat8E4M3>(dst, srcs, nsrcs, count, op, scale);
    default: return reduce_op<DType::kFloat8E5M2>(dst, srcs, nsrcs, count, op, scale);
  }
}

// A bit-exact copy: no load/store round trip, which could quiet a signalling NaN.
void copy_bytes(void* dst, const void* src, size_t count, DType dtype) {
  if (dst != src) std::memmove(dst, src, count * dtype_size(dtype));
}

}  // namespace

void stream_copy(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  // Ordinary copies up to the first 16-byte boundary of dst and after the last whole 64 bytes.
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  const size_t body = bytes / 64 * 64;
  for (size_t i = 0; i < body; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  std::memcpy(d + body, s + body, bytes - body);
  _mm_sfence();
#else
  std::memcpy(dst, src, bytes);
#endif
}

Status check_scale(const char* caller, Scale scale) {
  if (!std::isfinite(scale.factor)) {
    return error(Code::kInvalidArgument, caller, ": scale factor ", scale.factor,
                 " is not finite");
  }
  if (scale.divisor < 1) {
    return error(Code::kInvalidArgument, caller, ": scale divisor ", scale.divisor,
                 " must be >= 1");
  }
  return Status::ok_status();
}

Status check_reduce_args(const char* caller, const void* dst, const void* const* srcs,
                         int nsrcs, size_t count, DType dtype, ReduceOp op, Scale scale) {
  const int dtype_value = static_cast<int>(dtype);
  if (dtype_value < 0 || dtype_value >= static_cast<int>(DType::kCount)) {
    return error(Code::kInvalidArgument, caller, ": dtype ", dtype_value, " is out of range 0..",
                 static_cast<int>(DType::kCount) - 1);
  }
  const int op_value = static_cast<int>(op);
  if (op_value < 0 || op_value >= static_cast<int>(ReduceOp::kCount)) {
    return error(Code::kInvalidArgument, caller, ": op ", op_value, " is out of range 0..",
                 static_cast<int>(ReduceOp::kCount) - 1);
  }
  if (op == ReduceOp::kAvg) {
    return error(Code::kInvalidArgument, caller,
                 ": op avg is not a kernel op; pass sum with Scale{1, nranks}");
  }
  if (op == ReduceOp::kAdasum) {
    return error(Code::kInvalidArgument, caller, ": op adasum is not element-wise (kernels/adasum_math.h)");
  }
  if (nsrcs < 1 || nsrcs > kMaxReduceInputs) {
    return error(Code::kInvalidArgument, caller, ": nsrcs ", nsrcs, " is outside 1..",
                 kMaxReduceInputs);
  }
  KOLO_TRY(check_scale(caller, scale));
  if (count == 0) return Status::ok_status();

  const size_t elem = dtype_size(dtype);
  const uintptr_t d = reinterpret_cast<uintptr_t>(dst);
  if (dst == nullptr) {
    return error(Code::kInvalidArgument, caller, ": dst is null with count ", count);
  }
  if ((d & (elem - 1)) != 0) {  // elem is 1, 2, 4 or 8: no division on every call
    return error(Code::kInvalidArgument, caller, ": dst ", dst, " is not aligned to the ",
                 elem, "-byte size of ", dtype_name(dtype));
  }
  if (srcs == nullptr) {
    return error(Code::kInvalidArgument, caller, ": srcs is null with count ", count);
  }
  size_t bytes = 0;
  if (__builtin_mul_overflow(count, elem, &bytes)) {
    return error(Code::kInvalidArgument, caller, ": count ", count, " of ", dtype_name(dtype),
                 " overflows the address space");
  }
  for (int k = 0; k < nsrcs; ++k) {
    const uintptr_t s = reinterpret_cast<uintptr_t>(srcs[k]);
    if (srcs[k] == nullptr) {
      return error(Code::kInvalidArgument, caller, ": srcs[", k, "] is null with count ",
                   count);
    }
    if ((s & (elem - 1)) != 0) {
      return error(Code::kInvalidArgument, caller, ": srcs[", k, "] ", srcs[k],
                   " is not aligned to the ", elem, "-byte size of ", dtype_name(dtype));
    }
    // Exact aliasing (in place) is fine element by element; a shifted overlap would read
    // elements already overwritten.
    if (s != d && s < d + bytes && d < s + bytes) {
      return error(Code::kInvalidArgument, caller, ": srcs[", k, "] ", srcs[k],
                   " partly overlaps dst ", dst, " (", bytes, " bytes)");
    }
  }
  return Status::ok_status();
}

Status reduce_into(void* dst, const void* const* srcs, int nsrcs, size_t count, DType dtype,
                   ReduceOp op, Scale scale) {
  KOLO_TRY(check_reduce_args("reduce_into", dst, srcs, nsrcs, count, dtype, op, scale));
  if (count == 0) return Status::ok_status();
  // One input and no scale: the result is the input, bit for bit, whatever the op.
  if (nsrcs == 1 && scale.identity()) {
    copy_bytes(dst, srcs[0], count, dtype);
    return Status::ok_status();
  }
  reduce_dispatch(dst, srcs, nsrcs, count, dtype, op, scale);
  return Status::ok_status();
}

Status scale_copy(void* dst, const void* src, size_t count, DType dtype, Scale scale) {
  const void* srcs[1] = {src};
  KOLO_TRY(check_reduce_args("scale_copy", dst, srcs, 1, count, dtype, ReduceOp::kSum, scale));
  if (count == 0) return Status::ok_status();
  if (scale.identity()) {
    copy_bytes(dst, src, count, dtype);
    return Status::ok_status();
  }
  reduce_dispatch(dst, srcs, 1, count, dtype, ReduceOp::kSum, scale);
  return Status::ok_status();
}

}  // namespace kolo
