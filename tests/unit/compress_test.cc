// Tests for the host codec functions (kernels/compress.h): every op x wire format against
// a float64 reference (a decoder written from the format definitions, not the code under
// test), with tails, misaligned pointers, scaling, the fp8 block rules for zero and
// non-finite blocks, and the argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/compress.h"
#include "kernels/float_types.h"

namespace kolo {
namespace {

struct Fmt {
  const char* name;
  WireFormat wire;
  int exp_bits, man_bits;
  bool ieee_top;    // all-ones exponent is inf/NaN (else only all-ones pattern is NaN)
  double fp8_max;   // 0 for unblocked formats
};

const Fmt kFmts[] = {
    {"fp16", {DType::kFloat16, 0}, 5, 10, true, 0},
    {"bf16", {DType::kBFloat16, 0}, 8, 7, true, 0},
    {"e4m3/128", {DType::kFloat8E4M3, 128}, 4, 3, false, 448},
    {"e4m3/256", {DType::kFloat8E4M3, 256}, 4, 3, false, 448},
    {"e5m2/128", {DType::kFloat8E5M2, 128}, 5, 2, true, 57344},
    {"e5m2/256", {DType::kFloat8E5M2, 256}, 5, 2, true, 57344},
};

size_t code_size(const Fmt& f) { return f.fp8_max > 0 ? 1 : 2; }
int bias(const Fmt& f) { return (1 << (f.exp_bits - 1)) - 1; }
// Unit roundoff and smallest subnormal of the format.
double unit_roundoff(const Fmt& f) { return std::ldexp(1.0, -f.man_bits - 1); }
double min_subnormal(const Fmt& f) { return std::ldexp(1.0, 1 - bias(f) - f.man_bits); }

double ref_decode(const Fmt& f, uint32_t bits) {
  const uint32_t sign_bit = 1u << (f.exp_bits + f.man_bits);
  const uint32_t abs = bits & (sign_bit - 1);
  const int exp = static_cast<int>(abs >> f.man_bits);
  const uint32_t man = abs & ((1u << f.man_bits) - 1);
  const int exp_max = (1 << f.exp_bits) - 1;
  double v;
  if (f.ieee_top && exp == exp_max) {
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (!f.ieee_top && exp == exp_max && man == (1u << f.man_bits) - 1) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(man), 1 - bias(f) - f.man_bits);
  } else {
    v = std::ldexp(static_cast<double>(man + (1u << f.man_bits)), exp - bias(f) - f.man_bits);
  }
  return (bits & sign_bit) ? -v : v;
}

uint32_t code_at(const Fmt& f, const uint8_t* wire, size_t i) {
  if (code_size(f) == 1) return wire[i];
  uint16_t c;
  std::memcpy(&c, wire + 2 * i, 2);
  return c;
}

float scale_at(const Fmt& f, const uint8_t* wire, size_t count, size_t i) {
  float s;
  std::memcpy(&s, wire + wire_scales_offset(f.wire, count) + 4 * (i / f.wire.block), 4);
  return s;
}

// A finite, non-NaN random code (a valid wire value) that is never zero.
uint32_t random_code(const Fmt& f, std::mt19937& rng) {
  const uint32_t n = 1u << (1 + f.exp_bits + f.man_bits);
  for (;;) {
    const uint32_t c = rng() % n;
    const double d = ref_decode(f, c);
    // Keep fp16/bf16 wire values moderate so that m * (acc + dec) stays finite.
    if (std::isfinite(d) && d != 0 && std::fabs(d) < 1e4) return c;
  }
}

// Random fp32 value, never zero: random sign, magnitude log-uniform in [2^lo, 2^hi).
float random_value(std::mt19937& rng, int lo, int hi) {
  std::uniform_real_distribution<double> e(lo, hi);
  const double v = std::exp2(e(rng));
  return static_cast<float>(rng() & 1 ? -v : v);
}

enum class Op { kCompress, kDecompress, kDecompressReduce, kDrc };
const char* op_name(Op op) {
  switch (op) {
    case Op::kCompress: return "compress";
    case Op::kDecompress: return "decompress";
    case Op::kDecompressReduce: return "decompress_reduce";
    default: return "decompress_reduce_compress";
  }
}

// Runs one case; buffers are offset by `misalign` elements from 16-byte aligned storage,
// and guard bytes past the end must come back untouched.
void check_case(const Fmt& f, Op op, size_t count, size_t misalign, Scale scale, uint32_t seed) {
  SCOPED_TRACE(std::string(f.name) + " " + op_name(op) + " count " + std::to_string(count) +
               " misalign " + std::to_string(misalign) + " m " +
               std::to_string(scale.factor / scale.divisor));
  std::mt19937 rng(seed);
  const size_t wbytes = wire_bytes(f.wire, count);
  const size_t wshift = misalign * (code_size(f) == 1 ? 4 : 2);
  constexpr size_t kGuard = 64;
  constexpr uint8_t kPoison = 0xA5;
  std::vector<float> fbuf(count + misalign + kGuard), acc0;
  std::vector<uint8_t> win_buf(wbytes + wshift + kGuard, kPoison);
  std::vector<uint8_t> wout_buf(wbytes + wshift + kGuard, kPoison);
  float* fptr = fbuf.data() + misalign;
  uint8_t* win = win_buf.data() + wshift;
  uint8_t* wout = wout_buf.data() + wshift;
  std::memset(fbuf.data(), kPoison, fbuf.size() * sizeof(float));

  // fp8 blocks get different magnitudes so that the scales differ from block to block.
  for (size_t i = 0; i < count; ++i) {
    const int shift = f.fp8_max > 0 ? static_cast<int>((i / f.wire.block) % 7) * 3 - 9 : 0;
    fptr[i] = random_value(rng, shift - 8, shift + 8);
  }
  if (op != Op::kCompress) {
    for (size_t i = 0; i < count; ++i) {
      const uint32_t c = random_code(f, rng);
      std::memcpy(win + i * code_size(f), &c, code_size(f));
    }
    if (f.fp8_max > 0) {
      for (size_t b = 0; b < (count + f.wire.block - 1) / f.wire.block; ++b) {
        const float s = std::fabs(random_value(rng, -12, 4));
        std::memcpy(win + wire_scales_offset(f.wire, count) + 4 * b, &s, 4);
      }
    }
  }
  acc0.assign(fptr, fptr + count);
  if (op == Op::kDecompress) std::memset(fptr, kPoison, count * sizeof(float));

  Status st;
  switch (op) {
    case Op::kCompress: st = compress(wout, fptr, count, f.wire, scale); break;
    case Op::kDecompress: st = decompress(fptr, win, count, f.wire, scale); break;
    case Op::kDecompressReduce: st = decompress_reduce(fptr, win, count, f.wire, scale); break;
    case Op::kDrc:
      st = decompress_reduce_compress(wout, fptr, win, count, f.wire, scale);
      break;
  }
  ASSERT_TRUE(st.ok()) << st.to_string();

  const double m = static_cast<float>(scale.factor / static_cast<double>(scale.divisor));
  // Exact value per element, and a bound on the fp32 rounding of getting there (at most
  // three fp32 roundings: decode * block scale, add, multiply by m).
  std::vector<double> exact(count), slack(count);
  for (size_t i = 0; i < count; ++i) {
    double dec = 0;
    if (op != Op::kCompress) {
      dec = ref_decode(f, code_at(f, win, i));
      if (f.fp8_max > 0) dec *= scale_at(f, win, count, i);
    }
    const double a = op == Op::kDecompress ? 0.0 : acc0[i];
    exact[i] = m * (a + dec);
    slack[i] = std::ldexp(std::fabs(m) * (std::fabs(a) + std::fabs(dec)), -22) + 1e-40;
  }

  if (op == Op::kDecompress || op == Op::kDecompressReduce) {
    for (size_t i = 0; i < count; ++i) {
      ASSERT_LE(std::fabs(fptr[i] - exact[i]), slack[i]) << "element " << i;
    }
    for (size_t i = count; i < count + kGuard; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &fptr[i], 4);
      ASSERT_EQ(bits, 0xA5A5A5A5u) << "guard element " << i << " overwritten";
    }
    return;
  }

