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

enum class ReduceOp : int { kSum = 0, kProd, kMin, kMax, kAvg, kCount };

size_t dtype_size(DType dtype);
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
