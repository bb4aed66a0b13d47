// Tests for kernels/: the narrow-float conversions against a brute-force reference built
// from the format definitions (not from the code under test), and reduce_into/scale_copy
// for every dtype x op x input count against a float64 / exact-integer reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/adasum_math.h"
#include "kernels/dtype.h"
#include "kernels/float_types.h"
#include "kernels/functors.h"
#include "kernels/host_kernels.h"
#include "kernels_ref.h"

namespace kolo {
namespace {

struct Conv {
  const char* name;
  RefFormat fmt;
  float (*to_float)(uint32_t);
  uint32_t (*from_float)(float);
};

const Conv kConvs[] = {
    {"fp16", kFp16, [](uint32_t h) { return half_to_float(static_cast<uint16_t>(h)); },
     [](float f) -> uint32_t { return float_to_half(f); }},
    {"bf16", kBf16, [](uint32_t h) { return bf16_to_float(static_cast<uint16_t>(h)); },
     [](float f) -> uint32_t { return float_to_bf16(f); }},
    {"e4m3", kE4m3, [](uint32_t h) { return fp8_e4m3_to_float(static_cast<uint8_t>(h)); },
     [](float f) -> uint32_t { return float_to_fp8_e4m3(f); }},
    {"e5m2", kE5m2, [](uint32_t h) { return fp8_e5m2_to_float(static_cast<uint8_t>(h)); },
     [](float f) -> uint32_t { return float_to_fp8_e5m2(f); }},
};

TEST(FloatTypes, DecodeEveryPatternExactly) {
  for (const Conv& c : kConvs) {
    const uint32_t npatterns = c.fmt.sign_bit() << 1;
    for (uint32_t p = 0; p < npatterns; ++p) {
      const double want = ref_decode(c.fmt, p);
      const float got = c.to_float(p);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got)) << c.name << " pattern " << p;
        ASSERT_EQ(std::signbit(got), (p & c.fmt.sign_bit()) != 0) << c.name << " " << p;
      } else {
        ASSERT_EQ(float_to_bits(got), float_to_bits(static_cast<float>(want)))
            << c.name << " pattern " << p;
      }
    }
  }
}

TEST(FloatTypes, RoundTripEveryPattern) {
  for (const Conv& c : kConvs) {
    const uint32_t npatterns = c.fmt.sign_bit() << 1;
    for (uint32_t p = 0; p < npatterns; ++p) {
      const float f = c.to_float(p);
      const uint32_t back = c.from_float(f);
      if (std::isnan(f)) {
        ASSERT_TRUE(std::isnan(c.to_float(back))) << c.name << " NaN pattern " << p;
      } else {
        ASSERT_EQ(back, p) << c.name << " pattern " << p;
      }
    }
  }
}

void check_encode(const Conv& c, const RefEncoder& ref, float x) {
  bool nan = false;
  const uint32_t want = ref.encode(x, &nan);
  const uint32_t got = c.from_float(x);
  if (nan) {
    ASSERT_TRUE(std::isnan(c.to_float(got))) << c.name << " input bits " << float_to_bits(x);
  } else {
    ASSERT_EQ(got, want) << c.name << " input " << x << " (bits 0x" << std::hex << float_to_bits(x)
                         << ")";
  }
}

// Every representable value, every midpoint (the ties), one float ulp either side of each
// midpoint, and random float bit patterns over the whole range.
TEST(FloatTypes, EncodeMatchesNearestEvenReference) {
  std::mt19937 rng(12345);
  for (const Conv& c : kConvs) {
    const RefEncoder ref(c.fmt);
    const auto& t = ref.table();
    for (size_t i = 0; i < t.size(); ++i) {
      for (float sign : {1.0f, -1.0f}) {
        check_encode(c, ref, sign * static_cast<float>(t[i].first));
        if (i + 1 == t.size()) continue;
        const float mid = static_cast<float>((t[i].first + t[i + 1].first) / 2);
        ASSERT_EQ(static_cast<double>(mid), (t[i].first + t[i + 1].first) / 2);
        check_encode(c, ref, sign * mid);
        check_encode(c, ref, sign * std::nextafter(mid, 0.0f));
        check_encode(c, ref, sign * std::nextafter(mid, INFINITY));
      }
    }
    for (int i = 0; i < 200000; ++i) check_encode(c, ref, bits_to_float(rng()));
    for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN,
                    std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                    std::numeric_limits<float>::denorm_min(), -1e-45f, 1e-40f}) {
      check_encode(c, ref, x);
    }
  }
}

