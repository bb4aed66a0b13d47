#include "perf_data.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/float_types.h"

namespace kolo_perf {
namespace {

struct DtypeInfo {
  const char* label;
  size_t bytes;
  bool is_float;
  int mantissa_bits;  // for the ulp of float types
};

const DtypeInfo kDtypes[] = {
    {"int8", 1, false, 0},     {"uint8", 1, false, 0},  {"int32", 4, false, 0},    {"uint32", 4, false, 0},
    {"int64", 8, false, 0},    {"uint64", 8, false, 0}, {"half", 2, true, 10},     {"bfloat16", 2, true, 7},
    {"float", 4, true, 23},    {"double", 8, true, 52}, {"f8e4m3", 1, true, 3},    {"f8e5m2", 1, true, 2},
};
const char* kOps[] = {"sum", "prod", "min", "max", "avg"};

bool is_float(kolo_dtype_t dtype) { return kDtypes[dtype].is_float; }

}  // namespace

double compute_expected(kolo_op_t op, kolo_dtype_t dtype, int nranks, size_t index);

size_t dtype_bytes(kolo_dtype_t dtype) { return kDtypes[dtype].bytes; }
const char* dtype_label(kolo_dtype_t dtype) { return kDtypes[dtype].label; }
const char* op_label(kolo_op_t op) { return kOps[op]; }

bool parse_dtype(const std::string& text, kolo_dtype_t* out) {
  for (int d = 0; d < KOLO_DTYPE_COUNT; ++d) {
    if (text == kDtypes[d].label) {
      *out = static_cast<kolo_dtype_t>(d);
      return true;
    }
  }
  struct Alias { const char* name; kolo_dtype_t dtype; };
  const Alias aliases[] = {{"float32", KOLO_FLOAT32}, {"float16", KOLO_FLOAT16}, {"fp16", KOLO_FLOAT16},
                           {"bf16", KOLO_BFLOAT16},   {"float64", KOLO_FLOAT64}, {"int", KOLO_INT32}};
  for (const Alias& a : aliases) {
    if (text == a.name) {
      *out = a.dtype;
      return true;
    }
  }
  return false;
}

bool parse_op(const std::string& text, kolo_op_t* out) {
  for (int o = 0; o < kElementwiseOps; ++o) {
    if (text == kOps[o]) {
      *out = static_cast<kolo_op_t>(o);
      return true;
    }
  }
  return false;
}

void store_value(void* buffer, size_t i, kolo_dtype_t dtype, double v) {
  switch (dtype) {
    case KOLO_INT8: static_cast<int8_t*>(buffer)[i] = static_cast<int8_t>(v); break;
    case KOLO_UINT8: static_cast<uint8_t*>(buffer)[i] = static_cast<uint8_t>(v); break;
    case KOLO_INT32: static_cast<int32_t*>(buffer)[i] = static_cast<int32_t>(v); break;
    case KOLO_UINT32: static_cast<uint32_t*>(buffer)[i] = static_cast<uint32_t>(v); break;
    case KOLO_INT64: static_cast<int64_t*>(buffer)[i] = static_cast<int64_t>(v); break;
    case KOLO_UINT64: static_cast<uint64_t*>(buffer)[i] = static_cast<uint64_t>(v); break;
    case KOLO_FLOAT16: static_cast<uint16_t*>(buffer)[i] = kolo::float_to_half(static_cast<float>(v)); break;
    case KOLO_BFLOAT16: static_cast<uint16_t*>(buffer)[i] = kolo::float_to_bf16(static_cast<float>(v)); break;
    case KOLO_FLOAT32: static_cast<float*>(buffer)[i] = static_cast<float>(v); break;
    case KOLO_FLOAT64: static_cast<double*>(buffer)[i] = v; break;
    case KOLO_FLOAT8_E4M3: static_cast<uint8_t*>(buffer)[i] = kolo::float_to_fp8_e4m3(static_cast<float>(v)); break;
    case KOLO_FLOAT8_E5M2: static_cast<uint8_t*>(buffer)[i] = kolo::float_to_fp8_e5m2(static_cast<float>(v)); break;
    default: break;
  }
}

double load_value(const void* buffer, size_t i, kolo_dtype_t dtype) {
  switch (dtype) {
    case KOLO_INT8: return static_cast<const int8_t*>(buffer)[i];
    case KOLO_UINT8: return static_cast<const uint8_t*>(buffer)[i];
    case KOLO_INT32: return static_cast<const int32_t*>(buffer)[i];
    case KOLO_UINT32: return static_cast<const uint32_t*>(buffer)[i];
    case KOLO_INT64: return static_cast<double>(static_cast<const int64_t*>(buffer)[i]);
    case KOLO_UINT64: return static_cast<double>(static_cast<const uint64_t*>(buffer)[i]);
    case KOLO_FLOAT16: return kolo::half_to_float(static_cast<const uint16_t*>(buffer)[i]);
    case KOLO_BFLOAT16: return kolo::bf16_to_float(static_cast<const uint16_t*>(buffer)[i]);
    case KOLO_FLOAT32: return static_cast<const float*>(buffer)[i];
    case KOLO_FLOAT64: return static_cast<const double*>(buffer)[i];
    case KOLO_FLOAT8_E4M3: return kolo::fp8_e4m3_to_float(static_cast<const uint8_t*>(buffer)[i]);
    case KOLO_FLOAT8_E5M2: return kolo::fp8_e5m2_to_float(static_cast<const uint8_t*>(buffer)[i]);
    default: return 0;
  }
}

double as_dtype(double value, kolo_dtype_t dtype) {
  uint64_t scratch = 0;
  store_value(&scratch, 0, dtype, value);
  return load_value(&scratch, 0, dtype);
}

double input_value(kolo_op_t op, kolo_dtype_t dtype, int rank, size_t index) {
  const bool fp8 = dtype == KOLO_FLOAT8_E4M3 || dtype == KOLO_FLOAT8_E5M2;
  switch (op) {
    case KOLO_SUM:
    case KOLO_AVG:
      // Small integers: every partial sum is exact in every dtype, in any order and grouping
      // (a reduction over hosts stores its partial sums in the dtype). fp8: a one from every
      // eighth rank, at most 8 ones up to 64 ranks; e5m2 holds the integers exactly only to
      // 8 (9 rounds to 8), and a one from every fourth rank put 16 ones in a 64-rank sum,
      // which a ring between hosts rounded on the way (the 64-rank soak's f8e5m2 allreduce).
      if (fp8) return (index + rank) % 8 == 0 ? 1 : 0;
      return static_cast<double>((index + 2 * static_cast<size_t>(rank)) % 5);
    case KOLO_PROD:
      // Ones and a few twos: every partial product is a small power of two.
      return (index + rank) % 7 == 0 ? 2 : 1;
    case KOLO_MIN:
    case KOLO_MAX:
    default: {
      double v = static_cast<double>((index * 3 + static_cast<size_t>(rank) * 5) % 11);
      if (is_float(dtype) && (index + rank) % 3 == 0) v = -v;  // signed values where they exist
      if (dtype == KOLO_INT8 || dtype == KOLO_INT32 || dtype == KOLO_INT64) v -= 5;
      return as_dtype(v, dtype);
    }
  }
}

double expected_reduction(kolo_op_t op, kolo_dtype_t dtype, int nranks, size_t index) {
  // input_value is periodic in index with a period dividing kPeriod, so the expected values
  // of one period are computed once per (op, dtype, nranks) and looked up after that.
  constexpr size_t kPeriod = 9240;  // lcm(3, 5, 7, 8, 11)
  thread_local int cached_op = -1, cached_dtype = -1, cached_nranks = -1;
  thread_local std::vector<double> table;
  if (cached_op != op || cached_dtype != dtype || cached_nranks != nranks) {
    table.resize(kPeriod);
    for (size_t i = 0; i < kPeriod; ++i) table[i] = compute_expected(op, dtype, nranks, i);
    cached_op = op;
    cached_dtype = dtype;
    cached_nranks = nranks;
  }
  return table[index % kPeriod];
}

double compute_expected(kolo_op_t op, kolo_dtype_t dtype, int nranks, size_t index) {
  double acc = input_value(op, dtype, 0, index);
  for (int r = 1; r < nranks; ++r) {
    double v = input_value(op, dtype, r, index);
    switch (op) {
      case KOLO_SUM: case KOLO_AVG: acc += v; break;
      case KOLO_PROD: acc *= v; break;
      case KOLO_MIN: acc = std::fmin(acc, v); break;
      case KOLO_MAX: acc = std::fmax(acc, v); break;
      default: break;
    }
  }
  if (op == KOLO_AVG) {
    // Integers: the sum in the dtype (wrapping, as SUM gives it; exact up to about 50
    // ranks for int8 with these inputs), then divided, truncating.
    if (!is_float(dtype)) return std::trunc(as_dtype(acc, dtype) / nranks);
    return acc / nranks;
  }
  return as_dtype(acc, dtype);
}

bool matches(double got, double expected, kolo_op_t op, kolo_dtype_t dtype) {
  if (op != KOLO_AVG || !is_float(dtype)) return got == expected;
  if (got == as_dtype(expected, dtype)) return true;
  // 2 ulp of the dtype at the expected value's magnitude.
  int exponent = 0;
  std::frexp(expected, &exponent);
  double ulp = std::ldexp(1.0, exponent - 1 - kDtypes[dtype].mantissa_bits);
  return std::fabs(got - expected) <= 2 * ulp + 1e-300;
}

float wire_input_value(int rank, size_t index) {
  const uint32_t h = static_cast<uint32_t>(index * 2654435761u + static_cast<uint32_t>(rank) * 40503u);
  const float mag = 0.5f + static_cast<float>(h % 3000) / 2000.0f;
  return (h >> 16) & 1 ? -mag : mag;
}

double wire_unit_roundoff(kolo_dtype_t wire) {
  switch (wire) {
    case KOLO_FLOAT16: return 0x1p-11;
    case KOLO_BFLOAT16: return 0x1p-8;
    case KOLO_FLOAT8_E4M3: return 0x1p-4;
    case KOLO_FLOAT8_E5M2: return 0x1p-3;
    default: return 0;
  }
}

}  // namespace kolo_perf
