// Host twins of the CUDA codec kernels (kernels/cuda/compress_kernels.cu). Values are
// handled a block at a time: for fp8 one scale block (its size a template parameter, so
// the loops have compile-time trip counts and GCC's -O2 vectoriser takes them), for fp16
// and bf16 kChunk values. A short last block runs the same code with a run-time count.
// fp16 uses the CPU's F16C conversions where it has them (same bits, see F16cConv).
#include "kernels/compress.h"

#include <cmath>
#include <cstdint>
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define KOLO_HAVE_F16C_PATH 1
#endif

#include "kernels/codec_trace.h"
#include "kernels/compress_math.h"
#include "kernels/host_kernels.h"
#include "kernels/target_clones.h"
#include "support/clock.h"

namespace kolo {
namespace {

constexpr size_t kChunk = 256;

// Baseline x86-64 and AVX2 builds of each loop, picked by CPU at load time
// (KOLO_CLONES, kernels/target_clones.h).

struct CodecArgs {
  float* fout;        // decompress: dst; decompress_reduce: acc
  const float* fin;   // compress: src; decompress_reduce(_compress): acc
  void* wout;         // compress, decompress_reduce_compress, recompress
  const void* win[kMaxWireInputs];  // decompress*, decompress_reduce_compress, recompress
  int nwin;
  size_t count;
  size_t scales_offset;
  float m;
};

// How codes become floats and back, n at a time: one element at a time through the
// traits (what GCC's vectoriser takes), or for fp16 with the CPU's F16C conversions.
struct TraitsConv {
  template <class Tr>
  __attribute__((always_inline)) static inline void decode(const typename Tr::Code* in, float* out, size_t n) {
    for (size_t j = 0; j < n; ++j) out[j] = Tr::decode(in[j]);
  }
  template <class Tr>
  __attribute__((always_inline)) static inline void encode(const float* in, typename Tr::Code* out, size_t n) {
    for (size_t j = 0; j < n; ++j) out[j] = Tr::encode(in[j]);
  }
};

#ifdef KOLO_HAVE_F16C_PATH
// IEEE conversions, round to nearest even, as float_to_half/half_to_float do (the unit
// tests compare every fp16 code and the float classes bit for bit). A group of 8 with a
// NaN goes through the traits, whose NaN codes are kolo's own. Called once per chunk of
// kChunk values (not inlined: GCC inlines target-specific code only into callers of the
// same target).
struct F16cConv {
  template <class Tr>
  __attribute__((noinline, target("avx2,f16c"))) static void decode(const uint16_t* in, float* out,
                                                                                size_t n) {
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
      _mm256_storeu_ps(out + j, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + j))));
    }
    for (; j < n; ++j) out[j] = Tr::decode(in[j]);
  }
  template <class Tr>
  __attribute__((noinline, target("avx2,f16c"))) static void encode(const float* in, uint16_t* out,
                                                                                size_t n) {
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
      const __m256 v = _mm256_loadu_ps(in + j);
      if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0) {
        for (size_t k = j; k < j + 8; ++k) out[k] = Tr::encode(in[k]);
        continue;
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j),
                       _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; j < n; ++j) out[j] = Tr::encode(in[j]);
  }
};
#endif

