// Data types and reduction ops as the kernels see them. Values match kolo_dtype_t and
// kolo_op_t in the public header one to one (checked by a static_assert in api/).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kolo {

enum class DType : int {
  kInt8 = 0, kUint8, kInt32, kUint32, kInt64, kUint64,
  kFloat16, kBFloat16, kFloat32, kFloat64, kFloat8E4M3, kFloat8E5M2,
  kCount
};

// kAdasum is not element-wise (engine/adasum.h): the kernels refuse it like kAvg.
enum class ReduceOp : int { kSum = 0, kProd, kMin, kMax, kAvg, kAdasum, kCount };

// Bytes per element; 0 for out-of-range values. Inline: every call's hot path asks.
constexpr size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kInt8: case DType::kUint8: case DType::kFloat8E4M3: case DType::kFloat8E5M2:
      return 1;
    case DType::kFloat16: case DType::kBFloat16:
      return 2;
    case DType::kInt32: case DType::kUint32: case DType::kFloat32:
      return 4;
    case DType::kInt64: case DType::kUint64: case DType::kFloat64:
      return 8;
    case DType::kCount:
      break;
  }
  return 0;
}
// nccl-tests spelling: int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double f8e4m3 f8e5m2
const char* dtype_name(DType dtype);
bool dtype_is_float(DType dtype);
// sum prod min max avg
const char* op_name(ReduceOp op);

// What a reduction multiplies its result by: value * factor / divisor. Integer data with
// factor == 1 divides exactly, truncating toward zero (integer AVG); otherwise the
// arithmetic is done in double and truncated.
struct Scale {
  double factor = 1.0;
  int64_t divisor = 1;
  bool identity() const { return factor == 1.0 && divisor == 1; }
};

}  // namespace kolo