  // Wire output: decode it with the reference decoder and bound the error by one rounding
  // in the wire format (relative, or half its smallest subnormal times the block scale).
  const double u = unit_roundoff(f);
  for (size_t i = 0; i < count; ++i) {
    double block_scale = 1.0;
    if (f.fp8_max > 0) {
      const size_t b0 = i / f.wire.block * f.wire.block;
      double amax = 0;
      for (size_t j = b0; j < std::min(count, b0 + f.wire.block); ++j) {
        amax = std::max(amax, std::fabs(exact[j]));
      }
      block_scale = scale_at(f, wout, count, i);
      ASSERT_NEAR(block_scale, amax / f.fp8_max, std::ldexp(amax / f.fp8_max, -21))
          << "scale of block " << i / f.wire.block;
    }
    const double got = ref_decode(f, code_at(f, wout, i)) * block_scale;
    const double tol = u * std::fabs(exact[i]) + 0.5 * min_subnormal(f) * block_scale +
                       slack[i] * (1 + u);
    ASSERT_LE(std::fabs(got - exact[i]), tol) << "element " << i << " exact " << exact[i];
  }
  // Past the codes (and, for fp8, between codes and scales and past the scales): untouched.
  const size_t codes_end = count * code_size(f);
  const size_t pad_end = f.fp8_max > 0 ? wire_scales_offset(f.wire, count) : codes_end;
  for (size_t i = codes_end; i < pad_end; ++i) ASSERT_EQ(wout[i], kPoison) << "pad byte " << i;
  for (size_t i = wbytes; i < wbytes + kGuard; ++i) {
    ASSERT_EQ(wout[i], kPoison) << "guard byte " << i;
  }
}

