#include "kernels/adasum_math.h"

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "kernels/float_types.h"

namespace kolo {
namespace {

// Loads and stores of each type as double. Four running sums, always combined in the same
// order: the loop pipelines, and the result stays the same on every rank that runs it.
struct F16 {
  using Storage = uint16_t;
  static double load(Storage v) { return half_to_float(v); }
  static Storage store(double v) { return float_to_half(static_cast<float>(v)); }
};
struct Bf16 {
  using Storage = uint16_t;
  static double load(Storage v) { return bf16_to_float(v); }
  static Storage store(double v) { return float_to_bf16(static_cast<float>(v)); }
};
struct F32 {
  using Storage = float;
  static double load(Storage v) { return v; }
  static Storage store(double v) { return static_cast<float>(v); }
};
struct F64 {
  using Storage = double;
  static double load(Storage v) { return v; }
  static Storage store(double v) { return v; }
};

template <typename T>
AdasumDots dots(const void* av, const void* bv, size_t count) {
  const auto* a = static_cast<const typename T::Storage*>(av);
  const auto* b = static_cast<const typename T::Storage*>(bv);
  double dot[4] = {0, 0, 0, 0}, aa[4] = {0, 0, 0, 0}, bb[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= count; i += 4) {
    for (int k = 0; k < 4; ++k) {
      const double x = T::load(a[i + k]), y = T::load(b[i + k]);
      dot[k] += x * y;
      aa[k] += x * x;
      bb[k] += y * y;
    }
  }
  for (int k = 0; i < count; ++i, ++k) {
    const double x = T::load(a[i]), y = T::load(b[i]);
    dot[k] += x * y;
    aa[k] += x * x;
    bb[k] += y * y;
  }
  AdasumDots out;
  out.dot = (dot[0] + dot[1]) + (dot[2] + dot[3]);
  out.a_norm2 = (aa[0] + aa[1]) + (aa[2] + aa[3]);
  out.b_norm2 = (bb[0] + bb[1]) + (bb[2] + bb[3]);
  return out;
}

template <typename T>
void combine(void* dv, const void* av, const void* bv, size_t count, AdasumCoefficients c) {
  auto* d = static_cast<typename T::Storage*>(dv);
  const auto* a = static_cast<const typename T::Storage*>(av);
  const auto* b = static_cast<const typename T::Storage*>(bv);
  for (size_t i = 0; i < count; ++i) d[i] = T::store(c.a * T::load(a[i]) + c.b * T::load(b[i]));
}

Status refuse(const char* caller, DType dtype) {
  return error(Code::kInvalidArgument, caller, ": Adasum is defined for float16, bfloat16, float32 and float64, not ",
               dtype_name(dtype));
}

}  // namespace

bool adasum_dtype(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16 || dtype == DType::kFloat32 ||
         dtype == DType::kFloat64;
}

Status adasum_dots(const void* a, const void* b, size_t count, DType dtype, AdasumDots* out) {
  switch (dtype) {
    case DType::kFloat16: *out = dots<F16>(a, b, count); break;
    case DType::kBFloat16: *out = dots<Bf16>(a, b, count); break;
    case DType::kFloat32: *out = dots<F32>(a, b, count); break;
    case DType::kFloat64: *out = dots<F64>(a, b, count); break;
    default: return refuse("adasum_dots", dtype);
  }
  return Status();
}

AdasumCoefficients adasum_coefficients(const AdasumDots& d) {
  static const double tiny = std::sqrt(DBL_MIN);
  AdasumCoefficients c;
  if (d.a_norm2 >= tiny) c.a = 1.0 - d.dot / d.a_norm2 * 0.5;
  if (d.b_norm2 >= tiny) c.b = 1.0 - d.dot / d.b_norm2 * 0.5;
  return c;
}

Status adasum_combine(void* dst, const void* a, const void* b, size_t count, DType dtype, AdasumCoefficients c) {
  switch (dtype) {
    case DType::kFloat16: combine<F16>(dst, a, b, count, c); break;
    case DType::kBFloat16: combine<Bf16>(dst, a, b, count, c); break;
    case DType::kFloat32: combine<F32>(dst, a, b, count, c); break;
    case DType::kFloat64: combine<F64>(dst, a, b, count, c); break;
    default: return refuse("adasum_combine", dtype);
  }
  return Status();
}

}  // namespace kolo
