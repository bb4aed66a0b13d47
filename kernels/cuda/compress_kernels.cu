// CUDA codec kernels: the device twins of kernels/compress.cc. The math is
// kernels/compress_math.h; nothing numeric is defined here.
//
// Work is cut into units of 16 wire bytes (8 fp16/bf16 values, 16 fp8 values), one unit
// per thread per grid-stride step: one 16-byte load or store of codes and two or four
// 16-byte loads or stores of fp32. An fp8 block of 128 (256) values is 8 (16) units held by
// 8 (16) consecutive lanes of one warp, which find the block's amax with shuffles. fp8
// decoding alone lays a warp's values out otherwise (codec_fp8). When any pointer is not
// 16-byte aligned, or for the units around the end of the buffer, the same code loads and
// stores element by element instead.
//
// One kernel per (wire dtype, op): 20 in all, to keep nvcc time small for two archs. The
// block size and the vector flag are run-time values, uniform across the grid.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/compress.h"
#include "kernels/compress_math.h"
#include "kernels/cuda/vector_pack.cuh"
#include "kernels/cuda_kernels.h"

namespace kolo {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = size_t{1} << 20;

struct CodecArgs {
  float* fout;
  const float* fin;
  void* wout;
  const void* win[kMaxWireInputs];  // nwin of them, summed in order after decoding
  const float* scales_in[kMaxWireInputs];
  int nwin;
  float* scales_out;
  size_t count;
  int block;        // fp8 values per scale: 128 or 256
  int block_shift;  // log2(block): a shift, not a 64-bit division, per unit
  float m;
  bool vec;   // every pointer 16-byte aligned
};

// Four floats of a 16-byte load, into consecutive values.
__device__ __forceinline__ void unpack4(float* f, float4 x) {
  f[0] = x.x;
  f[1] = x.y;
  f[2] = x.z;
  f[3] = x.w;
}

// fp8 decoding (decompress, decompress_reduce: codes in, fp32 out): a warp takes 512
// values at a time, and lane l holds values 8l..8l+7 of each half of them (h = 0, 1; 256
// values each): one 8-byte load of codes and two 16-byte stores of fp32 per half, the
// access pattern of fp16 decoding (90 % of copy on an H200). 16 codes per lane made each
// fp32 store a stride-64 scatter (47 %); 4 per lane per quarter, 4-byte loads (69 %).
// Encoding keeps 16 codes per lane (codec_units): its block amax needs fewer shuffles.
template <DType W, CodecOp Op>
__device__ __forceinline__ void codec_fp8(const CodecArgs& a) {
  using Tr = WireTraits<W>;
  using OpTr = CodecOpTraits<Op>;
  static_assert(sizeof(typename Tr::Code) == 1 && Tr::kBlocked && !OpTr::kWritesWire, "fp8 decoding only");
  constexpr int kHalf = 256, kSpan = 2 * kHalf, kPer = 8;
  const size_t nspans = (a.count + kSpan - 1) / kSpan;
  const size_t warp = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const size_t nwarps = static_cast<size_t>(gridDim.x) * blockDim.x / 32;
  const unsigned lane = threadIdx.x % 32;
  for (size_t sp = warp; sp < nspans; sp += nwarps) {
    const size_t base = sp * kSpan;
    const bool vec = a.vec && base + kSpan <= a.count;
    auto at = [&](int h, int j) { return base + h * kHalf + kPer * lane + j; };  // value index
    float dec[2 * kPer] = {};
    if constexpr (OpTr::kReadsWire) {
#pragma unroll
      for (int k = 0; k < kMaxWireInputs; ++k) {
        if (k < a.nwin) {
          const uint8_t* win = static_cast<const uint8_t*>(a.win[k]);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            uint8_t c[kPer];
            if (vec) {
              const uint2 w = reinterpret_cast<const uint2*>(win + base + h * kHalf)[lane];
#pragma unroll
              for (int j = 0; j < 4; ++j) {
                c[j] = static_cast<uint8_t>(w.x >> (8 * j));
                c[4 + j] = static_cast<uint8_t>(w.y >> (8 * j));
              }
            } else {
#pragma unroll
              for (int j = 0; j < kPer; ++j) c[j] = at(h, j) < a.count ? win[at(h, j)] : 0;
            }
            const size_t first = at(h, 0);  // a lane's 8 values lie in one block
            const float sc = first < a.count ? a.scales_in[k][first >> a.block_shift] : 0.0f;
#pragma unroll
            for (int j = 0; j < kPer; ++j) {
              const float d = decode_blocked<Tr>(c[j], sc);
              dec[kPer * h + j] = k == 0 ? d : add_rn(dec[kPer * h + j], d);
            }
          }
        }
      }
    }
    float f[2 * kPer] = {};
    if constexpr (OpTr::kReadsFloat) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (vec) {
          const float4* in = reinterpret_cast<const float4*>(a.fin + at(h, 0));
          unpack4(f + kPer * h, in[0]);
          unpack4(f + kPer * h + 4, in[1]);
        } else {
#pragma unroll
          for (int j = 0; j < kPer; ++j) f[kPer * h + j] = at(h, j) < a.count ? a.fin[at(h, j)] : 0.0f;
        }
      }
    }
    float v[2 * kPer];
