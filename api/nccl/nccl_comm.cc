// Communicators: the unique id, the ways NCCL makes a communicator (by rank, with a
// config, all in one process, by splitting), their queries and their end; device memory
// and its registration.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "api/nccl/nccl_internal.h"

using kolo_nccl::fail;
using kolo_nccl::words;

static_assert(sizeof(ncclUniqueId) == sizeof(kolo_unique_id), "NCCL's unique id carries kolo's, byte for byte");

namespace {

// The communicators this library made and has not freed. A call finds its communicator
// here and counts itself in flight under g_live_mutex, and ncclCommAbort/ncclCommDestroy
// mark theirs under it: no call can start on a communicator between the check that it is
// usable and its count, and none reads a freed one (an address not here is refused before
// anything of it is read). Never destroyed: a thread may still call in while the process
// exits.
std::mutex& g_live_mutex = *new std::mutex;
std::unordered_set<const ncclComm*>& g_live = *new std::unordered_set<const ncclComm*>;

// Takes comm out of g_live (once nothing is in flight on it), so that it can be freed.
void unregister_comm(const ncclComm* comm) {
  std::lock_guard<std::mutex> lock(g_live_mutex);
  g_live.erase(comm);
}

// The error for an address that is not in g_live (nothing of it is read).
ncclResult_t not_live(const char* function, const ncclComm* comm) {
  return fail(ncclInvalidUsage, words(function, " on rank ?: comm ", static_cast<const void*>(comm),
                                      " is not a communicator of this process (destroyed, aborted, or never made by "
                                      "ncclCommInitRank*, ncclCommInitAll or ncclCommSplit)"));
}

ncclResult_t being_aborted(const char* function, const ncclComm* comm) {
  return fail(ncclInvalidUsage, words(function, " on rank ", comm->rank, ": comm ", static_cast<const void*>(comm),
                                      ": the communicator is being aborted (ncclCommAbort)"));
}

// ncclCommDestroy's claim on comm: live, not being aborted, and with no call in flight
// (NCCL's rule; freeing it would pull the memory from under that call). Taken out of g_live
// under the lock, so that no call can start on it afterwards.
ncclResult_t take_for_destroy(const char* function, ncclComm* comm) {
  std::lock_guard<std::mutex> lock(g_live_mutex);
  if (g_live.count(comm) == 0) return not_live(function, comm);
  if (comm->aborting.load(std::memory_order_acquire)) return being_aborted(function, comm);
  if (const int n = comm->in_flight.load(std::memory_order_acquire); n > 0) {
    return fail(ncclInvalidUsage, words(function, " on rank ", comm->rank, ": comm ", static_cast<const void*>(comm),
                                        " has ", n, " call(s) or open group(s) in flight (another thread's, or this "
                                        "thread's unended ncclGroupStart); ncclCommAbort releases blocked calls"));
  }
  g_live.erase(comm);
  return ncclSuccess;
}

// ncclCommAbort's mark, under the lock that InFlight::enter takes: from here on no call
// starts on comm. A second ncclCommAbort of the same communicator is refused (the first
// frees it).
ncclResult_t mark_aborting(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(g_live_mutex);
  if (g_live.count(comm) == 0) return not_live("ncclCommAbort", comm);
  if (comm->aborting.exchange(true, std::memory_order_acq_rel)) {
    return fail(ncclInvalidUsage, words("ncclCommAbort on rank ", comm->rank, ": comm ",
                                        static_cast<const void*>(comm), " is already being aborted by another call"));
  }
  return ncclSuccess;
}

// Waits (at most KOLO_TIMEOUT) for every counted call and open group on comm to end.
bool wait_idle(const ncclComm* comm) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kolo_nccl::timeout_seconds());
  while (comm->in_flight.load(std::memory_order_acquire) > 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// ncclConfig_t::blocking, after checking that the config was initialized as nccl.h asks.
ncclResult_t blocking_of(const char* function, const ncclConfig_t* config, int inherited, int* blocking) {
  *blocking = inherited;
  if (config == nullptr) return ncclSuccess;
  if (config->magic != KOLO_NCCL_CONFIG_MAGIC || config->size < offsetof(ncclConfig_t, cgaClusterSize)) {
    return fail(ncclInvalidArgument, words(function, ": config was not set up with NCCL_CONFIG_INITIALIZER (magic 0x",
                                           std::hex, config->magic, std::dec, ", size ", config->size, ")"));
  }
  if (config->blocking != NCCL_CONFIG_UNDEF_INT) *blocking = config->blocking != 0 ? 1 : 0;
  return ncclSuccess;
}

ncclComm* wrap(kolo_comm_t kolo, int device, int blocking) {
  ncclComm* comm = new ncclComm;
  comm->kolo = kolo;
  comm->rank = kolo_comm_rank(kolo);
  comm->size = kolo_comm_size(kolo);
  comm->device = device;
  comm->blocking = blocking;
  kolo_nccl::register_comm(comm);
  return comm;
}

// What every way of making a communicator from a unique id shares.
ncclResult_t init_rank(const char* function, ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank, int device,
                       int blocking) {
  kolo_nccl::ensure_environment();
  if (ncclResult_t r = kolo_nccl::check_not_backend(function); r != ncclSuccess) return r;
  if (out == nullptr) return fail(ncclInvalidArgument, words(function, ": comm (the output pointer) is NULL"));
  *out = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return fail(ncclInvalidArgument,
                words(function, ": rank ", rank, " of nranks ", nranks, ": need nranks >= 1 and 0 <= rank < nranks"));
  }
  kolo_unique_id kid;
  std::memcpy(kid.internal, id.internal, sizeof(kid.internal));
  kolo_comm_t kolo = nullptr;
  const kolo_result_t r = kolo_comm_init_rank(&kolo, nranks, &kid, rank);
  if (r != KOLO_SUCCESS) {
    return kolo_nccl::from_kolo(r, words(function, " (rank ", rank, " of ", nranks, ")").c_str());
  }
  *out = wrap(kolo, device, blocking);
  return ncclSuccess;
}