TEST(FloatTypes, EdgeCasesByHand) {
  // fp16
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);   // max + half ulp: ties to even = inf
  EXPECT_EQ(float_to_half(-1e9f), 0xfc00);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // half of it: tie to even (0)
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 units: tie to even (2)
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie, even stays
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie, odd rounds up
  EXPECT_EQ(float_to_half(std::ldexp(1023.5f, -24)), 0x0400);  // subnormal up to normal
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(half_to_float(0x7c00), INFINITY);
  // bf16
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_EQ(float_to_bf16(bits_to_float(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(float_to_bf16(bits_to_float(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(float_to_bf16(bits_to_float(0x00008000u)), 0x0000);  // float subnormal tie
  EXPECT_EQ(float_to_bf16(bits_to_float(0x00018000u)), 0x0002);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(bits_to_float(0x7f800001u)))));
  // e4m3: max 448, no inf, saturates; NaN is 0x7f / 0xff
  EXPECT_EQ(float_to_fp8_e4m3(448.0f), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3(464.0f), 0x7e);  // tie between 448 and (NaN slot): 448
  EXPECT_EQ(float_to_fp8_e4m3(480.0f), 0x7e);  // saturates
  EXPECT_EQ(float_to_fp8_e4m3(1e30f), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3(INFINITY), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3(-INFINITY), 0xfe);
  EXPECT_EQ(float_to_fp8_e4m3(NAN), 0x7f);
  EXPECT_EQ(float_to_fp8_e4m3(-NAN), 0xff);
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(1.0f, -9)), 0x01);   // smallest subnormal
  EXPECT_EQ(float_to_fp8_e4m3(std::ldexp(1.0f, -10)), 0x00);  // tie to even
  EXPECT_EQ(float_to_fp8_e4m3(-0.0f), 0x80);
  EXPECT_EQ(fp8_e4m3_to_float(0x7e), 448.0f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0xff)));
  EXPECT_EQ(fp8_e4m3_to_float(0x78), 256.0f);  // all-ones exponent holds normal numbers
  // e5m2: max 57344, has inf
  EXPECT_EQ(float_to_fp8_e5m2(57344.0f), 0x7b);
  EXPECT_EQ(float_to_fp8_e5m2(61439.0f), 0x7b);
  EXPECT_EQ(float_to_fp8_e5m2(61440.0f), 0x7c);  // max + half ulp: inf
  EXPECT_EQ(float_to_fp8_e5m2(-INFINITY), 0xfc);
  EXPECT_EQ(float_to_fp8_e5m2(std::ldexp(1.0f, -16)), 0x01);
  EXPECT_TRUE(std::isnan(fp8_e5m2_to_float(float_to_fp8_e5m2(NAN))));
  EXPECT_EQ(fp8_e5m2_to_float(0x7c), INFINITY);
}

TEST(Functors, IntegerWrapAndNanPropagation) {
  EXPECT_EQ(SumFn<int8_t>()(127, 1), -128);
  EXPECT_EQ(ProdFn<int8_t>()(-128, -1), -128);
  EXPECT_EQ(ProdFn<uint8_t>()(255, 255), 1);
  EXPECT_EQ(SumFn<int64_t>()(std::numeric_limits<int64_t>::max(), 1),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(ProdFn<int32_t>()(65536, 65536), 0);
  EXPECT_TRUE(std::isnan(MinFn<float>()(NAN, 1.0f)));
  EXPECT_TRUE(std::isnan(MinFn<float>()(1.0f, NAN)));
  EXPECT_TRUE(std::isnan(MaxFn<double>()(NAN, 1.0)));
  EXPECT_TRUE(std::isnan(MaxFn<double>()(1.0, NAN)));
  EXPECT_EQ(MinFn<float>()(-INFINITY, 1.0f), -INFINITY);
}

TEST(DType, NamesAndSizes) {
  const char* names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                         "half", "bfloat16", "float", "double", "f8e4m3", "f8e5m2"};
  const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 1, 1};
  for (int d = 0; d < static_cast<int>(DType::kCount); ++d) {
    EXPECT_STREQ(dtype_name(DType(d)), names[d]);
    EXPECT_EQ(dtype_size(DType(d)), sizes[d]);
    EXPECT_EQ(dtype_is_float(DType(d)), d >= static_cast<int>(DType::kFloat16));
  }
  EXPECT_EQ(dtype_size(DType::kCount), 0u);
  const char* ops[] = {"sum", "prod", "min", "max", "avg", "adasum"};
  for (int o = 0; o < static_cast<int>(ReduceOp::kCount); ++o) {
    EXPECT_STREQ(op_name(ReduceOp(o)), ops[o]);
  }
}

