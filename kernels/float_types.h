// Narrow floating-point formats as bit patterns, and their exact conversions to and from
// float. The host kernels and the CUDA kernels compile these same functions, so a value
// reduced on the CPU and on the GPU rounds identically.
//
// Storage is a plain uint16_t / uint8_t holding the bit pattern (no wrapper structs), so
// buffers can be reinterpreted freely and device code needs no CUDA fp16 headers.
//
// Formats (s = sign, e = exponent, m = mantissa bits):
//   fp16  IEEE binary16   s1 e5 m10  bias 15   max 65504        has inf
//   bf16  bfloat16        s1 e8 m7   bias 127  max ~3.39e38     has inf
//   e4m3  OCP FP8 E4M3    s1 e4 m3   bias 7    max 448          no inf; NaN = 0x7f / 0xff
//   e5m2  OCP FP8 E5M2    s1 e5 m2   bias 15   max 57344        has inf
// All have subnormals, and every conversion handles them exactly.
//
// kolo's rules for float -> narrow:
//   - Round to nearest, ties to even, always (one rounding, never truncation).
//   - NaN stays NaN (sign kept; the result is a quiet NaN, payload not preserved for fp8).
//   - fp16, bf16, e5m2: overflow gives +-inf as IEEE 754 does, i.e. |x| at or above
//     max + half an ulp rounds to inf; +-inf stays +-inf.
//   - e4m3 has no inf, so kolo saturates: any |x| that rounds above 448, and +-inf,
//     become +-448 (the OCP "saturate to finite" mode). Only NaN maps to 0x7f/0xff.
// narrow -> float is exact for every pattern (float holds all of these values).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KOLO_HD __host__ __device__
#else
#define KOLO_HD
#endif

// For the per-element functions (conversions, functors, traits): always inlined, because
// GCC's -O2 inliner gives up on them inside the large unrolled kernel loops, and a call
// per element keeps the loop from vectorising (measured: fp16 sum 20x slower).
#if defined(__CUDACC__)
#define KOLO_HD_INLINE __host__ __device__ __forceinline__
#else
#define KOLO_HD_INLINE __attribute__((always_inline)) inline
#endif