// ncclCommInitAll's threads wait here until every one has made its device current: if any
// failed, none goes on to kolo_comm_init_rank (which would wait for the missing rank).
class DeviceGate {
 public:
  explicit DeviceGate(int threads) : waiting_(threads) {}
  // This thread's outcome; true once all have arrived and all succeeded.
  bool all_ready(bool ok) {
    std::unique_lock<std::mutex> lock(mutex_);
    ok_ = ok_ && ok;
    if (--waiting_ == 0) arrived_.notify_all();
    arrived_.wait(lock, [this] { return waiting_ == 0; });
    return ok_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable arrived_;
  int waiting_;
  bool ok_ = true;
};

// A message from ncclGetLastError without this library's "kolo-nccl: " (fail adds it again).
std::string without_prefix(const std::string& message) {
  const std::string prefix = "kolo-nccl: ";
  return message.compare(0, prefix.size(), prefix) == 0 ? message.substr(prefix.size()) : message;
}

// ncclCommRegister's handle: registration is local in NCCL, collective in kolo, so the
// drop-in registers nothing with kolo (see README); the handle lets Deregister check.
struct LocalRegistration {
  const ncclComm* comm;
  void* buffer;
  size_t bytes;
};

}  // namespace

void kolo_nccl::register_comm(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(g_live_mutex);
  g_live.insert(comm);
}

ncclResult_t kolo_nccl::InFlight::enter(const char* function, ncclComm* comm) {
  if (comm == nullptr) return fail(ncclInvalidArgument, words(function, ": comm is NULL"));
  std::lock_guard<std::mutex> lock(g_live_mutex);
  if (g_live.count(comm) == 0) return not_live(function, comm);
  if (comm->aborting.load(std::memory_order_acquire)) return being_aborted(function, comm);
  comm->in_flight.fetch_add(1, std::memory_order_acq_rel);
  comm_ = comm;
  return ncclSuccess;
}

extern "C" {

NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  kolo_nccl::ensure_environment();
  if (uniqueId == nullptr) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  kolo_unique_id kid;
  const kolo_result_t r = kolo_get_unique_id(&kid);
  if (r != KOLO_SUCCESS) return kolo_nccl::from_kolo(r, "ncclGetUniqueId");
  std::memcpy(uniqueId->internal, kid.internal, sizeof(kid.internal));
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
         ncclConfig_t* config) {
  int blocking = 1;
  if (ncclResult_t r = blocking_of("ncclCommInitRankConfig", config, 1, &blocking); r != ncclSuccess) return r;
  return init_rank("ncclCommInitRankConfig", comm, nranks, commId, rank, kolo_nccl::current_device(), blocking);
}

