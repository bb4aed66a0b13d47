// NCCL's values as kolo's: data types, results, error strings, the thread's last error,
// and the version this library reports.
#include <cstdint>
#include <cstring>

#include "api/nccl/nccl_internal.h"
#include "kernels/float_types.h"

namespace kolo_nccl {
namespace {
thread_local std::string t_last_error;
}  // namespace

ncclResult_t fail(ncclResult_t result, const std::string& message) {
  t_last_error = "kolo-nccl: " + message;
  return result;
}

ncclResult_t result_of(kolo_result_t result) {
  switch (result) {
    case KOLO_SUCCESS: return ncclSuccess;
    case KOLO_IN_PROGRESS: return ncclInProgress;
    case KOLO_ERR_INVALID_ARGUMENT: return ncclInvalidArgument;
    case KOLO_ERR_INVALID_USAGE: return ncclInvalidUsage;
    // Ranks that called with different arguments: a usage error, as in NCCL (where it hangs).
    case KOLO_ERR_MISMATCH: return ncclInvalidUsage;
    case KOLO_ERR_REMOTE: return ncclRemoteError;
    // NCCL reports a peer that stopped answering (socket timeout) as a system error.
    case KOLO_ERR_TIMEOUT: return ncclSystemError;
    case KOLO_ERR_ABORTED: return ncclSystemError;
    case KOLO_ERR_UNSUPPORTED: return ncclInvalidUsage;
    case KOLO_ERR_SYSTEM: return ncclSystemError;
    case KOLO_ERR_INTERNAL: return ncclInternalError;
  }
  return ncclInternalError;
}

ncclResult_t from_kolo(kolo_result_t result, const char* function, const ncclComm* comm) {
  if (result == KOLO_SUCCESS) return ncclSuccess;
  const char* why = kolo_last_error();
  const std::string on = comm != nullptr ? words(" on rank ", comm->rank) : std::string();
  return fail(result_of(result), words(function, on, ": ", kolo_result_string(result), ": ",
                                       why != nullptr ? why : "(kolo gave no message)"));
}

const char* last_error() { return t_last_error.c_str(); }

std::string rank_of(const ncclComm* comm) {
  return comm != nullptr ? words("rank ", comm->rank) : std::string("rank ?");
}

bool dtype_of(int dtype, kolo_dtype_t* out) {
  // Listed one by one, not cast: kolo's order differs (kolo puts BFLOAT16 before FLOAT32).
  switch (dtype) {
    case ncclInt8: *out = KOLO_INT8; return true;
    case ncclUint8: *out = KOLO_UINT8; return true;
    case ncclInt32: *out = KOLO_INT32; return true;
    case ncclUint32: *out = KOLO_UINT32; return true;
    case ncclInt64: *out = KOLO_INT64; return true;
    case ncclUint64: *out = KOLO_UINT64; return true;
    case ncclFloat16: *out = KOLO_FLOAT16; return true;
    case ncclFloat32: *out = KOLO_FLOAT32; return true;
    case ncclFloat64: *out = KOLO_FLOAT64; return true;
    case ncclBfloat16: *out = KOLO_BFLOAT16; return true;
    case ncclFloat8e4m3: *out = KOLO_FLOAT8_E4M3; return true;
    case ncclFloat8e5m2: *out = KOLO_FLOAT8_E5M2; return true;
    default: return false;
  }
}

size_t dtype_bytes(ncclDataType_t dtype) {
  switch (dtype) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    default: return 8;
  }
}

double scalar_value(const void* p, ncclDataType_t dtype) {
  auto load = [p](auto value) {  // memcpy: the scalar need not be aligned
    std::memcpy(&value, p, sizeof(value));
    return value;
  };
  switch (dtype) {
    case ncclInt8: return load(int8_t{});
    case ncclUint8: return load(uint8_t{});
    case ncclInt32: return load(int32_t{});
    case ncclUint32: return load(uint32_t{});
    case ncclInt64: return static_cast<double>(load(int64_t{}));
    case ncclUint64: return static_cast<double>(load(uint64_t{}));
    case ncclFloat16: return kolo::half_to_float(load(uint16_t{}));
    case ncclBfloat16: return kolo::bf16_to_float(load(uint16_t{}));
    case ncclFloat32: return load(float{});
    case ncclFloat64: return load(double{});
    case ncclFloat8e4m3: return kolo::fp8_e4m3_to_float(load(uint8_t{}));
    case ncclFloat8e5m2: return kolo::fp8_e5m2_to_float(load(uint8_t{}));
    default: return 0.0;
  }
}

ncclResult_t check_dtype(const char* function, const ncclComm* comm, ncclDataType_t dtype, kolo_dtype_t* out) {
  if (!dtype_of(dtype, out)) {
    return fail(ncclInvalidArgument, words(function, " on ", rank_of(comm), ": datatype ", static_cast<int>(dtype),
                                           " is not an ncclDataType_t (0..", ncclNumTypes - 1, ")"));
  }
  return ncclSuccess;
}

}  // namespace kolo_nccl

extern "C" {

// NCCL's API level this library implements (that of the nccl.h it was written against),
// not kolo's own version: applications compare it with the NCCL_VERSION_CODE they know.
NCCL_API(ncclResult_t, ncclGetVersion, int* version) {
  kolo_nccl::ensure_environment();
  if (version == nullptr) return kolo_nccl::fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = KOLO_NCCL_VERSION_CODE;
  return ncclSuccess;
}

NCCL_API(const char*, ncclGetErrorString, ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (ncclGetLastError says more)";
    case ncclSystemError: return "unhandled system error (ncclGetLastError says more)";
    case ncclInternalError: return "internal error - please report this issue to the kolo developers";
    case ncclInvalidArgument: return "invalid argument (ncclGetLastError says more)";
    case ncclInvalidUsage: return "invalid usage (ncclGetLastError says more)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

// The calling thread's last failure, whichever communicator it was on (NCCL keeps one too).
NCCL_API(const char*, ncclGetLastError, ncclComm_t comm) { return kolo_nccl::last_error(); }

}  // extern "C"
