// Wire compression for reductions: fp32 values travel as fp16, bf16 or block-scaled fp8,
// and accumulate in fp32. Host implementations (the twins of the CUDA kernels declared in
// kernels/cuda_kernels.h); the per-element math is kernels/compress_math.h.
//
// Wire layout of `count` values (one buffer, what a transport sends):
//   fp16 / bf16   count 2-byte codes.
//   fp8           count 1-byte codes, padding up to a multiple of 16 bytes (never written
//                 nor read, so 16-byte aligned buffers keep the scales aligned), then
//                 ceil(count / block) fp32 scales, one per block of `block` consecutive
//                 values (the last block may be short). Value i = decode(code i) *
//                 scales[i / block]. The block grid starts at the buffer's first value.
// wire_bytes() gives the size; wire_scales_offset() where the scales start.
#pragma once

#include <cstddef>

#include "kernels/dtype.h"
#include "support/status.h"

namespace kolo {

struct WireFormat {
  DType dtype = DType::kFloat16;  // kFloat16, kBFloat16, kFloat8E4M3 or kFloat8E5M2
  int block = 0;                  // fp8: 128 or 256 values per scale; fp16/bf16: 0
};

// The format kolo carries a wire dtype in: fp8 with one scale per 128 values.
constexpr int kWireFp8Block = 128;
inline WireFormat wire_format(DType wire) {
  const bool fp8 = wire == DType::kFloat8E4M3 || wire == DType::kFloat8E5M2;
  return WireFormat{wire, fp8 ? kWireFp8Block : 0};
}

// Byte offset of the fp8 scales within a wire buffer of count values (0 for fp16/bf16).
size_t wire_scales_offset(WireFormat fmt, size_t count);
// Total bytes of a wire buffer of count values.
size_t wire_bytes(WireFormat fmt, size_t count);

// wire = encode(scale * src). src is fp32, 4-byte aligned; wire is aligned to the code
// size (fp16/bf16) or to 4 bytes (fp8, for its scales). No overlap between the two.
Status compress(void* wire, const float* src, size_t count, WireFormat fmt, Scale scale);

// dst = scale * decode(wire).
Status decompress(float* dst, const void* wire, size_t count, WireFormat fmt, Scale scale);

// acc = scale * (acc + decode(wire)): one receive step of a compressed reduce-scatter
// (Scale{} for a plain acc += decode(wire)).
Status decompress_reduce(float* acc, const void* wire, size_t count, WireFormat fmt,
                         Scale scale);

// wire_out = encode(scale * (acc + decode(wire_in))): a receive-and-forward step. acc is
// left unchanged. wire_out may be wire_in (in place) but must not partly overlap it.
Status decompress_reduce_compress(void* wire_out, const float* acc, const void* wire_in,
                                  size_t count, WireFormat fmt, Scale scale);

// Direct reduction of several ranks' wire buffers (each count values, same format), their
// decoded values added in fp32 in input order, so every rank that sums the same inputs gets
// the same bits: dst = scale * sum_k decode(wires[k]), or wire_out = encode(that).
// 1 <= nwires <= kMaxWireInputs; the outputs may not overlap any input.
constexpr int kMaxWireInputs = 8;
Status decompress_sum(float* dst, const void* const* wires, int nwires, size_t count,
                      WireFormat fmt, Scale scale);
Status recompress_sum(void* wire_out, const void* const* wires, int nwires, size_t count,
                      WireFormat fmt, Scale scale);
// decompress_sum for any number of wires (host only): kMaxWireInputs in one pass, then one
// more per pass, still in input order, so the bits are those of one pass over them all.
Status decompress_sum_all(float* dst, const void* const* wires, int nwires, size_t count,
                          WireFormat fmt, Scale scale);

// The checks shared by the host functions and the CUDA launchers (same words for the
// same mistakes): wire dtype and block, scale (finite factor, divisor >= 1), and with
// count > 0 null, misaligned and overlapping pointers. Pass nullptr for unused pointers;
// wire_in == wire_out is allowed.
Status check_codec_args(const char* caller, float* fout, const float* fin, void* wout,
                        const void* win, size_t count, WireFormat fmt, Scale scale);
// The same with 0..kMaxWireInputs wire inputs (each checked against the outputs).
Status check_codec_inputs(const char* caller, float* fout, const float* fin, void* wout,
                          const void* const* win, int nwin, size_t count, WireFormat fmt,
                          Scale scale);

}  // namespace kolo