// Values [off, off + n) with n <= kB; the block's scale index is b.
template <DType W, CodecOp Op, size_t kB, class Conv = TraitsConv>
__attribute__((always_inline)) inline void codec_block(const CodecArgs& a, size_t off, size_t n,
                                                       size_t b) {
  using Tr = WireTraits<W>;
  using Code = typename Tr::Code;
  using OpTr = CodecOpTraits<Op>;
  const float* fin = OpTr::kReadsFloat ? a.fin + off : nullptr;  // null + offset is undefined
  float v[kB];
  // A plain decode (no fp32 operand) sums straight into its output and scales it there:
  // no pass through a block buffer and no copy out (the output is the one array it
  // touches, so the loops stay vectorised). The others keep dec: their acc may be fout.
  constexpr bool kDirect = Op == CodecOp::kDecompress;
  float dec_block[kDirect ? 1 : kB];
  float* dec = kDirect ? a.fout + off : dec_block;
  if constexpr (OpTr::kReadsWire) {
    // The decoded inputs summed in input order, in fp32 (one input: its value).
    for (int k = 0; k < a.nwin; ++k) {
      const Code* win = static_cast<const Code*>(a.win[k]) + off;
      float in_scale = 0.0f;
      if constexpr (Tr::kBlocked) {
        in_scale = reinterpret_cast<const float*>(static_cast<const char*>(a.win[k]) + a.scales_offset)[b];
      }
      if constexpr (Tr::kBlocked) {
        // Two loops, not one with `k == 0 ?` inside: GCC's -O2 vectoriser does not unswitch.
        // ivdep: dec may be the output, which GCC cannot tell apart from the byte codes.
        if (k == 0) {
#pragma GCC ivdep
          for (size_t j = 0; j < n; ++j) dec[j] = decode_blocked<Tr>(win[j], in_scale);
        } else {
#pragma GCC ivdep
          for (size_t j = 0; j < n; ++j) dec[j] = add_rn(dec[j], decode_blocked<Tr>(win[j], in_scale));
        }
      } else if (k == 0) {
        Conv::template decode<Tr>(win, dec, n);
      } else {
        float d[kB];
        Conv::template decode<Tr>(win, d, n);
#pragma GCC ivdep
        for (size_t j = 0; j < n; ++j) dec[j] = add_rn(dec[j], d[j]);
      }
    }
  }
  if constexpr (kDirect) {
    const float m = a.m;  // a local: a store through dec could otherwise change a.m
    for (size_t j = 0; j < n; ++j) dec[j] = codec_value<Op>(0.0f, dec[j], m);
    return;
  }
  for (size_t j = 0; j < n; ++j) {
    float f = 0.0f;
    if constexpr (OpTr::kReadsFloat) f = fin[j];
    v[j] = codec_value<Op>(f, OpTr::kReadsWire ? dec[j] : 0.0f, a.m);
  }
  if constexpr (OpTr::kWritesWire) {
    Code* wout = static_cast<Code*>(a.wout) + off;
    if constexpr (Tr::kBlocked) {
      uint32_t amax = 0;
      for (size_t j = 0; j < n; ++j) {
        const uint32_t x = abs_bits(v[j]);
        amax = x > amax ? x : amax;
      }
      const BlockScale s = block_scale<Tr>(amax);
      for (size_t j = 0; j < n; ++j) wout[j] = encode_blocked<Tr>(v[j], s.inv);
      reinterpret_cast<float*>(static_cast<char*>(a.wout) + a.scales_offset)[b] = s.scale;
    } else {
      Conv::template encode<Tr>(v, wout, n);
    }
  } else {
    float* fout = a.fout + off;
    for (size_t j = 0; j < n; ++j) fout[j] = v[j];
  }
}

template <DType W, CodecOp Op, size_t kB>
KOLO_CLONES void codec_loop(const CodecArgs& a) {
  size_t off = 0, b = 0;
  for (; a.count - off >= kB; off += kB, ++b) codec_block<W, Op, kB>(a, off, kB, b);
  if (off < a.count) codec_block<W, Op, kB>(a, off, a.count - off, b);
}

#ifdef KOLO_HAVE_F16C_PATH
template <CodecOp Op>
__attribute__((target("avx2,f16c"))) void codec_loop_f16c(const CodecArgs& a) {
  size_t off = 0, b = 0;
  for (; a.count - off >= kChunk; off += kChunk, ++b) codec_block<DType::kFloat16, Op, kChunk, F16cConv>(a, off, kChunk, b);
  if (off < a.count) codec_block<DType::kFloat16, Op, kChunk, F16cConv>(a, off, a.count - off, b);
}

bool have_f16c() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return yes;
}
#endif

template <CodecOp Op>
void codec_dispatch(const CodecArgs& a, WireFormat fmt) {
  switch (fmt.dtype) {
    case DType::kFloat16:
#ifdef KOLO_HAVE_F16C_PATH
      if (have_f16c()) return codec_loop_f16c<Op>(a);
#endif
      return codec_loop<DType::kFloat16, Op, kChunk>(a);
    case DType::kBFloat16: return codec_loop<DType::kBFloat16, Op, kChunk>(a);
    case DType::kFloat8E4M3:
      return fmt.block == 128 ? codec_loop<DType::kFloat8E4M3, Op, 128>(a)
                              : codec_loop<DType::kFloat8E4M3, Op, 256>(a);
    default:
      return fmt.block == 128 ? codec_loop<DType::kFloat8E5M2, Op, 128>(a)
                              : codec_loop<DType::kFloat8E5M2, Op, 256>(a);
  }
}

bool is_fp8(DType d) { return d == DType::kFloat8E4M3 || d == DType::kFloat8E5M2; }

struct Range {
  const char* name;
  uintptr_t begin;
  size_t bytes;
};