// ---------------------------------------------------------------------------------------
// reduce_into / scale_copy against a reference: exact integers with wrap semantics, and
// float64 rounded once to the dtype for floats (inputs are chosen so that the float
// compute is exact too, which makes the comparison bit-exact).

constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax};

bool is_int(DType d) { return !dtype_is_float(d); }
bool is_signed_int(DType d) {
  return d == DType::kInt8 || d == DType::kInt32 || d == DType::kInt64;
}
int bit_width(DType d) { return static_cast<int>(dtype_size(d)) * 8; }
uint64_t width_mask(DType d) {
  return bit_width(d) == 64 ? ~uint64_t{0} : (uint64_t{1} << bit_width(d)) - 1;
}

const RefFormat* narrow_format(DType d) {
  return d == DType::kFloat16 ? &kFp16 : d == DType::kBFloat16 ? &kBf16
       : d == DType::kFloat8E4M3 ? &kE4m3 : d == DType::kFloat8E5M2 ? &kE5m2 : nullptr;
}
const RefEncoder& encoder_for(const RefFormat* f) {  // built once: the tables are large
  static const RefEncoder fp16(kFp16), bf16(kBf16), e4m3(kE4m3), e5m2(kE5m2);
  return f == &kFp16 ? fp16 : f == &kBf16 ? bf16 : f == &kE4m3 ? e4m3 : e5m2;
}

uint64_t load_raw(const uint8_t* p, size_t i, size_t size) {
  uint64_t v = 0;
  std::memcpy(&v, p + i * size, size);  // little-endian host
  return v;
}
void store_raw(uint8_t* p, size_t i, size_t size, uint64_t v) {
  std::memcpy(p + i * size, &v, size);
}

int64_t sign_extend(uint64_t raw, int bits) {
  if (bits == 64) return static_cast<int64_t>(raw);
  const uint64_t m = uint64_t{1} << (bits - 1);
  return static_cast<int64_t>((raw ^ m) - m);
}

double float_value(DType d, uint64_t raw) {
  if (d == DType::kFloat32) return bits_to_float(static_cast<uint32_t>(raw));
  if (d == DType::kFloat64) {
    double v;
    std::memcpy(&v, &raw, sizeof(v));
    return v;
  }
  return ref_decode(*narrow_format(d), static_cast<uint32_t>(raw));
}

// The value rounded once to the dtype, as a bit pattern.
uint64_t float_raw(DType d, double v) {
  if (d == DType::kFloat32) return float_to_bits(static_cast<float>(v));
  if (d == DType::kFloat64) {
    uint64_t raw;
    std::memcpy(&raw, &v, sizeof(raw));
    return raw;
  }
  return encoder_for(narrow_format(d)).encode(v);
}