#pragma unroll
    for (int e = 0; e < 2 * kPer; ++e) v[e] = codec_value<Op>(f[e], dec[e], a.m);
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // fp32 out
      if (vec) {
        float4* out = reinterpret_cast<float4*>(a.fout + at(h, 0));
        out[0] = make_float4(v[kPer * h], v[kPer * h + 1], v[kPer * h + 2], v[kPer * h + 3]);
        out[1] = make_float4(v[kPer * h + 4], v[kPer * h + 5], v[kPer * h + 6], v[kPer * h + 7]);
      } else {
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
          if (at(h, j) < a.count) a.fout[at(h, j)] = v[kPer * h + j];
        }
      }
    }
  }
}

// fp16 and bf16, and fp8 encoding: 16 bytes of codes (8 or 16 consecutive values) per lane.
template <DType W, CodecOp Op>
__device__ __forceinline__ void codec_units(const CodecArgs& a) {
  using Tr = WireTraits<W>;
  using Code = typename Tr::Code;
  using OpTr = CodecOpTraits<Op>;
  using CodePack = Pack<Code>;
  constexpr int kUnit = CodePack::kCount;
  const size_t nunits = (a.count + kUnit - 1) / kUnit;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const unsigned lane = threadIdx.x % 32;
  const int group = Tr::kBlocked ? a.block / kUnit : 1;

  // The loop bound is the warp's first unit, so all 32 lanes run the same iterations and
  // can shuffle together; lanes past the end carry zeros and store nothing.
  for (size_t u = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       u - lane < nunits; u += stride) {
    const size_t e0 = u * kUnit;
    const bool active = u < nunits;
    const bool whole = active && e0 + kUnit <= a.count;
    const bool vec = a.vec && whole;
    int n = 0;  // values of this unit inside the buffer
    if (active) n = whole ? kUnit : static_cast<int>(a.count - e0);

    float dec[kUnit] = {};  // operands an op does not read stay 0 (and are folded away)
    if constexpr (OpTr::kReadsWire) {
      // Unrolled with constant k so that a.win[k] stays a parameter-space load.
#pragma unroll
      for (int k = 0; k < kMaxWireInputs; ++k) {
        if (k < a.nwin) {
          CodePack in;
          const Code* win = static_cast<const Code*>(a.win[k]);
          if (vec) {
            in.bits = reinterpret_cast<const uint4*>(win + e0)[0];
          } else {
#pragma unroll
            for (int e = 0; e < kUnit; ++e) in.elem[e] = e < n ? win[e0 + e] : Code(0);
          }
          float d[kUnit];
          if constexpr (Tr::kBlocked) {
            const float s = active ? a.scales_in[k][e0 >> a.block_shift] : 0.0f;
#pragma unroll
            for (int e = 0; e < kUnit; ++e) d[e] = decode_blocked<Tr>(in.elem[e], s);
          } else {
#pragma unroll
            for (int e = 0; e < kUnit; ++e) d[e] = Tr::decode(in.elem[e]);
          }
#pragma unroll
          for (int e = 0; e < kUnit; ++e) dec[e] = k == 0 ? d[e] : add_rn(dec[e], d[e]);
        }
      }
    }
    float f[kUnit] = {};
    if constexpr (OpTr::kReadsFloat) {
      if (vec) {
#pragma unroll
        for (int q = 0; q < kUnit / 4; ++q) {
          unpack4(f + 4 * q, reinterpret_cast<const float4*>(a.fin + e0)[q]);
        }
      } else {
#pragma unroll
        for (int e = 0; e < kUnit; ++e) f[e] = e < n ? a.fin[e0 + e] : 0.0f;
      }
    }
    float v[kUnit];
#pragma unroll
    for (int e = 0; e < kUnit; ++e) v[e] = codec_value<Op>(f[e], dec[e], a.m);

    if constexpr (OpTr::kWritesWire) {
      CodePack out;
      if constexpr (Tr::kBlocked) {
        uint32_t amax = 0;
#pragma unroll
        for (int e = 0; e < kUnit; ++e) {
          const uint32_t x = e < n ? abs_bits(v[e]) : 0u;
          amax = x > amax ? x : amax;
        }
        // Lanes of one block are group-aligned (blockDim and stride are multiples of 32).
        for (int off = group / 2; off > 0; off /= 2) {
          const uint32_t other = __shfl_xor_sync(0xffffffffu, amax, off);
          amax = other > amax ? other : amax;
        }
        const BlockScale s = block_scale<Tr>(amax);
#pragma unroll
        for (int e = 0; e < kUnit; ++e) out.elem[e] = encode_blocked<Tr>(v[e], s.inv);
        if (active && lane % group == 0) a.scales_out[e0 >> a.block_shift] = s.scale;
      } else {
#pragma unroll
        for (int e = 0; e < kUnit; ++e) out.elem[e] = Tr::encode(v[e]);
      }
      Code* wout = static_cast<Code*>(a.wout);
      if (vec) {
        reinterpret_cast<uint4*>(wout + e0)[0] = out.bits;
      } else {
#pragma unroll
        for (int e = 0; e < kUnit; ++e) {
          if (e < n) wout[e0 + e] = out.elem[e];
        }
      }
    } else {
      if (vec) {
#pragma unroll
        for (int q = 0; q < kUnit / 4; ++q) {
          reinterpret_cast<float4*>(a.fout + e0)[q] =
              make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
        }
      } else {
#pragma unroll
        for (int e = 0; e < kUnit; ++e) {
          if (e < n) a.fout[e0 + e] = v[e];
        }
      }
    }
  }
}