template <CodecOp Op>
Status run(const char* caller, float* fout, const float* fin, void* wout, const void* const* win,
           int nwin, size_t count, WireFormat fmt, Scale scale) {
  KOLO_TRY(check_codec_inputs(caller, fout, fin, wout, win, nwin, count, fmt, scale));
  if (count == 0) return Status::ok_status();
  CodecArgs a{fout, fin, wout, {}, nwin, count, wire_scales_offset(fmt, count),
              static_cast<float>(scale.factor / static_cast<double>(scale.divisor))};
  for (int k = 0; k < nwin; ++k) a.win[k] = win[k];
  CodecTrace* trace = thread_codec_trace();
  const double start = trace != nullptr ? now_seconds() : 0;
  codec_dispatch<Op>(a, fmt);
  if (trace != nullptr) trace->add(CodecOpTraits<Op>::kWritesWire, start, now_seconds());
  return Status::ok_status();
}

template <CodecOp Op>
Status run(const char* caller, float* fout, const float* fin, void* wout, const void* win,
           size_t count, WireFormat fmt, Scale scale) {
  return run<Op>(caller, fout, fin, wout, &win, win != nullptr ? 1 : 0, count, fmt, scale);
}

}  // namespace

size_t wire_scales_offset(WireFormat fmt, size_t count) {
  return is_fp8(fmt.dtype) ? (count + 15) / 16 * 16 : 0;
}

size_t wire_bytes(WireFormat fmt, size_t count) {
  if (!is_fp8(fmt.dtype)) return count * 2;
  const size_t block = fmt.block > 0 ? static_cast<size_t>(fmt.block) : 1;
  return wire_scales_offset(fmt, count) + (count + block - 1) / block * sizeof(float);
}

Status check_codec_args(const char* caller, float* fout, const float* fin, void* wout,
                        const void* win, size_t count, WireFormat fmt, Scale scale) {
  const bool fp8 = is_fp8(fmt.dtype);
  if (!fp8 && fmt.dtype != DType::kFloat16 && fmt.dtype != DType::kBFloat16) {
    return error(Code::kInvalidArgument, caller, ": wire dtype ", static_cast<int>(fmt.dtype),
                 " is not half, bfloat16, f8e4m3 or f8e5m2");
  }
  if (fp8 && fmt.block != 128 && fmt.block != 256) {
    return error(Code::kInvalidArgument, caller, ": fp8 block ", fmt.block,
                 " is neither 128 nor 256");
  }
  if (!fp8 && fmt.block != 0) {
    return error(Code::kInvalidArgument, caller, ": block ", fmt.block, " given for ",
                 dtype_name(fmt.dtype), ", which has no block scales (pass 0)");
  }
  KOLO_TRY(check_scale(caller, scale));
  if (count == 0) return Status::ok_status();
  if (count > SIZE_MAX / 8) {
    return error(Code::kInvalidArgument, caller, ": count ", count,
                 " overflows the address space");
  }
  const size_t wire_align = fp8 ? 4 : 2;
  const Range ranges[4] = {
      {"dst", reinterpret_cast<uintptr_t>(fout), count * sizeof(float)},
      {"src", reinterpret_cast<uintptr_t>(fin), count * sizeof(float)},
      {"wire_out", reinterpret_cast<uintptr_t>(wout), wire_bytes(fmt, count)},
      {"wire_in", reinterpret_cast<uintptr_t>(win), wire_bytes(fmt, count)},
  };
  const bool used[4] = {fout != nullptr, fin != nullptr, wout != nullptr, win != nullptr};
  for (int i = 0; i < 4; ++i) {
    if (!used[i]) continue;
    const size_t align = i < 2 ? sizeof(float) : wire_align;
    if (ranges[i].begin % align != 0) {
      return error(Code::kInvalidArgument, caller, ": ", ranges[i].name, " ",
                   reinterpret_cast<const void*>(ranges[i].begin), " is not aligned to ",
                   align, " bytes");
    }
    for (int k = 0; k < i; ++k) {
      if (!used[k]) continue;
      // Exact aliasing of two buffers of the same kind is in place (acc, or a wire chunk
      // re-encoded where it arrived); element i only ever reads and writes element i.
      const bool same_kind = (i < 2) == (k < 2);
      if (same_kind && ranges[i].begin == ranges[k].begin) continue;
      if (ranges[i].begin < ranges[k].begin + ranges[k].bytes &&
          ranges[k].begin < ranges[i].begin + ranges[i].bytes) {
        return error(Code::kInvalidArgument, caller, ": ", ranges[i].name, " ",
                     reinterpret_cast<const void*>(ranges[i].begin), " overlaps ",
                     ranges[k].name, " ", reinterpret_cast<const void*>(ranges[k].begin));
      }
    }
  }
  return Status::ok_status();
}

