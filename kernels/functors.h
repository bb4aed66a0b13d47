// The element-wise math of kolo, written once: reduction functors, the dtype traits that
// say how each dtype is stored and computed, and the scalers that apply a Scale. Host
// kernels (host_kernels.cc) and CUDA kernels (cuda/reduce_kernels.cu) instantiate these
// same templates, so both produce bit-identical results.
//
// Numeric rules:
//   - Integers compute in their own type. Sum and prod wrap modulo 2^bits; the arithmetic
//     is done in the unsigned type of the same width so that signed overflow is never UB.
//   - float16, bfloat16, fp8 load as float, combine in float, and round once on store.
//     float32 computes in float, float64 in double.
//   - min/max propagate NaN: if either operand is NaN the result is NaN. With -0 and +0
//     either zero may be returned (they compare equal).
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/dtype.h"
#include "kernels/float_types.h"

namespace kolo {

// a != a is true exactly for NaN; integers never take that branch, and the compiler
// folds it away for them.
template <class T>
KOLO_HD_INLINE bool is_nan_value(T a) {
  if constexpr (std::is_floating_point_v<T>) {
    return a != a;
  } else {
    return false;
  }
}

template <class T>
struct SumFn {
  KOLO_HD_INLINE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else {
      return a + b;
    }
  }
};

template <class T>
struct ProdFn {
  KOLO_HD_INLINE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      // uint8_t * uint8_t promotes to int, which cannot overflow for 8 bits; 32/64-bit
      // operands stay unsigned, where overflow wraps by definition.
      using U = std::make_unsigned_t<T>;
      using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
      return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) *
                                            static_cast<W>(static_cast<U>(b))));
    } else {
      return a * b;
    }
  }
};

template <class T>
struct MinFn {
  // Written as one compare-and-select so that it vectorises; the a != a term returns a
  // when a is NaN, and b is returned (NaN or not) whenever a < b is false.
  KOLO_HD_INLINE T operator()(T a, T b) const { return (a < b || is_nan_value(a)) ? a : b; }
};

template <class T>
struct MaxFn {
  KOLO_HD_INLINE T operator()(T a, T b) const { return (a > b || is_nan_value(a)) ? a : b; }
};

// How a dtype is stored in memory (Storage) and what its arithmetic is done in (Compute).
// load/store convert between them; store rounds once (nearest even) for narrow floats.
template <DType D>
struct DTypeTraits;

template <class S, class C = S>
struct IdentityTraits {
  using Storage = S;
  using Compute = C;
  KOLO_HD_INLINE static Compute load(Storage v) { return v; }
  KOLO_HD_INLINE static Storage store(Compute v) { return v; }
};

template <> struct DTypeTraits<DType::kInt8> : IdentityTraits<int8_t> {};
template <> struct DTypeTraits<DType::kUint8> : IdentityTraits<uint8_t> {};
template <> struct DTypeTraits<DType::kInt32> : IdentityTraits<int32_t> {};
template <> struct DTypeTraits<DType::kUint32> : IdentityTraits<uint32_t> {};
template <> struct DTypeTraits<DType::kInt64> : IdentityTraits<int64_t> {};
template <> struct DTypeTraits<DType::kUint64> : IdentityTraits<uint64_t> {};
template <> struct DTypeTraits<DType::kFloat32> : IdentityTraits<float> {};
template <> struct DTypeTraits<DType::kFloat64> : IdentityTraits<double> {};

template <> struct DTypeTraits<DType::kFloat16> {
  using Storage = uint16_t;
  using Compute = float;
  KOLO_HD_INLINE static Compute load(Storage v) { return half_to_float(v); }
  KOLO_HD_INLINE static Storage store(Compute v) { return float_to_half(v); }
};
template <> struct DTypeTraits<DType::kBFloat16> {
  using Storage = uint16_t;
  using Compute = float;
  KOLO_HD_INLINE static Compute load(Storage v) { return bf16_to_float(v); }
  KOLO_HD_INLINE static Storage store(Compute v) { return float_to_bf16(v); }
};
template <> struct DTypeTraits<DType::kFloat8E4M3> {
  using Storage = uint8_t;
  using Compute = float;
  KOLO_HD_INLINE static Compute load(Storage v) { return fp8_e4m3_to_float(v); }
  KOLO_HD_INLINE static Storage store(Compute v) { return float_to_fp8_e4m3(v); }
};
template <> struct DTypeTraits<DType::kFloat8E5M2> {
  using Storage = uint8_t;
  using Compute = float;
  KOLO_HD_INLINE static Compute load(Storage v) { return fp8_e5m2_to_float(v); }
  KOLO_HD_INLINE static Storage store(Compute v) { return float_to_fp8_e5m2(v); }
};