template <DType W, CodecOp Op>
__global__ void __launch_bounds__(kThreads) codec_kernel(CodecArgs a) {
  if constexpr (sizeof(typename WireTraits<W>::Code) == 1 && !CodecOpTraits<Op>::kWritesWire) {
    codec_fp8<W, Op>(a);
  } else {
    codec_units<W, Op>(a);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

using KernelFn = void (*)(CodecArgs);

template <CodecOp Op>
KernelFn pick(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return &codec_kernel<DType::kFloat16, Op>;
    case DType::kBFloat16: return &codec_kernel<DType::kBFloat16, Op>;
    case DType::kFloat8E4M3: return &codec_kernel<DType::kFloat8E4M3, Op>;
    default: return &codec_kernel<DType::kFloat8E5M2, Op>;
  }
}

template <CodecOp Op>
Status launch(const char* caller, float* fout, const float* fin, void* wout, const void* const* win,
              int nwin, size_t count, WireFormat fmt, Scale scale, void* stream) {
  KOLO_TRY(check_codec_inputs(caller, fout, fin, wout, win, nwin, count, fmt, scale));
  if (count == 0) return Status::ok_status();
  const size_t soff = wire_scales_offset(fmt, count);
  CodecArgs a{};
  a.fout = fout;
  a.fin = fin;
  a.wout = wout;
  a.nwin = nwin;
  bool vec = (!fout || aligned16(fout)) && (!fin || aligned16(fin)) && (!wout || aligned16(wout));
  for (int k = 0; k < nwin; ++k) {
    a.win[k] = win[k];
    a.scales_in[k] = reinterpret_cast<const float*>(static_cast<const char*>(win[k]) + soff);
    vec = vec && aligned16(win[k]);
  }
  a.scales_out = wout ? reinterpret_cast<float*>(static_cast<char*>(wout) + soff) : nullptr;
  a.count = count;
  a.block = fmt.block;
  a.block_shift = fmt.block == 256 ? 8 : 7;
  a.m = static_cast<float>(scale.factor / static_cast<double>(scale.divisor));
  a.vec = vec;
  const size_t unit = 16 / dtype_size(fmt.dtype);
  const size_t nunits = (count + unit - 1) / unit;
  size_t blocks = (nunits + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  // The launch's own result (cudaGetLastError would also consume another library's
  // pending error and report it as ours).
  void* params[] = {&a};
  const cudaError_t err =
      cudaLaunchKernel(reinterpret_cast<const void*>(pick<Op>(fmt.dtype)), dim3(static_cast<unsigned>(blocks)),
                       dim3(kThreads), params, 0, static_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) {
    return error(Code::kSystem, caller, ": kernel launch failed: ", cudaGetErrorName(err), " (",
                 cudaGetErrorString(err), ")");
  }
  return Status::ok_status();
}

template <CodecOp Op>
Status launch(const char* caller, float* fout, const float* fin, void* wout, const void* win,
              size_t count, WireFormat fmt, Scale scale, void* stream) {
  return launch<Op>(caller, fout, fin, wout, &win, win != nullptr ? 1 : 0, count, fmt, scale, stream);
}

Status null_error(const char* caller, const char* name, size_t count) {
  return error(Code::kInvalidArgument, caller, ": ", name, " is null with count ", count);
}

}  // namespace

Status cuda_codec_preload() {
  for (DType d : {DType::kFloat16, DType::kBFloat16, DType::kFloat8E4M3, DType::kFloat8E5M2}) {
    for (KernelFn fn : {pick<CodecOp::kCompress>(d), pick<CodecOp::kDecompress>(d), pick<CodecOp::kDecompressReduce>(d),
                        pick<CodecOp::kDecompressReduceCompress>(d), pick<CodecOp::kRecompress>(d)}) {
      cudaFuncAttributes attributes;
      const cudaError_t err = cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(fn));
      if (err != cudaSuccess) {
        return error(Code::kSystem, "loading a codec kernel (", dtype_name(d), "): ", cudaGetErrorName(err), " (",
                     cudaGetErrorString(err), ")");
      }
    }
  }
  return Status::ok_status();
}