// NCCL spreads the bootstrap over several ids to start faster at scale; kolo's store is
// the one in the process that made commIds[0] (every rank is given the same ids, in the
// same order, so every rank uses the same one).
NCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId,
         ncclUniqueId* commIds, ncclConfig_t* config) {
  const char* function = "ncclCommInitRankScalable";
  if (nId < 1 || commIds == nullptr) {
    return fail(ncclInvalidArgument, words(function, ": rank ", myrank, ": nId = ", nId, ", commIds = ",
                                           static_cast<void*>(commIds), ": need at least one unique id"));
  }
  int blocking = 1;
  if (ncclResult_t r = blocking_of(function, config, 1, &blocking); r != ncclSuccess) return r;
  return init_rank(function, newcomm, nranks, commIds[0], myrank, kolo_nccl::current_device(), blocking);
}

NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return init_rank("ncclCommInitRank", comm, nranks, commId, rank, kolo_nccl::current_device(), 1);
}

// One process, ndev communicators of one clique: kolo_comm_init_rank is collective, so
// each rank is made on its own thread, all from one unique id. Everything that can fail
// on one thread alone is checked before any thread joins kolo's init (a thread that gave
// up would leave the others waiting there until KOLO_TIMEOUT): the arguments and devices
// up front, then making the device current, with every thread waiting for all the others
// to have done so (DeviceGate) before any calls kolo_comm_init_rank.
NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
  const char* function = "ncclCommInitAll";
  kolo_nccl::ensure_environment();
  if (ncclResult_t r = kolo_nccl::check_not_backend(function); r != ncclSuccess) return r;
  if (comms == nullptr) return fail(ncclInvalidArgument, words(function, ": comm (the output array) is NULL"));
  if (ndev < 1) return fail(ncclInvalidArgument, words(function, ": ndev = ", ndev, " must be >= 1"));
  for (int i = 0; i < ndev; ++i) comms[i] = nullptr;  // all or nothing, as NCCL
  for (int i = 0; devlist != nullptr && i < ndev; ++i) {
    for (int j = 0; j < i; ++j) {
      if (devlist[i] == devlist[j]) {
        return fail(ncclInvalidUsage, words(function, ": devlist[", j, "] and devlist[", i, "] are both device ",
                                            devlist[i], "; each communicator needs its own device"));
      }
    }
  }
  if (ncclResult_t r = kolo_nccl::check_devices(function, ndev, devlist); r != ncclSuccess) return r;
  ncclUniqueId id;
  if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) return r;
  std::vector<ncclResult_t> results(ndev, ncclSuccess);
  std::vector<std::string> errors(ndev);
  DeviceGate gate(ndev);
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; ++i) {
    threads.emplace_back([&, i] {
      const int device = devlist != nullptr ? devlist[i] : i;
      results[i] = kolo_nccl::set_thread_device(function, device);
      if (results[i] != ncclSuccess) errors[i] = without_prefix(kolo_nccl::last_error());
      if (!gate.all_ready(results[i] == ncclSuccess)) return;  // one failed: none joins kolo's init
      results[i] = init_rank(function, &comms[i], ndev, id, i, device, 1);
      if (results[i] != ncclSuccess) errors[i] = without_prefix(kolo_nccl::last_error());
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < ndev; ++i) {
    if (results[i] == ncclSuccess) continue;  // made, or stopped at the gate by another's failure
    for (int j = 0; j < ndev; ++j) {  // all or nothing, as NCCL
      if (comms[j] != nullptr) ncclCommDestroy(comms[j]);
      comms[j] = nullptr;
    }
    return fail(results[i], words(function, ": communicator ", i, " of ", ndev, ": ", errors[i]));
  }
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  const char* function = "ncclCommSplit";
  // Counted: the split blocks until every rank has called it, and a watchdog's
  // ncclCommAbort must not free comm under it.
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = in_flight.enter(function, comm); r != ncclSuccess) return r;
  kolo_nccl::note_group_call(comm);
  if (newcomm == nullptr)
    return fail(ncclInvalidArgument, words(function, " on rank ", comm->rank, ": newcomm is NULL"));
  *newcomm = nullptr;
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
    return fail(ncclInvalidArgument,
                words(function, " on rank ", comm->rank, ": color ", color, " must be >= 0 or NCCL_SPLIT_NOCOLOR"));
  }
  int blocking = comm->blocking;
  if (ncclResult_t r = blocking_of(function, config, comm->blocking, &blocking); r != ncclSuccess) return r;
  kolo_comm_t out = nullptr;
  const kolo_result_t r = kolo_comm_split(comm->kolo, color, key, &out);
  if (r != KOLO_SUCCESS) return kolo_nccl::from_kolo(r, function, comm);
  if (out != nullptr) *newcomm = wrap(out, comm->device, blocking);
  return ncclSuccess;
}