Status check_codec_inputs(const char* caller, float* fout, const float* fin, void* wout,
                          const void* const* win, int nwin, size_t count, WireFormat fmt,
                          Scale scale) {
  if (nwin < 0 || nwin > kMaxWireInputs) {
    return error(Code::kInvalidArgument, caller, ": ", nwin, " wire inputs (0..", kMaxWireInputs, ")");
  }
  if (nwin == 0) return check_codec_args(caller, fout, fin, wout, nullptr, count, fmt, scale);
  if (count > 0 && win == nullptr) {
    return error(Code::kInvalidArgument, caller, ": the wire inputs are null with count ", count);
  }
  for (int k = 0; k < nwin; ++k) {
    if (count > 0 && win[k] == nullptr) {
      return error(Code::kInvalidArgument, caller, ": wire input ", k, " is null with count ", count);
    }
    KOLO_TRY(check_codec_args(caller, fout, fin, wout, win[k], count, fmt, scale));
  }
  return Status::ok_status();
}

Status decompress_sum(float* dst, const void* const* wires, int nwires, size_t count,
                      WireFormat fmt, Scale scale) {
  if (count > 0 && dst == nullptr) {
    return error(Code::kInvalidArgument, "decompress_sum: dst is null with count ", count);
  }
  if (nwires < 1) return error(Code::kInvalidArgument, "decompress_sum: ", nwires, " wire inputs (1..", kMaxWireInputs, ")");
  return run<CodecOp::kDecompress>("decompress_sum", dst, nullptr, nullptr, wires, nwires, count, fmt, scale);
}

Status decompress_sum_all(float* dst, const void* const* wires, int nwires, size_t count,
                          WireFormat fmt, Scale scale) {
  if (nwires <= kMaxWireInputs) return decompress_sum(dst, wires, nwires, count, fmt, scale);
  KOLO_TRY(decompress_sum(dst, wires, kMaxWireInputs, count, fmt, Scale{}));
  for (int k = kMaxWireInputs; k < nwires; ++k) {
    KOLO_TRY(decompress_reduce(dst, wires[k], count, fmt, k == nwires - 1 ? scale : Scale{}));
  }
  return Status();
}

Status recompress_sum(void* wire_out, const void* const* wires, int nwires, size_t count,
                      WireFormat fmt, Scale scale) {
  if (count > 0 && wire_out == nullptr) {
    return error(Code::kInvalidArgument, "recompress_sum: wire_out is null with count ", count);
  }
  if (nwires < 1) return error(Code::kInvalidArgument, "recompress_sum: ", nwires, " wire inputs (1..", kMaxWireInputs, ")");
  return run<CodecOp::kRecompress>("recompress_sum", nullptr, nullptr, wire_out, wires, nwires, count, fmt, scale);
}

Status compress(void* wire, const float* src, size_t count, WireFormat fmt, Scale scale) {
  if (count > 0 && (wire == nullptr || src == nullptr)) {
    return error(Code::kInvalidArgument, "compress: ", wire == nullptr ? "wire" : "src",
                 " is null with count ", count);
  }
  return run<CodecOp::kCompress>("compress", nullptr, src, wire, nullptr, count, fmt, scale);
}

Status decompress(float* dst, const void* wire, size_t count, WireFormat fmt, Scale scale) {
  if (count > 0 && (wire == nullptr || dst == nullptr)) {
    return error(Code::kInvalidArgument, "decompress: ", wire == nullptr ? "wire" : "dst",
                 " is null with count ", count);
  }
  return run<CodecOp::kDecompress>("decompress", dst, nullptr, nullptr, wire, count, fmt,
                                   scale);
}

Status decompress_reduce(float* acc, const void* wire, size_t count, WireFormat fmt,
                         Scale scale) {
  if (count > 0 && (wire == nullptr || acc == nullptr)) {
    return error(Code::kInvalidArgument, "decompress_reduce: ",
                 wire == nullptr ? "wire" : "acc", " is null with count ", count);
  }
  return run<CodecOp::kDecompressReduce>("decompress_reduce", acc, acc, nullptr, wire, count,
                                         fmt, scale);
}

Status decompress_reduce_compress(void* wire_out, const float* acc, const void* wire_in,
                                  size_t count, WireFormat fmt, Scale scale) {
  if (count > 0 && (wire_out == nullptr || acc == nullptr || wire_in == nullptr)) {
    return error(Code::kInvalidArgument, "decompress_reduce_compress: ",
                 wire_out == nullptr ? "wire_out" : (acc == nullptr ? "acc" : "wire_in"),
                 " is null with count ", count);
  }
  return run<CodecOp::kDecompressReduceCompress>("decompress_reduce_compress", nullptr, acc,
                                                 wire_out, wire_in, count, fmt, scale);
}

}  // namespace kolo