template <ReduceOp Op, class T>
struct OpFn;
template <class T> struct OpFn<ReduceOp::kSum, T> { using type = SumFn<T>; };
template <class T> struct OpFn<ReduceOp::kProd, T> { using type = ProdFn<T>; };
template <class T> struct OpFn<ReduceOp::kMin, T> { using type = MinFn<T>; };
template <class T> struct OpFn<ReduceOp::kMax, T> { using type = MaxFn<T>; };

// Scalers: what value * factor / divisor means for each kind of compute type.

struct IdentityScaler {
  template <class C>
  KOLO_HD_INLINE C operator()(C v) const { return v; }
};

// Floating compute types: one multiplier m = factor / divisor, held in the compute type
// (float for float32 and the narrow floats, double for float64), then one multiply.
template <class C>
struct MulScaler {
  C m_;
  KOLO_HD_INLINE C operator()(C v) const { return v * m_; }
};

// Integers with factor == 1: exact integer division, truncating toward zero (integer
// AVG). The quotient's magnitude never exceeds the value's, so it fits back in T.
// divisor >= 1 (checked by the caller). 8-bit types divide in float and 32-bit types in
// double, which vectorises where integer division does not, and is exact: with p bits of
// precision and |v| < 2^p, a non-integer quotient is at least 1/divisor away from the
// next integer, further than the rounding error |v|/divisor * 2^-p, so truncating the
// rounded quotient gives the integer quotient. A divisor too large to be exact in
// float/double exceeds every |v|, and both sides give 0.
template <class T>
struct IntDivScaler {
  using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
  Wide divisor_;
  float divisor_f_;
  double divisor_d_;
  KOLO_HD explicit IntDivScaler(int64_t divisor)
      : divisor_(static_cast<Wide>(divisor)),
        divisor_f_(static_cast<float>(divisor)),
        divisor_d_(static_cast<double>(divisor)) {}
  KOLO_HD_INLINE T operator()(T v) const {
    if constexpr (sizeof(T) == 1) {
      return static_cast<T>(static_cast<float>(v) / divisor_f_);
    } else if constexpr (sizeof(T) == 4) {
      return static_cast<T>(static_cast<double>(v) / divisor_d_);
    } else {
      return static_cast<T>(static_cast<Wide>(v) / divisor_);
    }
  }
};

// Range of an integer type, spelled out because std::numeric_limits is host-only in
// device code without --expt-relaxed-constexpr.
template <class T>
KOLO_HD constexpr T int_max() {
  using U = std::make_unsigned_t<T>;
  return std::is_signed_v<T> ? static_cast<T>(static_cast<U>(~U(0)) >> 1) : static_cast<T>(~U(0));
}
template <class T>
KOLO_HD constexpr T int_min() {
  return std::is_signed_v<T> ? static_cast<T>(-int_max<T>() - 1) : T(0);
}

// Double to integer, truncating toward zero and saturating at the type's range (NaN
// gives 0), because an out-of-range float-to-int conversion is undefined in C++.
template <class T>
KOLO_HD_INLINE T saturate_cast_from_double(double d) {
  // int_max + 1 is a power of two, so kHi is exact even where int_max is not a double.
  constexpr double kHi = static_cast<double>(int_max<T>() / 2 + 1) * 2.0;
  constexpr double kLo = static_cast<double>(int_min<T>());
  if (!(d == d)) return 0;
  if (d >= kHi) return int_max<T>();
  if (d <= kLo) return int_min<T>();
  return static_cast<T>(d);
}

// Integers with factor != 1: value * factor / divisor in double (in that order), then
// truncated toward zero and saturated. 64-bit values above 2^53 lose low bits here.
template <class T>
struct IntDoubleScaler {
  double factor_;
  double divisor_;
  KOLO_HD_INLINE T operator()(T v) const {
    return saturate_cast_from_double<T>(static_cast<double>(v) * factor_ / divisor_);
  }
};

}  // namespace kolo
