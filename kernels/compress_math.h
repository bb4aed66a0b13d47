// The math of wire compression, written once: how an fp32 value becomes an fp16 / bf16 /
// fp8 code on the wire and back, how an fp8 block gets its scale, and what each fused
// codec operation computes per element. kernels/compress.cc (host) and
// kernels/cuda/compress_kernels.cu (device) both compile these functions, so their
// results are bit-identical.
//
// Every float operation here goes through mul_rn/add_rn/div_rn: on the device these are
// the round-to-nearest intrinsics, which nvcc never contracts into an FMA (an FMA rounds
// once where the host rounds twice, and the twins would differ in the last bit).
#pragma once

#include <cstdint>

#include "kernels/dtype.h"
#include "kernels/float_types.h"

namespace kolo {

KOLO_HD_INLINE float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
KOLO_HD_INLINE float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
KOLO_HD_INLINE float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// The four codec operations. Per element, with m = scale.factor / scale.divisor:
//   kCompress                 wire = encode(m * src)
//   kDecompress               dst  = m * decode(wire)
//   kDecompressReduce         acc  = m * (acc + decode(wire))
//   kDecompressReduceCompress out  = encode(m * (acc + decode(in)))
//   kRecompress               out  = encode(m * decode(in))
// decode(in) may be the fp32 sum of several wire inputs' decoded values, added in input
// order (decompress_sum, recompress_sum): the one-rounding property of a direct reduce.
enum class CodecOp : int { kCompress = 0, kDecompress, kDecompressReduce, kDecompressReduceCompress, kRecompress };

template <CodecOp Op>
struct CodecOpTraits {
  static constexpr bool kReadsWire = Op != CodecOp::kCompress;
  static constexpr bool kReadsFloat = Op != CodecOp::kDecompress && Op != CodecOp::kRecompress;
  static constexpr bool kWritesWire =
      Op == CodecOp::kCompress || Op == CodecOp::kDecompressReduceCompress || Op == CodecOp::kRecompress;
};

// The fp32 value an element turns into before it is encoded (or stored as fp32): f is the
// fp32 operand (src or acc), dec the decoded wire value; unused operands are ignored.
template <CodecOp Op>
KOLO_HD_INLINE float codec_value(float f, float dec, float m) {
  if constexpr (Op == CodecOp::kCompress) {
    return mul_rn(m, f);
  } else if constexpr (Op == CodecOp::kDecompress || Op == CodecOp::kRecompress) {
    return mul_rn(m, dec);
  } else {
    return mul_rn(m, add_rn(f, dec));
  }
}

// Wire formats. fp16 and bf16 carry one code per value and no scale. fp8 carries one code
// per value plus, per block of 128 or 256 values, one fp32 scale (see block_scale).
template <DType W>
struct WireTraits;

template <>
struct WireTraits<DType::kFloat16> {
  using Code = uint16_t;
  static constexpr bool kBlocked = false;
  KOLO_HD_INLINE static float decode(Code c) { return half_to_float(c); }
  KOLO_HD_INLINE static Code encode(float v) { return float_to_half(v); }
};
template <>
struct WireTraits<DType::kBFloat16> {
  using Code = uint16_t;
  static constexpr bool kBlocked = false;
  KOLO_HD_INLINE static float decode(Code c) { return bf16_to_float(c); }
  KOLO_HD_INLINE static Code encode(float v) { return float_to_bf16(v); }
};
template <>
struct WireTraits<DType::kFloat8E4M3> {
  using Code = uint8_t;
  static constexpr bool kBlocked = true;
  static constexpr float kMax = 448.0f;
  KOLO_HD_INLINE static float decode(Code c) { return fp8_e4m3_to_float(c); }
  KOLO_HD_INLINE static Code encode(float v) { return float_to_fp8_e4m3(v); }
};
template <>
struct WireTraits<DType::kFloat8E5M2> {
  using Code = uint8_t;
  static constexpr bool kBlocked = true;
  static constexpr float kMax = 57344.0f;
  KOLO_HD_INLINE static float decode(Code c) { return fp8_e5m2_to_float(c); }
  KOLO_HD_INLINE static Code encode(float v) { return float_to_fp8_e5m2(v); }
};

// |v| as bits. For every float, including inf and NaN, unsigned order of these bits is
// the order of magnitudes with NaN above inf, so a block's amax is an integer max: exact,
// independent of the order of reduction (host loop vs warp shuffle), and vectorisable.
KOLO_HD_INLINE uint32_t abs_bits(float v) { return float_to_bits(v) & 0x7fffffffu; }

constexpr uint32_t kInfBits = 0x7f800000u;
// Blocks whose amax is below 2^-100 are stored as zeros: below that, kMax / amax would
// overflow float for e4m3 (and scales would go subnormal); no fp32 training value that
// small survives anyway.
constexpr uint32_t kMinBlockAmaxBits = static_cast<uint32_t>(127 - 100) << 23;

struct BlockScale {
  float scale;  // stored beside the block: value = decode(code) * scale
  float inv;    // what values are multiplied by before encoding
};

// The scale of one fp8 block from the bits of its amax (max of abs_bits over the block):
//   - amax in [2^-100, FLT_MAX]: scale = amax / kMax, inv = kMax / amax (each rounded
//     once); the largest value encodes at (or, by rounding, a hair above) kMax, which e4m3
//     saturates and e5m2 rounds back to kMax.
//   - amax below 2^-100, including an all-zero block: scale = inv = 0; every code is
//     +-0 and decodes to 0.
//   - any inf or NaN in the block: scale = inv = NaN; every code is NaN and the whole
//     block decodes to NaN, so a non-finite value is never silently dropped.
template <class Tr>
KOLO_HD_INLINE BlockScale block_scale(uint32_t amax_bits) {
  if (amax_bits >= kInfBits) {
    const float nan = bits_to_float(0x7fc00000u);
    return {nan, nan};
  }
  if (amax_bits < kMinBlockAmaxBits) return {0.0f, 0.0f};
  const float amax = bits_to_float(amax_bits);
  return {div_rn(amax, Tr::kMax), div_rn(Tr::kMax, amax)};
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
// The GPU's own fp8 conversions (sm_89 and later): one instruction where the portable code
// takes a dozen per value, which held fp8 decoding to 55-69 % of the copy rate on an H200.
// They give the portable code's bits wherever the blocked codecs use them: a scaled value
// never exceeds kMax (so saturating, which the instruction always does, changes nothing
// for e5m2 either), a NaN to encode takes the portable code, and a NaN decoded is
// multiplied by the scale, which on the GPU makes the canonical NaN whatever its bits.
template <class Tr>
__device__ __forceinline__ float fp8_cvt_decode(uint8_t c) {
  const unsigned short in = c;
  unsigned int pair;
  if constexpr (Tr::kMax == 448.0f) {
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(pair) : "h"(in));
  } else {
    asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(pair) : "h"(in));
  }
  const unsigned short half = static_cast<unsigned short>(pair & 0xffffu);
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(half));
  return f;
}
template <class Tr>
__device__ __forceinline__ uint8_t fp8_cvt_encode(float x) {
  // A NaN (a block holding inf or NaN) through the portable code: the instruction's NaN
  // code is another one of e5m2's three.
  if (x != x) return Tr::encode(x);
  unsigned short pair;  // the second operand's code in the low byte
  if constexpr (Tr::kMax == 448.0f) {
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(0.0f), "f"(x));
  } else {
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(0.0f), "f"(x));
  }
  return static_cast<uint8_t>(pair & 0xffu);
}
#define KOLO_FP8_CVT 1
#endif

template <class Tr>
KOLO_HD_INLINE typename Tr::Code encode_blocked(float v, float inv) {
#if defined(KOLO_FP8_CVT)
  return fp8_cvt_encode<Tr>(mul_rn(v, inv));
#else
  return Tr::encode(mul_rn(v, inv));
#endif
}
template <class Tr>
KOLO_HD_INLINE float decode_blocked(typename Tr::Code c, float scale) {
#if defined(KOLO_FP8_CVT)
  return mul_rn(fp8_cvt_decode<Tr>(c), scale);
#else
  return mul_rn(Tr::decode(c), scale);
#endif
}

}  // namespace kolo
