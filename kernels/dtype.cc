// Names and sizes of dtypes and ops. Out-of-range values get 0 / "unknown" rather than a
// crash, because these are used to build error messages about bad values.
#include "kernels/dtype.h"

namespace kolo {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kInt8: return "int8";
    case DType::kUint8: return "uint8";
    case DType::kInt32: return "int32";
    case DType::kUint32: return "uint32";
    case DType::kInt64: return "int64";
    case DType::kUint64: return "uint64";
    case DType::kFloat16: return "half";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float";
    case DType::kFloat64: return "double";
    case DType::kFloat8E4M3: return "f8e4m3";
    case DType::kFloat8E5M2: return "f8e5m2";
    case DType::kCount: break;
  }
  return "unknown";
}

bool dtype_is_float(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: case DType::kBFloat16: case DType::kFloat32: case DType::kFloat64:
    case DType::kFloat8E4M3: case DType::kFloat8E5M2:
      return true;
    default:
      return false;
  }
}

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kProd: return "prod";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kAdasum: return "adasum";
    case ReduceOp::kCount: break;
  }
  return "unknown";
}

}  // namespace kolo