// Integers: sums and products in uint64 wrap modulo 2^64, which truncates to the same
// value modulo 2^bits. Min/max compare the real values.
uint64_t ref_int(DType d, ReduceOp op, const std::vector<uint64_t>& in, Scale scale) {
  const bool sgn = is_signed_int(d);
  const int bits = bit_width(d);
  auto value = [&](uint64_t raw) {
    return sgn ? static_cast<uint64_t>(sign_extend(raw, bits)) : raw;
  };
  auto less = [&](uint64_t a, uint64_t b) {
    return sgn ? static_cast<int64_t>(a) < static_cast<int64_t>(b) : a < b;
  };
  uint64_t acc = value(in[0]);
  for (size_t k = 1; k < in.size(); ++k) {
    const uint64_t v = value(in[k]);
    switch (op) {
      case ReduceOp::kSum: acc += v; break;
      case ReduceOp::kProd: acc *= v; break;
      case ReduceOp::kMin: acc = less(v, acc) ? v : acc; break;
      default: acc = less(acc, v) ? v : acc; break;
    }
  }
  acc = value(acc & width_mask(d));  // the wrapped result, as the kernel holds it
  if (scale.identity()) return acc & width_mask(d);
  if (scale.factor == 1.0) {  // C++ integer division truncates toward zero
    acc = sgn ? static_cast<uint64_t>(static_cast<int64_t>(acc) / scale.divisor)
              : acc / static_cast<uint64_t>(scale.divisor);
    return acc & width_mask(d);
  }
  const double x = (sgn ? static_cast<double>(static_cast<int64_t>(acc))
                        : static_cast<double>(acc)) * scale.factor / scale.divisor;
  const double t = std::trunc(x);
  const double lo = sgn ? -std::ldexp(1.0, bits - 1) : 0.0;
  const double hi = sgn ? std::ldexp(1.0, bits - 1) : std::ldexp(1.0, bits);
  if (t <= lo) return static_cast<uint64_t>(static_cast<int64_t>(lo)) & width_mask(d);
  if (t >= hi) return (sgn ? (width_mask(d) >> 1) : width_mask(d));
  return (sgn ? static_cast<uint64_t>(static_cast<int64_t>(t)) : static_cast<uint64_t>(t)) &
         width_mask(d);
}

double ref_float(ReduceOp op, const std::vector<double>& in, Scale scale) {
  double acc = in[0];
  for (size_t k = 1; k < in.size(); ++k) {
    const double v = in[k];
    switch (op) {
      case ReduceOp::kSum: acc += v; break;
      case ReduceOp::kProd: acc *= v; break;
      case ReduceOp::kMin: acc = (std::isnan(v) || v < acc) ? v : acc; break;
      default: acc = (std::isnan(v) || v > acc) ? v : acc; break;
    }
  }
  return scale.identity() ? acc : acc * scale.factor / static_cast<double>(scale.divisor);
}

// Random input patterns: any bits for integers; k/2 with |k| <= 7 for floats, which every
// format holds exactly and whose sums and 8-fold products (<= 7^8/2^8) float holds exactly.
uint64_t random_raw(DType d, std::mt19937_64& rng) {
  if (is_int(d)) return rng() & width_mask(d);
  const int k = static_cast<int>(rng() % 15) - 7;
  return float_raw(d, k / 2.0);
}

struct Case {
  DType dtype;
  ReduceOp op;
  int nsrcs;
  size_t count;
  Scale scale;
  bool in_place = false;
  bool misaligned = false;  // every pointer one element past an aligned allocation
};

std::string describe(const Case& c) {
  return str_cat(dtype_name(c.dtype), " ", op_name(c.op), " nsrcs=", c.nsrcs, " count=", c.count,
                 " scale=", c.scale.factor, "/", c.scale.divisor, c.in_place ? " in-place" : "",
                 c.misaligned ? " misaligned" : "");
}

