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

  // Calls on this communicator now, counted from before they first read it: each call
  // from its start to its return, and an open group from its first call on the
  // communicator to its ncclGroupEnd (kolo runs the group's calls there). ncclCommAbort
  // frees the communicator only once this is 0 (see InFlight).
  std::atomic<int> in_flight{0};
  // Set by ncclCommAbort before it waits for in_flight: no call starts on it after that
  // (InFlight::enter refuses), and an open group on it reports the abort at ncclGroupEnd.
  std::atomic<bool> aborting{false};
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

// kInvalidArgument-style checks that name the function, the value and the rank (the
// communicator itself is checked by InFlight::enter).
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
// ncclCommInitAll's devices, before any thread starts: devlist[i] (or i without devlist)
// must be a device number (>= 0), below the device count where kolo has a device runtime.
ncclResult_t check_devices(const char* function, int ndev, const int* devlist);

// Copies `bytes` from src to dst on this process: memcpy for host memory, a copy enqueued
// on `stream` (stream-ordered, as a collective would be) where either is device memory.
ncclResult_t local_copy(const char* function, const ncclComm* comm, void* dst, const void* src, size_t bytes,
                        void* stream);
// The same, where src was last written by work on `src_stream`: for device memory on a
// stream other than `stream`, `stream` first waits for src_stream's work enqueued so far
// (an event recorded there), so that the copy reads what that work wrote.
ncclResult_t local_copy_after(const char* function, const ncclComm* comm, void* dst, const void* src, size_t bytes,
                              void* src_stream, void* stream);
}  // namespace kolo_nccl

namespace kolo_nccl {
// Notes that this thread's open group (if any) has a call on comm: the first time, the
// group holds comm in flight (one more count) until its ncclGroupEnd has run kolo's group,
// so that ncclCommAbort from another thread cannot free comm while the group is open.
// The caller holds an InFlight on comm (so comm is live, and not being aborted).
void note_group_call(ncclComm* comm);

// This thread's open group's hold on comm, given up because this thread aborts comm
// (ncclCommAbort would otherwise wait for itself): comm leaves the group's lists, and
// the group's ncclGroupEnd reports the abort. False where the group had no call on comm.
bool drop_group_hold(ncclComm* comm);

// Counts a call on a communicator as in flight from enter() to the end of its scope.
// enter() checks, under the lock that ncclCommAbort and ncclCommDestroy take to mark a
// communicator, that comm is a live communicator of this process not being aborted, and
// counts it before the call reads anything of it: a communicator that ncclCommAbort has
// marked gets no new call, and one with a call counted is not freed under it.
class InFlight {
 public:
  InFlight() = default;
  ~InFlight() {
    if (comm_ != nullptr) comm_->in_flight.fetch_sub(1, std::memory_order_acq_rel);
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  // An error (naming function, the pointer and the rank where known) when comm is NULL,
  // destroyed, never made by this library, or being aborted; nothing is counted then.
  ncclResult_t enter(const char* function, ncclComm* comm);

 private:
  ncclComm* comm_ = nullptr;
};

// A communicator made by this library: from now on InFlight::enter accepts it.
void register_comm(ncclComm* comm);

// Seconds any wait may last (KOLO_TIMEOUT, as kolo's own waits).
double timeout_seconds();
}  // namespace kolo_nccl