// kolo_comm_shrink with the caller's list (NCCL's meaning: every rank not listed must take
// part; an empty list keeps all). NCCL_SHRINK_ABORT first aborts what still runs on comm,
// which a failed communicator needs so that no call of another thread stays blocked in it.
NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
         ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  const char* function = "ncclCommShrink";
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = in_flight.enter(function, comm); r != ncclSuccess) return r;
  if (newcomm == nullptr) return fail(ncclInvalidArgument, words(function, " on rank ", comm->rank, ": newcomm is NULL"));
  *newcomm = nullptr;
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
    return fail(ncclInvalidArgument, words(function, " on rank ", comm->rank, ": shrinkFlags ", shrinkFlags,
                                           " is not NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT"));
  }
  if (excludeRanksCount < 0 || (excludeRanksCount > 0 && excludeRanksList == nullptr)) {
    return fail(ncclInvalidArgument, words(function, " on rank ", comm->rank, ": excludeRanksList ",
                                           static_cast<const void*>(excludeRanksList), " with count ",
                                           excludeRanksCount));
  }
  int blocking = comm->blocking;
  if (ncclResult_t r = blocking_of(function, config, comm->blocking, &blocking); r != ncclSuccess) return r;
  if (shrinkFlags == NCCL_SHRINK_ABORT) (void)kolo_comm_abort(comm->kolo);
  static const int kNone[1] = {0};
  kolo_comm_t out = nullptr;
  const kolo_result_t r =
      kolo_comm_shrink(comm->kolo, excludeRanksCount > 0 ? excludeRanksList : kNone, excludeRanksCount, &out);
  if (r != KOLO_SUCCESS) return kolo_nccl::from_kolo(r, function, comm);
  *newcomm = wrap(out, comm->device, blocking);
  return ncclSuccess;
}

// kolo's host calls are complete when they return and its device calls are flushed by
// kolo_comm_destroy, so there is nothing to flush here; Destroy then frees.
NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = in_flight.enter("ncclCommFinalize", comm); r != ncclSuccess) return r;
  comm->finalized = true;
  return ncclSuccess;
}

// Not to be called while another call on comm runs (as NCCL): that is refused here rather
// than freeing memory the other call uses; ncclCommAbort is the way out of a blocked call.
NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;  // NCCL accepts NULL here
  if (ncclResult_t r = take_for_destroy("ncclCommDestroy", comm); r != ncclSuccess) return r;
  const kolo_result_t r = kolo_comm_destroy(comm->kolo);
  const std::string function = words("ncclCommDestroy on rank ", comm->rank);
  delete comm;
  return r == KOLO_SUCCESS ? ncclSuccess : kolo_nccl::from_kolo(r, function.c_str());
}

// Often called from another thread (a watchdog) while a call blocks on the communicator:
// comm is marked as being aborted first (no call starts on it after that), kolo_comm_abort
// makes the blocked calls return, and the communicator is freed only after every counted
// call, an open group's included, has returned. If they have not within KOLO_TIMEOUT it is
// never freed (leaked, and reported): another thread may still use it.
NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (ncclResult_t r = mark_aborting(comm); r != ncclSuccess) return r;
  // This thread's own open group would otherwise wait for itself; its ncclGroupEnd reports the abort.
  kolo_nccl::drop_group_hold(comm);
  kolo_result_t r = kolo_comm_abort(comm->kolo);
  if (!wait_idle(comm)) {
    return fail(ncclSystemError, words("ncclCommAbort on rank ", comm->rank, ": ", comm->in_flight.load(),
                                       " call(s) or open group(s) on comm ", static_cast<const void*>(comm),
                                       " did not return within KOLO_TIMEOUT = ", kolo_nccl::timeout_seconds(),
                                       " s; the communicator is left allocated (leaked), not freed under them"));
  }
  unregister_comm(comm);
  const kolo_result_t destroyed = kolo_comm_destroy(comm->kolo);
  if (r == KOLO_SUCCESS) r = destroyed;
  const std::string function = words("ncclCommAbort on rank ", comm->rank);
  delete comm;
  return r == KOLO_SUCCESS ? ncclSuccess : kolo_nccl::from_kolo(r, function.c_str());
}

NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  const char* function = "ncclCommGetAsyncError";
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = in_flight.enter(function, comm); r != ncclSuccess) return r;
  if (asyncError == nullptr)
    return fail(ncclInvalidArgument, words(function, " on rank ", comm->rank, ": asyncError is NULL"));
  kolo_result_t async = KOLO_SUCCESS;
  const kolo_result_t r = kolo_comm_get_async_error(comm->kolo, &async);
  if (r != KOLO_SUCCESS) return kolo_nccl::from_kolo(r, function, comm);
  *asyncError = kolo_nccl::result_of(async);
  if (async != KOLO_SUCCESS) kolo_nccl::from_kolo(async, function, comm);  // keeps kolo's words for ncclGetLastError
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = in_flight.enter("ncclCommCount", comm); r != ncclSuccess) return r;
  if (count == nullptr)
    return fail(ncclInvalidArgument, words("ncclCommCount on rank ", comm->rank, ": count is NULL"));
  *count = comm->size;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = in_flight.enter("ncclCommCuDevice", comm); r != ncclSuccess) return r;
  if (device == nullptr)
    return fail(ncclInvalidArgument, words("ncclCommCuDevice on rank ", comm->rank, ": device is NULL"));
  *device = comm->device;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = in_flight.enter("ncclCommUserRank", comm); r != ncclSuccess) return r;
  if (rank == nullptr)
    return fail(ncclInvalidArgument, words("ncclCommUserRank on rank ", comm->rank, ": rank is NULL"));
  *rank = comm->rank;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
  kolo_nccl::ensure_environment();
  const kolo_result_t r = kolo_mem_alloc(ptr, size);
  return r == KOLO_SUCCESS ? ncclSuccess : kolo_nccl::from_kolo(r, "ncclMemAlloc");
}

NCCL_API(ncclResult_t, ncclMemFree, void* ptr) {
  const kolo_result_t r = kolo_mem_free(ptr);
  return r == KOLO_SUCCESS ? ncclSuccess : kolo_nccl::from_kolo(r, "ncclMemFree");
}

// Local, as NCCL's: nothing is registered with kolo (its registration is collective; an
// application registers its buffers in whatever order its allocator hands them out).
// Collectives on the buffer work as on any other; they are staged, not read in place.
NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle) {
  const char* function = "ncclCommRegister";
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = in_flight.enter(function, comm); r != ncclSuccess) return r;
  if (handle == nullptr || buff == nullptr || size == 0) {
    return fail(ncclInvalidArgument, words(function, " on rank ", comm->rank, ": buff ", buff, ", size ", size,
                                           ", handle ", static_cast<void*>(handle), ": none may be NULL or 0"));
  }
  *handle = new LocalRegistration{comm, buff, size};
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
  const char* function = "ncclCommDeregister";
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = in_flight.enter(function, comm); r != ncclSuccess) return r;
  auto* registration = static_cast<LocalRegistration*>(handle);
  if (registration == nullptr || registration->comm != comm) {
    return fail(ncclInvalidArgument, words(function, " on rank ", comm->rank, ": handle ", handle,
                                           " was not given by ncclCommRegister on this communicator"));
  }
  delete registration;
  return ncclSuccess;
}

// Collective in NCCL as in kolo: kolo_mem_register, whose window k is the k-th
// registration of every rank; device buffers only. Counted in flight like a collective (it
// blocks until every rank has called it), Deregister too.
NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
         int winFlags) {
  const char* function = "ncclCommWindowRegister";
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = in_flight.enter(function, comm); r != ncclSuccess) return r;
  kolo_nccl::note_group_call(comm);
  if (win == nullptr) return fail(ncclInvalidArgument, words(function, " on rank ", comm->rank, ": win is NULL"));
  if ((winFlags & ~0x01) != 0) {
    return fail(ncclInvalidArgument, words(function, " on rank ", comm->rank, ": winFlags 0x", std::hex, winFlags,
                                           " has bits other than NCCL_WIN_COLL_SYMMETRIC"));
  }
  void* handle = nullptr;
  const kolo_result_t r = kolo_mem_register(comm->kolo, buff, size, &handle);
  if (r != KOLO_SUCCESS) return kolo_nccl::from_kolo(r, function, comm);
  *win = static_cast<ncclWindow_t>(handle);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = in_flight.enter("ncclCommWindowDeregister", comm); r != ncclSuccess) return r;
  kolo_nccl::note_group_call(comm);
  const kolo_result_t r = kolo_mem_deregister(comm->kolo, win);
  return r == KOLO_SUCCESS ? ncclSuccess : kolo_nccl::from_kolo(r, "ncclCommWindowDeregister", comm);
}

}  // extern "C"