void run_case(const Case& c, std::mt19937_64& rng) {
  SCOPED_TRACE(describe(c));
  const size_t es = dtype_size(c.dtype);
  const size_t off = c.misaligned ? 1 : 0;
  std::vector<std::vector<uint8_t>> bufs(c.nsrcs, std::vector<uint8_t>((c.count + 1) * es));
  std::vector<const void*> srcs;
  for (auto& b : bufs) {
    for (size_t i = 0; i < c.count; ++i) {
      store_raw(b.data() + off * es, i, es, random_raw(c.dtype, rng));
    }
    srcs.push_back(b.data() + off * es);
  }
  std::vector<uint64_t> want(c.count);
  for (size_t i = 0; i < c.count; ++i) {
    if (is_int(c.dtype)) {
      std::vector<uint64_t> in;
      for (const void* s : srcs) in.push_back(load_raw(static_cast<const uint8_t*>(s), i, es));
      want[i] = ref_int(c.dtype, c.op, in, c.scale);
    } else {
      std::vector<double> in;
      for (const void* s : srcs) {
        in.push_back(float_value(c.dtype, load_raw(static_cast<const uint8_t*>(s), i, es)));
      }
      want[i] = float_raw(c.dtype, ref_float(c.op, in, c.scale));
    }
  }
  std::vector<uint8_t> out((c.count + 1) * es, 0xab);
  uint8_t* dst = c.in_place ? bufs[0].data() + off * es : out.data() + off * es;
  const Status st = reduce_into(dst, srcs.data(), c.nsrcs, c.count, c.dtype, c.op, c.scale);
  ASSERT_TRUE(st.ok()) << st.to_string();
  for (size_t i = 0; i < c.count; ++i) {
    const uint64_t got = load_raw(dst, i, es);
    if (!is_int(c.dtype) && (c.op == ReduceOp::kMin || c.op == ReduceOp::kMax)) {
      // -0 and +0 compare equal, and either may win a min/max tie.
      ASSERT_EQ(float_value(c.dtype, got), float_value(c.dtype, want[i])) << "element " << i;
    } else {
      ASSERT_EQ(got, want[i]) << "element " << i;
    }
  }
  if (!c.in_place) {  // the guard element on the other side of the range is untouched
    const size_t guard = c.misaligned ? 0 : c.count;
    ASSERT_EQ(load_raw(out.data(), guard, es), width_mask(c.dtype) & 0xabababababababab);
  }
}