Status cuda_compress(void* wire, const float* src, size_t count, WireFormat fmt, Scale scale,
                     void* stream) {
  constexpr const char* kCaller = "cuda_compress";
  if (count > 0 && (!wire || !src)) return null_error(kCaller, !wire ? "wire" : "src", count);
  return launch<CodecOp::kCompress>(kCaller, nullptr, src, wire, nullptr, count, fmt, scale,
                                    stream);
}

Status cuda_decompress(float* dst, const void* wire, size_t count, WireFormat fmt, Scale scale,
                       void* stream) {
  constexpr const char* kCaller = "cuda_decompress";
  if (count > 0 && (!wire || !dst)) return null_error(kCaller, !wire ? "wire" : "dst", count);
  return launch<CodecOp::kDecompress>(kCaller, dst, nullptr, nullptr, wire, count, fmt, scale,
                                      stream);
}

Status cuda_decompress_reduce(float* acc, const void* wire, size_t count, WireFormat fmt,
                              Scale scale, void* stream) {
  constexpr const char* kCaller = "cuda_decompress_reduce";
  if (count > 0 && (!wire || !acc)) return null_error(kCaller, !wire ? "wire" : "acc", count);
  return launch<CodecOp::kDecompressReduce>(kCaller, acc, acc, nullptr, wire, count, fmt,
                                            scale, stream);
}

Status cuda_decompress_reduce_compress(void* wire_out, const float* acc, const void* wire_in,
                                       size_t count, WireFormat fmt, Scale scale,
                                       void* stream) {
  constexpr const char* kCaller = "cuda_decompress_reduce_compress";
  if (count > 0 && (!wire_out || !acc || !wire_in)) {
    return null_error(kCaller, !wire_out ? "wire_out" : (!acc ? "acc" : "wire_in"), count);
  }
  return launch<CodecOp::kDecompressReduceCompress>(kCaller, nullptr, acc, wire_out, wire_in,
                                                    count, fmt, scale, stream);
}

Status cuda_decompress_sum(float* dst, const void* const* wires, int nwires, size_t count,
                           WireFormat fmt, Scale scale, void* stream) {
  constexpr const char* kCaller = "cuda_decompress_sum";
  if (count > 0 && !dst) return null_error(kCaller, "dst", count);
  if (nwires < 1) return error(Code::kInvalidArgument, kCaller, ": ", nwires, " wire inputs (1..", kMaxWireInputs, ")");
  return launch<CodecOp::kDecompress>(kCaller, dst, nullptr, nullptr, wires, nwires, count, fmt, scale, stream);
}

Status cuda_recompress_sum(void* wire_out, const void* const* wires, int nwires, size_t count,
                           WireFormat fmt, Scale scale, void* stream) {
  constexpr const char* kCaller = "cuda_recompress_sum";
  if (count > 0 && !wire_out) return null_error(kCaller, "wire_out", count);
  if (nwires < 1) return error(Code::kInvalidArgument, kCaller, ": ", nwires, " wire inputs (1..", kMaxWireInputs, ")");
  return launch<CodecOp::kRecompress>(kCaller, nullptr, nullptr, wire_out, wires, nwires, count, fmt, scale, stream);
}

}  // namespace kolo
