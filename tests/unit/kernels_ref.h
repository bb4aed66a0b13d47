// A reference model of the narrow float formats (fp16, bf16, fp8 e4m3/e5m2), written from
// their definitions and not from kernels/: decoding every pattern, and nearest-even
// encoding through a sorted table. Shared by the kernels tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace kolo {

// ---------------------------------------------------------------------------------------
// Reference model of a narrow float format, straight from its definition.

struct RefFormat {
  int exp_bits;
  int man_bits;
  bool ieee_top;  // all-ones exponent = inf/NaN (else only the all-ones pattern is NaN)
  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  uint32_t sign_bit() const { return 1u << (exp_bits + man_bits); }
  uint32_t exp_all_ones() const { return ((1u << exp_bits) - 1) << man_bits; }
  uint32_t max_finite() const {
    return ieee_top ? exp_all_ones() - 1 : (exp_all_ones() | ((1u << man_bits) - 1)) - 1;
  }
};

constexpr RefFormat kFp16{5, 10, true};
constexpr RefFormat kBf16{8, 7, true};
constexpr RefFormat kE4m3{4, 3, false};
constexpr RefFormat kE5m2{5, 2, true};

inline double ref_decode(const RefFormat& f, uint32_t bits) {
  const bool neg = bits & f.sign_bit();
  const uint32_t abs = bits & (f.sign_bit() - 1);
  const int exp = static_cast<int>(abs >> f.man_bits);
  const uint32_t man = abs & ((1u << f.man_bits) - 1);
  double v;
  if (f.ieee_top && abs >= f.exp_all_ones()) {
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (!f.ieee_top && abs > f.max_finite()) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(man), 1 - f.bias() - f.man_bits);
  } else {
    v = std::ldexp(static_cast<double>(man + (1u << f.man_bits)), exp - f.bias() - f.man_bits);
  }
  return neg ? -v : v;
}

// Nearest representable value, ties to the even pattern. IEEE formats get a pseudo entry
// 2^(emax+1) standing for inf, so that IEEE overflow rounding (max + half an ulp and up
// go to inf) falls out of the nearest-even rule; e4m3 saturates to its max instead.
class RefEncoder {
 public:
  explicit RefEncoder(RefFormat f) : f_(f) {
    for (uint32_t p = 0; p <= f.max_finite(); ++p) table_.push_back({ref_decode(f, p), p});
    if (f.ieee_top) {
      table_.push_back({std::ldexp(1.0, static_cast<int>((1u << f.exp_bits) - 1) - f.bias()),
                        f.exp_all_ones()});
    }
  }
  // Returns the pattern. For NaN input any NaN pattern is right: this returns one, and
  // sets *nan so that callers compare NaN-ness rather than bits.
  uint32_t encode(double x, bool* nan = nullptr) const {
    if (nan) *nan = std::isnan(x);
    if (std::isnan(x)) return f_.exp_all_ones() | ((1u << f_.man_bits) - 1);
    const uint32_t sign = std::signbit(x) ? f_.sign_bit() : 0;
    const double a = std::fabs(x);
    if (a >= table_.back().first) return sign | (f_.ieee_top ? f_.exp_all_ones() : f_.max_finite());
    auto hi = std::lower_bound(table_.begin(), table_.end(), std::make_pair(a, 0u));
    if (hi->first == a) return sign | hi->second;
    auto lo = hi - 1;
    const double dlo = a - lo->first, dhi = hi->first - a;
    if (dlo < dhi) return sign | lo->second;
    if (dhi < dlo) return sign | hi->second;
    return sign | ((lo->second & 1) ? hi->second : lo->second);
  }
  const std::vector<std::pair<double, uint32_t>>& table() const { return table_; }

 private:
  RefFormat f_;
  std::vector<std::pair<double, uint32_t>> table_;
};

}  // namespace kolo