TEST(ReduceInto, EveryDtypeOpAndInputCount) {
  std::mt19937_64 rng(7);
  for (int d = 0; d < static_cast<int>(DType::kCount); ++d) {
    for (ReduceOp op : kOps) {
      for (int n = 1; n <= kMaxReduceInputs; ++n) {
        for (size_t count : {0, 1, 7, 1000, 1003}) {
          run_case({DType(d), op, n, count, Scale{}}, rng);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(ReduceInto, InPlaceAndMisaligned) {
  std::mt19937_64 rng(8);
  for (int d = 0; d < static_cast<int>(DType::kCount); ++d) {
    for (ReduceOp op : kOps) {
      for (int n : {1, 2, 3, 8}) {
        for (size_t count : {1, 7, 1003}) {
          run_case({DType(d), op, n, count, Scale{}, true, false}, rng);
          run_case({DType(d), op, n, count, Scale{}, false, true}, rng);
          run_case({DType(d), op, n, count, Scale{0.5, 2}, true, true}, rng);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// Scales whose multiplier is a power of two are exact in every float type, so floats
// compare bit-exactly; integers take every path: division, and factor through double.
TEST(ReduceInto, Scaled) {
  std::mt19937_64 rng(9);
  const Scale scales[] = {{1.0, 2}, {1.0, 3}, {1.0, 8}, {0.5, 1}, {3.0, 1}, {-1.0, 1},
                          {0.5, 4}, {2.0, 2}};
  for (int d = 0; d < static_cast<int>(DType::kCount); ++d) {
    for (const Scale& s : scales) {
      int exponent = 0;
      const bool power_of_two = std::fabs(std::frexp(s.factor / s.divisor, &exponent)) == 0.5;
      if (!is_int(DType(d)) && !power_of_two) continue;  // covered with a tolerance below
      for (ReduceOp op : kOps) {
        for (int n : {1, 2, 5, 8}) {
          run_case({DType(d), op, n, 1003, s}, rng);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(ReduceInto, IntegerScaleTruncatesTowardZero) {
  const int8_t a[] = {-7, 7, -128, 100, -1};
  const int8_t b[] = {0, 0, 0, 100, 0};
  const void* srcs[] = {a, b};
  int8_t out[5];
  ASSERT_TRUE(reduce_into(out, srcs, 2, 5, DType::kInt8, ReduceOp::kSum, {1.0, 3}).ok());
  EXPECT_EQ(out[0], -2);  // -7/3 = -2.33 -> -2
  EXPECT_EQ(out[1], 2);
  EXPECT_EQ(out[2], -42);
  EXPECT_EQ(out[3], -18);  // 200 wraps to -56 first, then -56/3 = -18
  EXPECT_EQ(out[4], 0);
  ASSERT_TRUE(reduce_into(out, srcs, 2, 5, DType::kInt8, ReduceOp::kSum, {0.5, 1}).ok());
  EXPECT_EQ(out[0], -3);   // -3.5 -> -3
  EXPECT_EQ(out[4], 0);    // -0.5 -> 0
  ASSERT_TRUE(reduce_into(out, srcs, 1, 5, DType::kInt8, ReduceOp::kSum, {3.0, 1}).ok());
  EXPECT_EQ(out[2], -128);  // saturates
  EXPECT_EQ(out[3], 127);
  const int64_t big[] = {std::numeric_limits<int64_t>::min() + 1, -9};
  int64_t big_out[2];
  const void* big_srcs[] = {big};
  ASSERT_TRUE(scale_copy(big_out, big, 2, DType::kInt64, {1.0, 2}).ok());
  EXPECT_EQ(big_out[0], (std::numeric_limits<int64_t>::min() + 1) / 2);
  EXPECT_EQ(big_out[1], -4);
  ASSERT_TRUE(reduce_into(big_out, big_srcs, 1, 2, DType::kInt64, ReduceOp::kMax, {1.0, 4}).ok());
  EXPECT_EQ(big_out[1], -2);
}

// A multiplier that is not a power of two rounds; float32 and narrow floats use one float
// multiplier, so compare with a tolerance of about one ulp of the dtype.
TEST(ReduceInto, ScaledInexactWithinOneUlp) {
  std::mt19937_64 rng(10);
  for (DType d : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64,
                  DType::kFloat8E4M3, DType::kFloat8E5M2}) {
    const size_t es = dtype_size(d), count = 1003;
    std::vector<uint8_t> a(count * es), b(count * es), out(count * es);
    for (size_t i = 0; i < count; ++i) {
      store_raw(a.data(), i, es, random_raw(d, rng));
      store_raw(b.data(), i, es, random_raw(d, rng));
    }
    const void* srcs[] = {a.data(), b.data()};
    ASSERT_TRUE(reduce_into(out.data(), srcs, 2, count, d, ReduceOp::kSum, {1.0, 3}).ok());
    const double rel = d == DType::kFloat64 ? 1e-15 : d == DType::kFloat32 ? 2e-7
                       : std::ldexp(1.0, -narrow_format(d)->man_bits);
    for (size_t i = 0; i < count; ++i) {
      const double want = (float_value(d, load_raw(a.data(), i, es)) +
                           float_value(d, load_raw(b.data(), i, es))) / 3.0;
      const double got = float_value(d, load_raw(out.data(), i, es));
      ASSERT_NEAR(got, want, std::fabs(want) * rel + 1e-300) << dtype_name(d) << " element " << i;
    }
  }
}

TEST(ReduceInto, NanPropagates) {
  for (DType d : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64,
                  DType::kFloat8E4M3, DType::kFloat8E5M2}) {
    const size_t es = dtype_size(d);
    std::vector<uint8_t> a(3 * es), b(3 * es), out(3 * es);
    for (size_t i = 0; i < 3; ++i) {
      store_raw(a.data(), i, es, float_raw(d, 1.0));
      store_raw(b.data(), i, es, float_raw(d, 2.0));
    }
    store_raw(a.data(), 0, es, float_raw(d, NAN));  // NaN first
    store_raw(b.data(), 2, es, float_raw(d, NAN));  // NaN second
    const void* srcs[] = {a.data(), b.data()};
    for (ReduceOp op : kOps) {
      ASSERT_TRUE(reduce_into(out.data(), srcs, 2, 3, d, op, Scale{}).ok());
      EXPECT_TRUE(std::isnan(float_value(d, load_raw(out.data(), 0, es))))
          << dtype_name(d) << " " << op_name(op);
      EXPECT_FALSE(std::isnan(float_value(d, load_raw(out.data(), 1, es))));
      EXPECT_TRUE(std::isnan(float_value(d, load_raw(out.data(), 2, es))))
          << dtype_name(d) << " " << op_name(op);
    }
  }
}

TEST(ScaleCopy, CopiesAndScales) {
  const float src[] = {1.0f, -2.0f, 3.0f};
  float dst[3];
  ASSERT_TRUE(scale_copy(dst, src, 3, DType::kFloat32, Scale{}).ok());
  EXPECT_EQ(dst[2], 3.0f);
  ASSERT_TRUE(scale_copy(dst, src, 3, DType::kFloat32, {2.0, 4}).ok());
  EXPECT_EQ(dst[1], -1.0f);
  ASSERT_TRUE(scale_copy(dst, dst, 3, DType::kFloat32, {4.0, 1}).ok());  // in place
  EXPECT_EQ(dst[1], -4.0f);
  uint16_t h[] = {float_to_half(3.0f), float_to_half(-5.0f)};
  ASSERT_TRUE(scale_copy(h, h, 2, DType::kFloat16, {1.0, 2}).ok());
  EXPECT_EQ(half_to_float(h[0]), 1.5f);
  EXPECT_EQ(half_to_float(h[1]), -2.5f);
  int32_t iv[] = {-5, 5};
  ASSERT_TRUE(scale_copy(iv, iv, 2, DType::kInt32, {1.0, 2}).ok());
  EXPECT_EQ(iv[0], -2);
  EXPECT_EQ(iv[1], 2);
  EXPECT_TRUE(scale_copy(nullptr, nullptr, 0, DType::kFloat32, Scale{}).ok());
}

void expect_invalid(const Status& st, const std::string& needle) {
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find(needle), std::string::npos)
      << "message '" << st.message() << "' does not mention '" << needle << "'";
}

TEST(ReduceInto, ArgumentErrors) {
  float a[4] = {}, b[4] = {}, out[4] = {};
  const void* srcs[] = {a, b};
  const void* with_null[] = {a, nullptr};
  const DType f = DType::kFloat32;
  expect_invalid(reduce_into(out, srcs, 0, 4, f, ReduceOp::kSum, {}), "nsrcs 0");
  expect_invalid(reduce_into(out, srcs, 9, 4, f, ReduceOp::kSum, {}), "nsrcs 9");
  expect_invalid(reduce_into(out, srcs, 2, 4, DType(12), ReduceOp::kSum, {}), "dtype 12");
  expect_invalid(reduce_into(out, srcs, 2, 4, DType(-1), ReduceOp::kSum, {}), "dtype -1");
  expect_invalid(reduce_into(out, srcs, 2, 4, f, ReduceOp(7), {}), "op 7");
  expect_invalid(reduce_into(out, srcs, 2, 4, f, ReduceOp::kAvg, {}), "avg");
  expect_invalid(reduce_into(out, srcs, 2, 4, f, ReduceOp::kAdasum, {}), "adasum");
  expect_invalid(reduce_into(nullptr, srcs, 2, 4, f, ReduceOp::kSum, {}), "dst is null");
  expect_invalid(reduce_into(out, nullptr, 2, 4, f, ReduceOp::kSum, {}), "srcs is null");
  expect_invalid(reduce_into(out, with_null, 2, 4, f, ReduceOp::kSum, {}), "srcs[1] is null");
  expect_invalid(reduce_into(out, srcs, 2, 4, f, ReduceOp::kSum, {1.0, 0}), "divisor 0");
  expect_invalid(reduce_into(out, srcs, 2, 4, f, ReduceOp::kSum, {INFINITY, 1}), "factor");
  const void* misaligned[] = {reinterpret_cast<const char*>(a) + 1, b};
  expect_invalid(reduce_into(out, misaligned, 2, 2, f, ReduceOp::kSum, {}), "srcs[0]");
  const void* overlapping[] = {a, out + 1};
  expect_invalid(reduce_into(out, overlapping, 2, 3, f, ReduceOp::kSum, {}), "overlaps");
  expect_invalid(scale_copy(out, nullptr, 4, f, {2.0, 1}), "srcs[0] is null");
  // count 0: nothing is read or written, so null pointers are fine.
  EXPECT_TRUE(reduce_into(nullptr, nullptr, 2, 0, f, ReduceOp::kSum, {}).ok());
  EXPECT_TRUE(reduce_into(out, with_null, 2, 0, f, ReduceOp::kMax, {}).ok());
}

// Every alignment of source and destination and lengths around the 16- and 64-byte
// steps: the bytes arrive exactly, and nothing before or after the range is touched.
TEST(StreamCopy, CopiesEveryAlignmentAndLength) {
  std::vector<unsigned char> src(5000), dst(5200);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
  for (size_t src_off : {0, 1, 8, 15}) {
    for (size_t dst_off : {0, 1, 4, 16, 63}) {
      for (size_t bytes : {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 1000, 4096 + 3}) {
        std::fill(dst.begin(), dst.end(), 0xee);
        stream_copy(dst.data() + 64 + dst_off, src.data() + src_off, bytes);
        bool ok = std::memcmp(dst.data() + 64 + dst_off, src.data() + src_off, bytes) == 0;
        for (size_t i = 0; i < 64 + dst_off; ++i) ok &= dst[i] == 0xee;
        for (size_t i = 64 + dst_off + bytes; i < dst.size(); ++i) ok &= dst[i] == 0xee;
        EXPECT_TRUE(ok) << "src+" << src_off << " dst+" << dst_off << " bytes " << bytes;
      }
    }
  }
}


// ---------------------------------------------------------------------------------------
// Adasum's pair arithmetic (kernels/adasum_math.h): orthogonal vectors sum, parallel ones
// average, a zero side leaves the other, and the 16-bit types round once.

TEST(AdasumMath, OrthogonalParallelZero) {
  double a[4] = {1, 0, 2, 0}, b[4] = {0, 3, 0, -1}, out[4];
  AdasumDots d;
  ASSERT_TRUE(adasum_dots(a, b, 4, DType::kFloat64, &d).ok());
  EXPECT_EQ(d.dot, 0);
  EXPECT_EQ(d.a_norm2, 5);
  EXPECT_EQ(d.b_norm2, 10);
  ASSERT_TRUE(adasum_combine(out, a, b, 4, DType::kFloat64, adasum_coefficients(d)).ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], a[i] + b[i]);
  float p[3] = {1, 2, 3}, q[3] = {3, 6, 9}, r[3];  // q = 3p: the average, 2p
  ASSERT_TRUE(adasum_dots(p, q, 3, DType::kFloat32, &d).ok());
  ASSERT_TRUE(adasum_combine(r, p, q, 3, DType::kFloat32, adasum_coefficients(d)).ok());
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(r[i], 2 * p[i]);
  float zero[3] = {0, 0, 0};
  ASSERT_TRUE(adasum_dots(zero, q, 3, DType::kFloat32, &d).ok());
  const AdasumCoefficients c = adasum_coefficients(d);
  EXPECT_EQ(c.a, 1);
  EXPECT_EQ(c.b, 1);
  ASSERT_TRUE(adasum_combine(r, zero, q, 3, DType::kFloat32, c).ok());  // in place of neither
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r[i], q[i]);
}

TEST(AdasumMath, HalfTypesAndRefusals) {
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    const bool half = t == DType::kFloat16;
    uint16_t a[2], b[2];
    for (int i = 0; i < 2; ++i) {
      a[i] = half ? float_to_half(1.0f + i) : float_to_bf16(1.0f + i);
      b[i] = half ? float_to_half(-0.5f) : float_to_bf16(-0.5f);
    }
    AdasumDots d;
    ASSERT_TRUE(adasum_dots(a, b, 2, t, &d).ok());
    EXPECT_DOUBLE_EQ(d.dot, -1.5);
    EXPECT_DOUBLE_EQ(d.a_norm2, 5);
    EXPECT_DOUBLE_EQ(d.b_norm2, 0.5);
    const AdasumCoefficients c = adasum_coefficients(d);  // 1.15 and 2.5
    ASSERT_TRUE(adasum_combine(a, a, b, 2, t, c).ok());   // in place over a
    for (int i = 0; i < 2; ++i) {
      const float want = static_cast<float>(1.15 * (1.0 + i) + 2.5 * -0.5);
      const uint16_t bits = half ? float_to_half(want) : float_to_bf16(want);
      EXPECT_EQ(a[i], bits) << dtype_name(t) << " element " << i;
    }
  }
  int32_t ints[2] = {1, 2};
  AdasumDots d;
  EXPECT_FALSE(adasum_dots(ints, ints, 2, DType::kInt32, &d).ok());
  EXPECT_FALSE(adasum_combine(ints, ints, ints, 2, DType::kFloat8E4M3, {}).ok());
  EXPECT_FALSE(adasum_dtype(DType::kFloat8E5M2));
  EXPECT_TRUE(adasum_dtype(DType::kBFloat16));
}

}  // namespace
}  // namespace kolo
