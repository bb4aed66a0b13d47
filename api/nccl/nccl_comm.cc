// Communicators: the unique id, the ways NCCL makes a communicator (by rank, with a
// config, all in one process, by splitting), their queries and their end; device memory
// and its registration.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "api/nccl/nccl_internal.h"

using kolo_nccl::fail;
using kolo_nccl::words;

static_assert(sizeof(ncclUniqueId) == sizeof(kolo_unique_id), "NCCL's unique id carries kolo's, byte for byte");

namespace {

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

// ncclCommRegister's handle: registration is local in NCCL, collective in kolo, so the
// drop-in registers nothing with kolo (see README); the handle lets Deregister check.
struct LocalRegistration {
  const ncclComm* comm;
  void* buffer;
  size_t bytes;
};

}  // namespace

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
// each rank is made on its own thread, all from one unique id.
NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
  const char* function = "ncclCommInitAll";
  kolo_nccl::ensure_environment();
  if (ncclResult_t r = kolo_nccl::check_not_backend(function); r != ncclSuccess) return r;
  if (comms == nullptr) return fail(ncclInvalidArgument, words(function, ": comm (the output array) is NULL"));
  if (ndev < 1) return fail(ncclInvalidArgument, words(function, ": ndev = ", ndev, " must be >= 1"));
  for (int i = 0; devlist != nullptr && i < ndev; ++i) {
    for (int j = 0; j < i; ++j) {
      if (devlist[i] == devlist[j]) {
        return fail(ncclInvalidUsage, words(function, ": devlist[", j, "] and devlist[", i, "] are both device ",
                                            devlist[i], "; each communicator needs its own device"));
      }
    }
  }
  ncclUniqueId id;
  if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) return r;
  std::vector<ncclResult_t> results(ndev, ncclSuccess);
  std::vector<std::string> errors(ndev);
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; ++i) {
    threads.emplace_back([&, i] {
      const int device = devlist != nullptr ? devlist[i] : i;
      results[i] = kolo_nccl::set_thread_device(function, device);
      if (results[i] == ncclSuccess) results[i] = init_rank(function, &comms[i], ndev, id, i, device, 1);
      if (results[i] != ncclSuccess) errors[i] = kolo_nccl::last_error();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < ndev; ++i) {
    if (results[i] == ncclSuccess) continue;
    for (int j = 0; j < ndev; ++j) {  // all or nothing, as NCCL
      if (results[j] == ncclSuccess) ncclCommDestroy(comms[j]);
      comms[j] = nullptr;
    }
    return fail(results[i], words(function, ": communicator ", i, " of ", ndev, ": ", errors[i]));
  }
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  const char* function = "ncclCommSplit";
  if (ncclResult_t r = kolo_nccl::check_comm(function, comm); r != ncclSuccess) return r;
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

// kolo's host calls are complete when they return and its device calls are flushed by
// kolo_comm_destroy, so there is nothing to flush here; Destroy then frees.
NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  if (ncclResult_t r = kolo_nccl::check_comm("ncclCommFinalize", comm); r != ncclSuccess) return r;
  comm->finalized = true;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;  // NCCL accepts NULL here
  if (ncclResult_t r = kolo_nccl::check_comm("ncclCommDestroy", comm); r != ncclSuccess) return r;
  const kolo_result_t r = kolo_comm_destroy(comm->kolo);
  const std::string function = words("ncclCommDestroy on rank ", comm->rank);
  comm->kolo = nullptr;
  delete comm;
  return r == KOLO_SUCCESS ? ncclSuccess : kolo_nccl::from_kolo(r, function.c_str());
}

// Often called from another thread (a watchdog) while a call blocks on the communicator:
// kolo_comm_abort makes such calls return, and the communicator is freed only after they
// have (or, if they have not within KOLO_TIMEOUT, left allocated and reported).
NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  if (ncclResult_t r = kolo_nccl::check_comm("ncclCommAbort", comm); r != ncclSuccess) return r;
  kolo_result_t r = kolo_comm_abort(comm->kolo);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kolo_nccl::timeout_seconds());
  while (comm->in_flight.load(std::memory_order_acquire) > 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      return fail(ncclSystemError, words("ncclCommAbort on rank ", comm->rank, ": ", comm->in_flight.load(),
                                         " call(s) on the communicator did not return within KOLO_TIMEOUT = ",
                                         kolo_nccl::timeout_seconds(), " s; the communicator is left allocated"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const kolo_result_t destroyed = kolo_comm_destroy(comm->kolo);
  if (r == KOLO_SUCCESS) r = destroyed;
  const std::string function = words("ncclCommAbort on rank ", comm->rank);
  comm->kolo = nullptr;
  delete comm;
  return r == KOLO_SUCCESS ? ncclSuccess : kolo_nccl::from_kolo(r, function.c_str());
}

NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  const char* function = "ncclCommGetAsyncError";
  if (ncclResult_t r = kolo_nccl::check_comm(function, comm); r != ncclSuccess) return r;
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
  if (ncclResult_t r = kolo_nccl::check_comm("ncclCommCount", comm); r != ncclSuccess) return r;
  if (count == nullptr)
    return fail(ncclInvalidArgument, words("ncclCommCount on rank ", comm->rank, ": count is NULL"));
  *count = comm->size;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  if (ncclResult_t r = kolo_nccl::check_comm("ncclCommCuDevice", comm); r != ncclSuccess) return r;
  if (device == nullptr)
    return fail(ncclInvalidArgument, words("ncclCommCuDevice on rank ", comm->rank, ": device is NULL"));
  *device = comm->device;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  if (ncclResult_t r = kolo_nccl::check_comm("ncclCommUserRank", comm); r != ncclSuccess) return r;
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
  if (ncclResult_t r = kolo_nccl::check_comm(function, comm); r != ncclSuccess) return r;
  if (handle == nullptr || buff == nullptr || size == 0) {
    return fail(ncclInvalidArgument, words(function, " on rank ", comm->rank, ": buff ", buff, ", size ", size,
                                           ", handle ", static_cast<void*>(handle), ": none may be NULL or 0"));
  }
  *handle = new LocalRegistration{comm, buff, size};
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
  const char* function = "ncclCommDeregister";
  if (ncclResult_t r = kolo_nccl::check_comm(function, comm); r != ncclSuccess) return r;
  auto* registration = static_cast<LocalRegistration*>(handle);
  if (registration == nullptr || registration->comm != comm) {
    return fail(ncclInvalidArgument, words(function, " on rank ", comm->rank, ": handle ", handle,
                                           " was not given by ncclCommRegister on this communicator"));
  }
  delete registration;
  return ncclSuccess;
}

// Collective in NCCL as in kolo: kolo_mem_register, whose window k is the k-th
// registration of every rank; device buffers only.
NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
         int winFlags) {
  const char* function = "ncclCommWindowRegister";
  if (ncclResult_t r = kolo_nccl::check_comm(function, comm); r != ncclSuccess) return r;
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
  if (ncclResult_t r = kolo_nccl::check_comm("ncclCommWindowDeregister", comm); r != ncclSuccess) return r;
  const kolo_result_t r = kolo_mem_deregister(comm->kolo, win);
  return r == KOLO_SUCCESS ? ncclSuccess : kolo_nccl::from_kolo(r, "ncclCommWindowDeregister", comm);
}

}  // extern "C"
