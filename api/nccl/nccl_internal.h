// What the drop-in's files share: the communicator behind ncclComm_t, the thread's last
// error, and the translations between NCCL's values and kolo's.
#pragma once

#include <atomic>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "api/nccl/nccl_abi.h"
#include "kolo/kolo.h"

// ncclComm_t points at this (nccl.h only declares the name).
struct ncclComm {
  kolo_comm_t kolo = nullptr;
  int rank = 0;
  int size = 0;
  int device = -1;   // the device current when the communicator was made; -1: none
  int blocking = 1;  // ncclConfig_t::blocking; kolo's calls complete either way
  bool finalized = false;

  // ncclRedOpCreatePreMulSum's operators, ncclNumOps + index; a destroyed one is !live.
  struct PreMulSum {
    bool live = false;
    ncclDataType_t dtype = ncclFloat32;
    ncclScalarResidence_t residence = ncclScalarHostImmediate;
    const void* scalar = nullptr;  // read at each call for ncclScalarDevice
    double value = 1.0;            // ncclScalarHostImmediate: read at creation
  };
  std::mutex ops_mutex;
  std::vector<PreMulSum> ops;

  // Calls inside kolo on this communicator now (a group's count from its calls to its
  // ncclGroupEnd): ncclCommAbort from another thread waits for them before freeing.
  std::atomic<int> in_flight{0};
};

namespace kolo_nccl {

template <class... Args>
std::string words(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

// Records `message` as this thread's last error (ncclGetLastError) and returns result.
ncclResult_t fail(ncclResult_t result, const std::string& message);
// A failed kolo call: its result as NCCL's, kolo_last_error() kept as the last error,
// prefixed with the NCCL function's name and the communicator's rank (when there is one).
ncclResult_t from_kolo(kolo_result_t result, const char* function, const ncclComm* comm = nullptr);
ncclResult_t result_of(kolo_result_t result);
const char* last_error();
// "rank R" for messages, or "rank ?" before there is a communicator.
std::string rank_of(const ncclComm* comm);

// NCCL's data types as kolo's; false for a value nccl.h does not define.
bool dtype_of(int dtype, kolo_dtype_t* out);
size_t dtype_bytes(ncclDataType_t dtype);
// One value of `dtype` at `p` (host memory) as a double.
double scalar_value(const void* p, ncclDataType_t dtype);

// kInvalidArgument-style checks that name the function, the value and the rank.
ncclResult_t check_comm(const char* function, const ncclComm* comm);
ncclResult_t check_dtype(const char* function, const ncclComm* comm, ncclDataType_t dtype, kolo_dtype_t* out);

// Once per process, before kolo is first called: NCCL_DEBUG as KOLO_DEBUG, the INFO
// line about ignored NCCL_* variables (nccl_env.cc).
void ensure_environment();
// The recursion guard: an error when this process asks kolo for its NCCL backend.
ncclResult_t check_not_backend(const char* function);

// The device current on this thread (-1 where kolo has no device runtime).
int current_device();
// Reads one scalar of `bytes` at `p` after the work queued on `stream` (a device pointer:
// a synchronous copy through kolo's device runtime; host memory: read directly).
ncclResult_t read_scalar(const char* function, const ncclComm* comm, const void* p, ncclDataType_t dtype, void* stream,
                         double* out);

}  // namespace kolo_nccl

namespace kolo_nccl {
// Makes `device` current on this (new) thread where kolo has a device runtime; nothing
// where it has none (the device number is then only what ncclCommCuDevice reports).
ncclResult_t set_thread_device(const char* function, int device);
// Copies `bytes` from src to dst on this process: memcpy for host memory, a copy enqueued
// on `stream` (stream-ordered, as a collective would be) where either is device memory.
ncclResult_t local_copy(const char* function, const ncclComm* comm, void* dst, const void* src, size_t bytes,
                        void* stream);
}  // namespace kolo_nccl

namespace kolo_nccl {
// Notes that this thread's open group (if any) has a call on comm, so that ncclGroupEnd
// counts the communicator in flight while kolo runs the group (nccl_point_to_point.cc).
void note_group_call(ncclComm* comm);

// Counts a call on comm as in flight while it lives (see ncclComm::in_flight).
class InFlight {
 public:
  explicit InFlight(ncclComm* comm) : comm_(comm) {
    comm_->in_flight.fetch_add(1, std::memory_order_acq_rel);
    note_group_call(comm);
  }
  ~InFlight() { comm_->in_flight.fetch_sub(1, std::memory_order_acq_rel); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  ncclComm* comm_;
};

// Seconds any wait may last (KOLO_TIMEOUT, as kolo's own waits).
double timeout_seconds();
}  // namespace kolo_nccl
