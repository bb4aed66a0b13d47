// NCCL as kolo's fallback backend, loaded at run time: libnccl.so.2 (KOLO_NCCL_LIBRARY)
// is opened with dlopen the first time KOLO_BACKEND=nccl asks for it, so kolo builds and
// runs where NCCL is absent. The few types of NCCL's ABI kolo uses are declared here (NCCL
// 2.x keeps them stable; tests/unit/nccl_abi_test.cc checks them against nccl.h where the
// header is installed), so no NCCL header is needed to build.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/dtype.h"
#include "support/status.h"

namespace kolo::nccl {

// ncclResult_t values kolo tells apart.
constexpr int kSuccess = 0;
constexpr int kInProgress = 7;

struct UniqueId {
  char bytes[128];
};
using Comm = struct Opaque*;  // ncclComm_t

// ncclConfig_t as NCCL 2.14 introduced it (size, magic, version, blocking). NCCL reads
// min(size, its own) bytes and takes its defaults for the fields a config of an older
// version lacks, so this prefix is valid for every later version.
struct Config {
  size_t size = sizeof(Config);
  unsigned magic = 0xcafebeef;
  unsigned version = 21400;  // NCCL_VERSION(2, 14, 0)
  int blocking = 1;
  // The next field of later versions, in what would be padding (NCCL copies the struct's
  // size, 24 bytes), set to NCCL_CONFIG_UNDEF_INT: "not set, use NCCL's default".
  int cga_cluster_size = -2147483647 - 1;
};

// The oldest NCCL kolo drives: nonblocking communicators (ncclCommInitRankConfig) and
// ncclCommFinalize came with 2.14.
constexpr int kMinimumVersion = 21400;

// NCCL's functions, as kolo calls them (the pointers dlsym gave).
struct Library {
  std::string path;  // what was loaded
  int version = 0;   // ncclGetVersion: major*10000 + minor*100 + patch

  int (*get_version)(int*);
  int (*get_unique_id)(UniqueId*);
  int (*comm_init_rank_config)(Comm*, int nranks, UniqueId id, int rank, Config*);
  int (*comm_finalize)(Comm);
  int (*comm_destroy)(Comm);
  int (*comm_abort)(Comm);
  int (*comm_get_async_error)(Comm, int* result);
  const char* (*get_error_string)(int result);
  const char* (*get_last_error)(Comm);
  int (*group_start)();
  int (*group_end)();
  int (*all_reduce)(const void*, void*, size_t, int dtype, int op, Comm, void* stream);
  int (*broadcast)(const void*, void*, size_t, int dtype, int root, Comm, void* stream);
  int (*reduce)(const void*, void*, size_t, int dtype, int op, int root, Comm, void* stream);
  int (*all_gather)(const void*, void*, size_t, int dtype, Comm, void* stream);
  int (*reduce_scatter)(const void*, void*, size_t, int dtype, int op, Comm, void* stream);
  int (*send)(const void*, size_t, int dtype, int peer, Comm, void* stream);
  int (*recv)(void*, size_t, int dtype, int peer, Comm, void* stream);
};

// The library KOLO_NCCL_LIBRARY names (CommSettings::nccl_library), loaded once per
// process; an error names the library and says what is missing (the file, a function, or
// a new enough version).
Result<const Library*> library(const std::string& name);
// Loads a given library (for tests; library() is this, cached).
Result<Library> load(const std::string& name);

// NCCL's names for kolo's types and operations (an error where NCCL has none: fp8 before
// NCCL 2.24; AVG never reaches NCCL, kolo lowers it to SUM and a scale).
Result<int> dtype_of(DType dtype, int version);
Result<int> op_of(ReduceOp op);

// A failed NCCL call as a kolo error: what was called, NCCL's words and its last error.
Status failure(const Library& lib, Comm comm, int result, const char* what);

}  // namespace kolo::nccl