namespace kolo {

KOLO_HD_INLINE uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

KOLO_HD_INLINE float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

namespace detail {

// cond ? a : b as bit masks. Plain ?: here gets turned back into branches by GCC, because
// the arms hold float operations it will not speculate (-ftrapping-math); with masks both
// arms are always computed, and a loop of conversions stays branch-free and vectorises.
KOLO_HD_INLINE uint32_t select_bits(bool cond, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(cond);
  return (a & mask) | (b & ~mask);
}

// Shared by all four formats: a narrow format with kExp exponent bits and kMan mantissa
// bits, bias 2^(kExp-1)-1. kIeeeTop says whether the all-ones exponent is reserved for
// inf/NaN (IEEE style); when false (e4m3) it holds normal numbers and only the all-ones
// pattern is NaN.
template <int kExp, int kMan, bool kIeeeTop>
struct NarrowFormat {
  static constexpr int kManBits = kMan;
  static constexpr int kBias = (1 << (kExp - 1)) - 1;
  static constexpr uint32_t kExpMask = (1u << kExp) - 1;
  static constexpr uint32_t kManMask = (1u << kMan) - 1;
  static constexpr uint32_t kSignBit = 1u << (kExp + kMan);
  static constexpr uint32_t kInf = kExpMask << kMan;             // IEEE formats only
  static constexpr uint32_t kNaN = kIeeeTop ? (kInf | (1u << (kMan - 1)))  // quiet NaN
                                            : (kInf | kManMask);
  // Largest finite magnitude: IEEE formats one below inf; e4m3 one below NaN.
  static constexpr uint32_t kMaxFinite = kIeeeTop ? kInf - 1 : (kInf | kManMask) - 1;
};

// float -> narrow. Written as straight-line code with selects instead of branches so
// that the host compiler can vectorise a loop of conversions, and a warp never diverges.
//
// Normal results: rebias the exponent in place and round the dropped mantissa bits to
// nearest even with the usual add-(half - 1 + lsb) trick; a mantissa that rounds up to
// 2.0 carries into the exponent by itself, which also takes care of rounding up to inf.
// Subnormal results: add a magic power of two whose ulp is the narrow format's smallest
// subnormal; the float adder then does the round-to-nearest-even, and the low bits of the
// sum are the subnormal mantissa (rounding up to the smallest normal falls out too). That
// needs the default rounding mode, which kolo never changes; a flush-to-zero mode only
// affects float subnormal inputs, and those round to zero in every narrow format here
// except bf16, which does not use this path.
template <class F>
KOLO_HD_INLINE uint32_t float_to_narrow(float value, bool saturate) {
  constexpr int kShift = 23 - F::kManBits;
  // Below this (2^(1-bias) as float bits) the result is subnormal or zero.
  constexpr uint32_t kMinNormal = static_cast<uint32_t>(127 - F::kBias + 1) << 23;
  constexpr uint32_t kMagic = static_cast<uint32_t>(127 - F::kBias + kShift + 1) << 23;
  constexpr uint32_t kRebias = static_cast<uint32_t>(F::kBias - 127) << 23;  // wraps: fine
  // Inputs at or above this overflow for sure; checked first so that the normal path's
  // arithmetic below cannot wrap around for huge inputs.
  constexpr uint32_t kHuge = static_cast<uint32_t>(F::kExpMask + 1 - F::kBias + 127) << 23;

  const uint32_t bits = float_to_bits(value);
  const uint32_t sign = (bits >> 31) * F::kSignBit;
  const uint32_t abs = bits & 0x7fffffffu;

  const uint32_t lsb = (abs >> kShift) & 1u;
  const uint32_t normal = (abs + kRebias + ((1u << (kShift - 1)) - 1u) + lsb) >> kShift;
  const uint32_t subnormal =
      float_to_bits(bits_to_float(abs) + bits_to_float(kMagic)) - kMagic;
  uint32_t result = select_bits(abs < kMinNormal, subnormal, normal);
  const uint32_t overflow = saturate ? F::kMaxFinite : F::kInf;
  result = select_bits(abs >= kHuge || result > F::kMaxFinite, overflow, result);
  result = select_bits(abs > 0x7f800000u, F::kNaN, result);
  return sign | result;
}

// narrow -> float, exact. Shift exponent and mantissa into float position and rebias;
// the all-ones exponent of IEEE formats moves to float's 255 (inf, or NaN with its payload,
// made quiet); a subnormal is built as 2^(1-bias) * 1.m and the 2^(1-bias) subtracted,
// which is exact because the difference is representable.
template <class F>
KOLO_HD_INLINE float narrow_to_float(uint32_t h) {
  constexpr int kShift = 23 - F::kManBits;
  constexpr uint32_t kRebias = static_cast<uint32_t>(127 - F::kBias) << 23;
  constexpr uint32_t kExpField = F::kExpMask << F::kManBits;
  constexpr uint32_t kMinNormal = static_cast<uint32_t>(127 - F::kBias + 1) << 23;

  const uint32_t sign = (h & F::kSignBit) ? 0x80000000u : 0u;
  const uint32_t abs = h & ~F::kSignBit;
  const uint32_t exp = abs & kExpField;
  const uint32_t shifted = (abs << kShift) + kRebias;

  const uint32_t sub = float_to_bits(bits_to_float(shifted + (1u << 23)) -
                                     bits_to_float(kMinNormal));
  uint32_t out = select_bits(exp == 0, sub, shifted);
  if constexpr (F::kMaxFinite == F::kInf - 1) {  // IEEE top exponent: inf / NaN
    const uint32_t special = (shifted + kRebias) | ((abs & F::kManMask) ? 0x400000u : 0u);
    out = select_bits(exp == kExpField, special, out);
  } else {  // e4m3: only the all-ones pattern is NaN
    out = select_bits(abs == (kExpField | F::kManMask), 0x7fc00000u, out);
  }
  return bits_to_float(sign | out);
}

using Fp16Format = NarrowFormat<5, 10, true>;
using Bf16Format = NarrowFormat<8, 7, true>;
using E4m3Format = NarrowFormat<4, 3, false>;
using E5m2Format = NarrowFormat<5, 2, true>;

}  // namespace detail

KOLO_HD_INLINE float half_to_float(uint16_t h) {
  return detail::narrow_to_float<detail::Fp16Format>(h);
}
KOLO_HD_INLINE uint16_t float_to_half(float f) {
  return static_cast<uint16_t>(detail::float_to_narrow<detail::Fp16Format>(f, false));
}

// bf16 is the top half of a float, so widening is a shift; narrowing rounds the low half
// away (ties to even) and lets a carry run into the exponent, which also yields inf on
// overflow. NaN is kept quiet explicitly so that a NaN with only low payload bits cannot
// turn into inf.
KOLO_HD_INLINE float bf16_to_float(uint16_t h) {
  return bits_to_float(static_cast<uint32_t>(h) << 16);
}
KOLO_HD_INLINE uint16_t float_to_bf16(float f) {
  const uint32_t bits = float_to_bits(f);
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t nan = (bits >> 16) | 0x40u;
  return static_cast<uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

KOLO_HD_INLINE float fp8_e4m3_to_float(uint8_t h) {
  return detail::narrow_to_float<detail::E4m3Format>(h);
}
KOLO_HD_INLINE uint8_t float_to_fp8_e4m3(float f) {
  return static_cast<uint8_t>(detail::float_to_narrow<detail::E4m3Format>(f, true));
}

KOLO_HD_INLINE float fp8_e5m2_to_float(uint8_t h) {
  return detail::narrow_to_float<detail::E5m2Format>(h);
}
KOLO_HD_INLINE uint8_t float_to_fp8_e5m2(float f) {
  return static_cast<uint8_t>(detail::float_to_narrow<detail::E5m2Format>(f, false));
}

}  // namespace kolo
