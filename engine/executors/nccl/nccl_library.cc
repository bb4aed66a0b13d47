#include "engine/executors/nccl/nccl_library.h"

#include <dlfcn.h>

#include <mutex>
#include <optional>

#include "support/log.h"

namespace kolo::nccl {
namespace {

std::string version_text(int v) { return str_cat(v / 10000, ".", v / 100 % 100, ".", v % 100); }

template <class F>
Status bind(void* handle, const std::string& path, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  if (*out == nullptr) return error(Code::kUnsupported, path, " has no ", name, "; kolo needs NCCL ", version_text(kMinimumVersion), " or newer");
  return Status();
}

}  // namespace

Result<Library> load(const std::string& name) {
  // RTLD_LOCAL: NCCL's symbols stay out of the global namespace, where kolo's own NCCL
  // drop-in may define the same names.
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return error(Code::kUnsupported, "KOLO_BACKEND=nccl: cannot load the NCCL library '", name, "' (",
                 why != nullptr ? why : "unknown reason", "); install NCCL or set KOLO_NCCL_LIBRARY to its path");
  }
  // kolo's own drop-in (api/nccl) answers to the same name: loading it here would run
  // kolo's device calls through kolo again, around and around.
  if (dlsym(handle, "kolo_nccl_dropin") != nullptr) {
    dlclose(handle);
    return error(Code::kUnsupported, "KOLO_BACKEND=nccl: '", name, "' is kolo's own NCCL drop-in, not NVIDIA's "
                 "NCCL (LD_LIBRARY_PATH or LD_PRELOAD points at it); set KOLO_NCCL_LIBRARY to NVIDIA's libnccl.so.2");
  }
  Library lib;
  lib.path = name;
  Status s = bind(handle, name, "ncclGetVersion", &lib.get_version);
  if (s.ok() && lib.get_version(&lib.version) != kSuccess) s = error(Code::kUnsupported, name, ": ncclGetVersion failed");
  if (s.ok() && lib.version < kMinimumVersion) {
    s = error(Code::kUnsupported, "KOLO_BACKEND=nccl: ", name, " is NCCL ", version_text(lib.version), "; kolo needs NCCL ",
              version_text(kMinimumVersion), " or newer");
  }
  if (s.ok()) s = bind(handle, name, "ncclGetUniqueId", &lib.get_unique_id);
  if (s.ok()) s = bind(handle, name, "ncclCommInitRankConfig", &lib.comm_init_rank_config);
  if (s.ok()) s = bind(handle, name, "ncclCommFinalize", &lib.comm_finalize);
  if (s.ok()) s = bind(handle, name, "ncclCommDestroy", &lib.comm_destroy);
  if (s.ok()) s = bind(handle, name, "ncclCommAbort", &lib.comm_abort);
  if (s.ok()) s = bind(handle, name, "ncclCommGetAsyncError", &lib.comm_get_async_error);
  if (s.ok()) s = bind(handle, name, "ncclGetErrorString", &lib.get_error_string);
  if (s.ok()) s = bind(handle, name, "ncclGetLastError", &lib.get_last_error);
  if (s.ok()) s = bind(handle, name, "ncclGroupStart", &lib.group_start);
  if (s.ok()) s = bind(handle, name, "ncclGroupEnd", &lib.group_end);
  if (s.ok()) s = bind(handle, name, "ncclAllReduce", &lib.all_reduce);
  if (s.ok()) s = bind(handle, name, "ncclBroadcast", &lib.broadcast);
  if (s.ok()) s = bind(handle, name, "ncclReduce", &lib.reduce);
  if (s.ok()) s = bind(handle, name, "ncclAllGather", &lib.all_gather);
  if (s.ok()) s = bind(handle, name, "ncclReduceScatter", &lib.reduce_scatter);
  if (s.ok()) s = bind(handle, name, "ncclSend", &lib.send);
  if (s.ok()) s = bind(handle, name, "ncclRecv", &lib.recv);
  if (!s.ok()) {
    dlclose(handle);
    return s;
  }
  log_info(Subsys::kInit, "NCCL ", version_text(lib.version), " loaded from ", name);
  return lib;  // the handle stays open for the life of the process
}

Result<const Library*> library(const std::string& name) {
  static std::mutex mutex;
  static std::optional<Result<Library>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  if (!loaded) loaded.emplace(load(name));
  if (!loaded->ok()) return loaded->status();
  return &loaded->value();
}

Result<int> dtype_of(DType dtype, int version) {
  switch (dtype) {
    case DType::kInt8: return 0;
    case DType::kUint8: return 1;
    case DType::kInt32: return 2;
    case DType::kUint32: return 3;
    case DType::kInt64: return 4;
    case DType::kUint64: return 5;
    case DType::kFloat16: return 6;
    case DType::kFloat32: return 7;
    case DType::kFloat64: return 8;
    case DType::kBFloat16: return 9;
    case DType::kFloat8E4M3:
    case DType::kFloat8E5M2:
      if (version < 22400) {
        return error(Code::kUnsupported, "NCCL ", version_text(version), " has no ", dtype_name(dtype),
                     " (it came with NCCL 2.24)");
      }
      return dtype == DType::kFloat8E4M3 ? 10 : 11;
    case DType::kCount: break;
  }
  return error(Code::kInvalidArgument, "dtype ", static_cast<int>(dtype), " has no NCCL type");
}

Result<int> op_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return 0;
    case ReduceOp::kProd: return 1;
    case ReduceOp::kMax: return 2;
    case ReduceOp::kMin: return 3;
    case ReduceOp::kAvg:
    case ReduceOp::kAdasum:
    case ReduceOp::kCount: break;
  }
  return error(Code::kInternal, "op ", op_name(op), " reached NCCL (kolo lowers avg to sum and a scale; adasum runs "
               "in engine/adasum.cc)");
}

Status failure(const Library& lib, Comm comm, int result, const char* what) {
  const char* last = lib.get_last_error(comm);
  return error(result == 6 ? Code::kRemote : Code::kSystem, what, " failed: NCCL error ", result, " (",
               lib.get_error_string(result), ")", last != nullptr && last[0] != '\0' ? str_cat(": ", last) : "");
}

}  // namespace kolo::nccl
