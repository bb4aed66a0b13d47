// A few elements reduced inline, for the one-host fast boxes' small calls (issue 52): the
// same functors as reduce_into (kernels/functors.h), folded in the same order (input 0, then
// 1, 2, ...), so the same bits on every rank and on every path; only the argument checks and
// the dispatch through dtype, op and input count are left out, which cost an 8-byte
// allreduce more than the adding (about 60 ns of 370). Types computed as they are stored
// (the integers, float32, float64) and no scale; anything else returns false, for reduce_into.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "kernels/dtype.h"
#include "kernels/functors.h"

namespace kolo {

// Up to 1 KB an input: reduce_into's loops vectorise whole blocks of 256 elements (with
// AVX2 where the CPU has it) and run shorter counts one element at a time, behind its
// dispatch. Two inputs of floats, on the development VM (AMD EPYC): 128 B 2.9 ns here
// against 26 there, 512 B 10 against 52, 1 KB 23 against 27; a two-rank allreduce of 512 B
// 396 -> 249 ns, of 1 KB the same, of 2 KB 511 -> 546 (issue 52).
constexpr size_t kReduceSmallMaxBytes = 1024;

namespace detail {

// Element j of a buffer that need not be aligned (the user's): a fixed-size memcpy, which
// compiles to one load or store, where a variable-size one is a call into libc.
template <class T>
inline T load_at(const void* p, size_t j) {
  T v;
  std::memcpy(&v, static_cast<const char*>(p) + j * sizeof(T), sizeof(T));
  return v;
}

// The scalar functors' operations on sixteen bytes of elements at once (GCC's vector
// extensions: SSE2 on every x86-64, NEON on Arm), element by element the same operations,
// so the same bits: integer sums and products in unsigned lanes (they wrap, as the functors
// do), min and max as the functors' one compare-and-select with its NaN term.
template <class T, bool = std::is_integral_v<T>>
struct WrappingLane {
  using type = T;
};
template <class T>
struct WrappingLane<T, true> {
  using type = std::make_unsigned_t<T>;
};

template <class T, class Op>
struct VectorOp {
  static constexpr bool kHas = false;
};
template <class T>
struct VectorOp<T, SumFn<T>> {
  static constexpr bool kHas = true;
  using Lane = typename WrappingLane<T>::type;
  template <class V>
  static V apply(V a, V b) { return a + b; }
};
template <class T>
struct VectorOp<T, ProdFn<T>> {
  static constexpr bool kHas = true;
  using Lane = typename WrappingLane<T>::type;
  template <class V>
  static V apply(V a, V b) { return a * b; }
};
template <class T>
struct VectorOp<T, MinFn<T>> {
  static constexpr bool kHas = true;
  using Lane = T;
  template <class V>
  static V apply(V a, V b) { return ((a < b) | (a != a)) ? a : b; }
};
template <class T>
struct VectorOp<T, MaxFn<T>> {
  static constexpr bool kHas = true;
  using Lane = T;
  template <class V>
  static V apply(V a, V b) { return ((a > b) | (a != a)) ? a : b; }
};

// Elements [0, count - count % per vector) sixteen bytes at a time, folded from input 0 up;
// returns where the scalar tail starts. A 32-float two-input sum: 4.2 ns, against 15 one
// element at a time (development VM, AMD EPYC; issue 52).
template <class T, class Op>
inline size_t reduce_small_vectors(char* out, const void* const* srcs, int nsrcs, size_t count) {
  if constexpr (!VectorOp<T, Op>::kHas) {
    return 0;
  } else {
    using Lane = typename VectorOp<T, Op>::Lane;
    typedef Lane V __attribute__((vector_size(16)));
    constexpr size_t per = sizeof(V) / sizeof(T);
    const size_t end = count - count % per;
    for (size_t j = 0; j < end; j += per) {
      V acc;
      std::memcpy(&acc, static_cast<const char*>(srcs[0]) + j * sizeof(T), sizeof(V));
      for (int k = 1; k < nsrcs; ++k) {
        V v;
        std::memcpy(&v, static_cast<const char*>(srcs[k]) + j * sizeof(T), sizeof(V));
        acc = VectorOp<T, Op>::apply(acc, v);
      }
      std::memcpy(out + j * sizeof(T), &acc, sizeof(V));
    }
    return end;
  }
}

template <class T, class Op>
inline void reduce_small_typed(void* dst, const void* const* srcs, int nsrcs, size_t count) {
  const Op op;
  char* out = static_cast<char*>(dst);
  // Sixteen bytes at a time, then one element at a time, folded from input 0 up, each read
  // from every input before it is written (dst may be an input). Blocks through fixed-size
  // arrays were slower on the development VM (AMD EPYC): a 32-byte two-rank allreduce took
  // 12 ns more than with the variable-size memcpy before them (issue 52).
  const size_t first = reduce_small_vectors<T, Op>(out, srcs, nsrcs, count);
  if (nsrcs == 2) {  // the common small call (two ranks): no loop over the inputs
    for (size_t j = first; j < count; ++j) {
      const T acc = op(load_at<T>(srcs[0], j), load_at<T>(srcs[1], j));
      std::memcpy(out + j * sizeof(T), &acc, sizeof(T));
    }
    return;
  }
  for (size_t j = first; j < count; ++j) {
    T acc = load_at<T>(srcs[0], j);
    for (int k = 1; k < nsrcs; ++k) acc = op(acc, load_at<T>(srcs[k], j));
    std::memcpy(out + j * sizeof(T), &acc, sizeof(T));
  }
}

template <class T>
inline bool reduce_small_op(void* dst, const void* const* srcs, int nsrcs, size_t count, ReduceOp op) {
  if (count * sizeof(T) > kReduceSmallMaxBytes) return false;
  switch (op) {
    case ReduceOp::kSum: reduce_small_typed<T, SumFn<T>>(dst, srcs, nsrcs, count); return true;
    case ReduceOp::kProd: reduce_small_typed<T, ProdFn<T>>(dst, srcs, nsrcs, count); return true;
    case ReduceOp::kMin: reduce_small_typed<T, MinFn<T>>(dst, srcs, nsrcs, count); return true;
    case ReduceOp::kMax: reduce_small_typed<T, MaxFn<T>>(dst, srcs, nsrcs, count); return true;
    default: return false;
  }
}

}  // namespace detail

// dst = op over srcs[0..nsrcs) (nsrcs >= 1, count elements each) where the call qualifies;
// false (dst untouched) where it does not.
inline bool reduce_small(void* dst, const void* const* srcs, int nsrcs, size_t count, DType dtype, ReduceOp op) {
  if (count == 0 || nsrcs < 1) return false;
  switch (dtype) {
    case DType::kFloat32: return detail::reduce_small_op<float>(dst, srcs, nsrcs, count, op);
    case DType::kFloat64: return detail::reduce_small_op<double>(dst, srcs, nsrcs, count, op);
    case DType::kInt32: return detail::reduce_small_op<int32_t>(dst, srcs, nsrcs, count, op);
    case DType::kUint32: return detail::reduce_small_op<uint32_t>(dst, srcs, nsrcs, count, op);
    case DType::kInt64: return detail::reduce_small_op<int64_t>(dst, srcs, nsrcs, count, op);
    case DType::kUint64: return detail::reduce_small_op<uint64_t>(dst, srcs, nsrcs, count, op);
    default: return false;
  }
}

}  // namespace kolo