TEST(CompressHost, EveryOpAndFormatAgainstFloat64) {
  const size_t counts[] = {1, 7, 8, 15, 16, 17, 127, 128, 129, 255, 256, 257, 1000, 1031};
  const Scale scales[] = {Scale{}, Scale{2.0, 3}};
  uint32_t seed = 1;
  for (const Fmt& f : kFmts) {
    for (Op op : {Op::kCompress, Op::kDecompress, Op::kDecompressReduce, Op::kDrc}) {
      for (size_t count : counts) {
        for (size_t misalign : {0, 1}) {
          for (const Scale& sc : scales) {
            check_case(f, op, count, misalign, sc, seed++);
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

TEST(CompressHost, Layout) {
  EXPECT_EQ(wire_bytes({DType::kFloat16, 0}, 5), 10u);
  EXPECT_EQ(wire_scales_offset({DType::kFloat16, 0}, 5), 0u);
  EXPECT_EQ(wire_scales_offset({DType::kFloat8E4M3, 128}, 5), 16u);
  EXPECT_EQ(wire_bytes({DType::kFloat8E4M3, 128}, 5), 20u);
  EXPECT_EQ(wire_bytes({DType::kFloat8E4M3, 128}, 256), 256u + 8u);
  EXPECT_EQ(wire_bytes({DType::kFloat8E5M2, 256}, 257), 272u + 8u);
}

// fp8 block rules: an all-zero block has scale 0 and decodes to zeros; a block with a NaN
// or inf has scale NaN and decodes to NaN throughout; other blocks are unaffected.
TEST(CompressHost, Fp8ZeroAndNonFiniteBlocks) {
  for (DType d : {DType::kFloat8E4M3, DType::kFloat8E5M2}) {
    const WireFormat wf{d, 128};
    constexpr size_t kCount = 128 * 5;
    std::vector<float> src(kCount, 0.0f), out(kCount, 7.0f);
    for (size_t i = 128; i < kCount; ++i) src[i] = 0.25f + static_cast<float>(i % 13);
    src[2 * 128 + 5] = std::numeric_limits<float>::quiet_NaN();
    src[3 * 128 + 9] = -std::numeric_limits<float>::infinity();
    for (size_t i = 4 * 128; i < kCount; ++i) src[i] = 1e-31f;  // below 2^-100: flushed
    std::vector<uint8_t> wire(wire_bytes(wf, kCount));
    ASSERT_TRUE(compress(wire.data(), src.data(), kCount, wf, Scale{}).ok());
    ASSERT_TRUE(decompress(out.data(), wire.data(), kCount, wf, Scale{}).ok());
    float scales[5];
    std::memcpy(scales, wire.data() + wire_scales_offset(wf, kCount), sizeof(scales));
    EXPECT_EQ(scales[0], 0.0f);
    EXPECT_TRUE(std::isnan(scales[2]) && std::isnan(scales[3]));
    EXPECT_EQ(scales[4], 0.0f);
    for (size_t i = 0; i < 128; ++i) ASSERT_EQ(out[i], 0.0f) << i;
    for (size_t i = 128; i < 256; ++i) ASSERT_NEAR(out[i], src[i], src[i] / 8) << i;
    for (size_t i = 256; i < 512; ++i) ASSERT_TRUE(std::isnan(out[i])) << i;
    for (size_t i = 512; i < kCount; ++i) ASSERT_EQ(out[i], 0.0f) << i;
    // The block's largest magnitude is encoded exactly as the format's max.
    EXPECT_NEAR(out[142], src[142], 1e-5);
  }
}

TEST(CompressHost, Fp16OverflowAndNaNAndExactRoundTrip) {
  const WireFormat wf{DType::kFloat16, 0};
  std::vector<float> src = {1e5f, -1e5f, std::numeric_limits<float>::quiet_NaN(), 0.5f,
                            -3.0f, 65504.0f, 5.9604645e-08f, -0.0f};
  std::vector<uint16_t> wire(src.size());
  std::vector<float> out(src.size());
  ASSERT_TRUE(compress(wire.data(), src.data(), src.size(), wf, Scale{}).ok());
  ASSERT_TRUE(decompress(out.data(), wire.data(), src.size(), wf, Scale{}).ok());
  EXPECT_EQ(out[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(out[1], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(out[2]));
  for (size_t i = 3; i < src.size(); ++i) EXPECT_EQ(float_to_bits(out[i]), float_to_bits(src[i]));
}

// The fp16 codecs (F16C on CPUs that have it) give the bits of the scalar conversions the
// device twins share: every fp16 code decoded, and floats of every class encoded (a
// stride through all 2^32 bit patterns, the boundaries of half's range, NaNs with
// payloads), in runs that cover the vector groups and their scalar tails.
TEST(CompressHost, Fp16CodecsMatchTheScalarConversionsBitForBit) {
  const WireFormat wf{DType::kFloat16, 0};
  std::vector<uint16_t> codes(65536);
  for (uint32_t c = 0; c < 65536; ++c) codes[c] = static_cast<uint16_t>(c);
  std::vector<float> decoded(codes.size());
  ASSERT_TRUE(decompress(decoded.data(), codes.data(), codes.size(), wf, Scale{}).ok());
  size_t wrong = 0;
  for (uint32_t c = 0; c < 65536; ++c) wrong += float_to_bits(decoded[c]) != float_to_bits(half_to_float(codes[c]));
  EXPECT_EQ(wrong, 0u) << "fp16 codes decoded differently from half_to_float";

  std::vector<float> src;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 7919) src.push_back(bits_to_float(static_cast<uint32_t>(bits)));
  for (float f : {65504.0f, 65519.99f, 65520.0f, 6.1035156e-05f, 6.0975552e-05f, 5.9604645e-08f, 2.9802322e-08f,
                  2.9802326e-08f, 1e-9f}) {
    src.push_back(f);
    src.push_back(-f);
  }
  for (uint32_t payload : {1u, 0x1fffu, 0x2000u, 0x3fffffu, 0x400000u, 0x7fffffu}) {
    src.push_back(bits_to_float(0x7f800000u | payload));
    src.push_back(bits_to_float(0xff800000u | payload));
  }
  for (size_t start : {size_t{0}, size_t{3}}) {  // vector groups aligned differently
    const size_t n = src.size() - start;
    std::vector<uint16_t> wire(n);
    ASSERT_TRUE(compress(wire.data(), src.data() + start, n, wf, Scale{}).ok());
    wrong = 0;
    for (size_t i = 0; i < n; ++i) wrong += wire[i] != float_to_half(src[start + i]);
    EXPECT_EQ(wrong, 0u) << "floats encoded differently from float_to_half (start " << start << ")";
  }
}

// Re-encoding where the chunk arrived gives the same bytes as a separate output buffer.
TEST(CompressHost, DecompressReduceCompressInPlace) {
  for (const Fmt& f : kFmts) {
    constexpr size_t kCount = 1000;
    std::mt19937 rng(7);
    std::vector<float> acc(kCount), src(kCount);
    for (auto& v : acc) v = random_value(rng, -4, 4);
    for (auto& v : src) v = random_value(rng, -4, 4);
    std::vector<uint8_t> in(wire_bytes(f.wire, kCount)), out(in.size());
    ASSERT_TRUE(compress(in.data(), src.data(), kCount, f.wire, Scale{}).ok());
    ASSERT_TRUE(
        decompress_reduce_compress(out.data(), acc.data(), in.data(), kCount, f.wire, Scale{1, 2})
            .ok());
    ASSERT_TRUE(
        decompress_reduce_compress(in.data(), acc.data(), in.data(), kCount, f.wire, Scale{1, 2})
            .ok());
    EXPECT_EQ(in, out) << f.name;
  }
}

TEST(CompressHost, ArgumentErrors) {
  alignas(16) float f[64] = {};
  alignas(16) uint8_t w[256] = {};
  const WireFormat fp16{DType::kFloat16, 0};
  const WireFormat e4{DType::kFloat8E4M3, 128};
  auto expect_invalid = [](const Status& st, const std::string& words) {
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.to_string();
    EXPECT_NE(st.message().find(words), std::string::npos) << st.message();
  };
  expect_invalid(compress(w, f, 8, {DType::kFloat32, 0}, Scale{}), "wire dtype 8");
  expect_invalid(compress(w, f, 8, {DType::kFloat8E4M3, 100}, Scale{}), "fp8 block 100");
  expect_invalid(compress(w, f, 8, {DType::kFloat16, 128}, Scale{}), "block 128 given for half");
  expect_invalid(compress(w, f, 8, fp16, Scale{INFINITY, 1}), "scale factor inf");
  expect_invalid(compress(w, f, 8, fp16, Scale{1, 0}), "scale divisor 0");
  expect_invalid(compress(nullptr, f, 8, fp16, Scale{}), "wire is null with count 8");
  expect_invalid(decompress(f, w + 1, 8, fp16, Scale{}), "wire_in");
  expect_invalid(compress(w + 2, f, 8, e4, Scale{}), "not aligned to 4 bytes");
  expect_invalid(decompress(reinterpret_cast<float*>(w), w, 8, fp16, Scale{}), "overlaps");
  expect_invalid(decompress_reduce_compress(w + 4, f, w, 8, fp16, Scale{}), "overlaps");
  EXPECT_TRUE(compress(nullptr, nullptr, 0, fp16, Scale{}).ok());
  EXPECT_TRUE(decompress_reduce(f, w, 8, e4, Scale{}).ok());
}

// The direct sums equal the chain of single-input steps they replace, bit for bit (same
// order of fp32 additions), for every format and 1..8 inputs; errors name the input.
TEST(CompressHost, SumsOfSeveralWires) {
  for (const Fmt& f : kFmts) {
    constexpr size_t kCount = 777;  // a short last fp8 block and a tail
    std::mt19937 rng(11);
    std::vector<std::vector<uint8_t>> wires(kMaxWireInputs, std::vector<uint8_t>(wire_bytes(f.wire, kCount)));
    std::vector<const void*> ptrs;
    for (auto& w : wires) {
      std::vector<float> src(kCount);
      for (auto& v : src) v = random_value(rng, -4, 4);
      ASSERT_TRUE(compress(w.data(), src.data(), kCount, f.wire, Scale{}).ok());
      ptrs.push_back(w.data());
    }
    const Scale post{1, 3};
    for (int n = 1; n <= kMaxWireInputs; ++n) {
      // Chain: acc = decode(w0); acc = acc + decode(wk) ...; the last step scaled.
      std::vector<float> chain(kCount), sum(kCount);
      ASSERT_TRUE(decompress(chain.data(), ptrs[0], kCount, f.wire, n == 1 ? post : Scale{}).ok());
      for (int k = 1; k < n; ++k) {
        ASSERT_TRUE(decompress_reduce(chain.data(), ptrs[k], kCount, f.wire, k == n - 1 ? post : Scale{}).ok());
      }
      ASSERT_TRUE(decompress_sum(sum.data(), ptrs.data(), n, kCount, f.wire, post).ok());
      for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(float_to_bits(sum[i]), float_to_bits(chain[i])) << f.name << " " << n << " " << i;
      // recompress_sum = compress(decompress_sum).
      std::vector<uint8_t> re(wire_bytes(f.wire, kCount)), ref(re.size());
      ASSERT_TRUE(recompress_sum(re.data(), ptrs.data(), n, kCount, f.wire, Scale{}).ok());
      std::vector<float> plain(kCount);
      ASSERT_TRUE(decompress_sum(plain.data(), ptrs.data(), n, kCount, f.wire, Scale{}).ok());
      ASSERT_TRUE(compress(ref.data(), plain.data(), kCount, f.wire, post).ok());
      std::vector<uint8_t> re_post(re.size());
      ASSERT_TRUE(recompress_sum(re_post.data(), ptrs.data(), n, kCount, f.wire, post).ok());
      EXPECT_EQ(re_post, ref) << f.name << " " << n;
    }
  }
  alignas(16) float out[64] = {};
  alignas(16) uint8_t w[256] = {};
  const void* none[2] = {w, nullptr};
  const WireFormat fp16{DType::kFloat16, 0};
  EXPECT_NE(decompress_sum(out, none, 2, 8, fp16, Scale{}).message().find("wire input 1 is null"), std::string::npos);
  EXPECT_EQ(decompress_sum(out, none, 0, 8, fp16, Scale{}).code(), Code::kInvalidArgument);
  EXPECT_EQ(recompress_sum(w, none, 9, 8, fp16, Scale{}).code(), Code::kInvalidArgument);
  const void* self[1] = {w};
  EXPECT_NE(recompress_sum(w + 2, self, 1, 8, fp16, Scale{}).message().find("overlaps"), std::string::npos);
}

}  // namespace
}  // namespace kolo
