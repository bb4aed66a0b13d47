// C entry points for communicators: creation, queries, split, destroy, abort, errors.
#include <algorithm>
#include <cstring>
#include <vector>

#include "api/api_support.h"
#include "engine/world.h"
#include "kernels/dtype.h"
#include "support/device/device.h"

namespace kolo {
const char* last_error_text();
void abort_runtime(kolo_comm_t comm);  // api/runtime_api.cc
}  // namespace kolo

using kolo::Code;
using kolo::Status;
using kolo::api_call;
using kolo::error;

static_assert(static_cast<int>(kolo::DType::kCount) == KOLO_DTYPE_COUNT, "dtype enums must match");
static_assert(static_cast<int>(kolo::DType::kFloat8E5M2) == KOLO_FLOAT8_E5M2, "dtype enums must match");
static_assert(static_cast<int>(kolo::ReduceOp::kCount) == KOLO_OP_COUNT, "op enums must match");
static_assert(static_cast<int>(kolo::Code::kInternal) == KOLO_ERR_INTERNAL, "result codes must match");

namespace {

// Wraps a new communicator in a handle; sets *out only after success.
Status publish(kolo::Result<std::unique_ptr<kolo::Communicator>> made, kolo_comm_t* out) {
  if (!made.ok()) return made.status();
  if (!made.value()) {
    *out = nullptr;
    return Status();
  }
  auto* handle = new kolo_comm{made.take()};
  kolo::register_comm(handle);
  *out = handle;
  return Status();
}

int query(kolo_comm_t comm, const char* function, int (kolo::Communicator::*getter)() const) {
  int value = -1;
  api_call(function, [&]() -> Status {
    KOLO_TRY(kolo::check_comm(comm));
    value = (comm->impl.get()->*getter)();
    return Status();
  });
  return value;
}

// A question that may fail (it reads the job's store): *out is set only when answered.
template <class T>
kolo_result_t ask(kolo_comm_t comm, const char* function, const char* out_name, int* out,
                  kolo::Result<T> (kolo::Communicator::*question)()) {
  return api_call(function, [&]() -> Status {
    KOLO_TRY(kolo::check_comm(comm));
    if (out == nullptr) return error(Code::kInvalidArgument, out_name, " is NULL");
    kolo::Result<T> answer = (comm->impl.get()->*question)();
    if (!answer.ok()) return answer.status();
    *out = static_cast<int>(answer.value());
    return Status();
  });
}

}  // namespace

extern "C" {

int kolo_version(void) { return KOLO_VERSION_CODE; }

const char* kolo_result_string(kolo_result_t result) {
  if (static_cast<int>(result) < 0 || result > KOLO_ERR_INTERNAL) return "unknown result code";
  return kolo::code_name(static_cast<Code>(result));
}

const char* kolo_last_error(void) { return kolo::last_error_text(); }

kolo_result_t kolo_init(kolo_comm_t* comm) {
  return api_call("kolo_init", [&]() -> Status {
    if (comm == nullptr) return error(Code::kInvalidArgument, "comm (the output pointer) is NULL");
    return publish(kolo::init_world(), comm);
  });
}

kolo_result_t kolo_get_unique_id(kolo_unique_id* id) {
  return api_call("kolo_get_unique_id", [&]() -> Status {
    if (id == nullptr) return error(Code::kInvalidArgument, "id is NULL");
    return kolo::make_unique_id(id->internal);
  });
}

kolo_result_t kolo_comm_init_rank(kolo_comm_t* comm, int nranks, const kolo_unique_id* id, int rank) {
  return api_call("kolo_comm_init_rank", [&]() -> Status {
    if (comm == nullptr) return error(Code::kInvalidArgument, "comm (the output pointer) is NULL");
    if (id == nullptr) return error(Code::kInvalidArgument, "id is NULL");
    if (nranks < 1) return error(Code::kInvalidArgument, "nranks = ", nranks, " must be >= 1");
    KOLO_TRY(kolo::check_rank("rank", rank, nranks));
    return publish(kolo::init_from_unique_id(id->internal, nranks, rank), comm);
  });
}

kolo_result_t kolo_comm_split(kolo_comm_t comm, int color, int key, kolo_comm_t* out) {
  return api_call("kolo_comm_split", [&]() -> Status {
    KOLO_TRY(kolo::check_comm(comm));
    if (out == nullptr) return error(Code::kInvalidArgument, "out (the output pointer) is NULL");
    return publish(comm->impl->split(color, key), out);
  });
}

kolo_result_t kolo_comm_shrink(kolo_comm_t comm, const int* exclude, int n_exclude, kolo_comm_t* out) {
  return api_call("kolo_comm_shrink", [&]() -> Status {
    KOLO_TRY(kolo::check_comm(comm));
    if (out == nullptr) return error(Code::kInvalidArgument, "out (the output pointer) is NULL");
    *out = nullptr;
    if (n_exclude < 0 || (n_exclude > 0 && exclude == nullptr)) {
      return error(Code::kInvalidArgument, "exclude = ", static_cast<const void*>(exclude), " with n_exclude = ",
                   n_exclude, ": give a list of n_exclude >= 0 ranks, or NULL and 0");
    }
    const std::vector<int> ranks(exclude, exclude + n_exclude);
    return publish(comm->impl->shrink(ranks, exclude != nullptr), out);
  });
}

kolo_result_t kolo_comm_rebuild(kolo_comm_t comm, kolo_comm_t* out) {
  return api_call("kolo_comm_rebuild", [&]() -> Status {
    KOLO_TRY(kolo::check_comm(comm));
    if (out == nullptr) return error(Code::kInvalidArgument, "out (the output pointer) is NULL");
    *out = nullptr;
    return publish(comm->impl->rebuild(), out);
  });
}

int kolo_comm_epoch(kolo_comm_t comm) { return query(comm, "kolo_comm_epoch", &kolo::Communicator::epoch); }

kolo_result_t kolo_comm_pending_joiners(kolo_comm_t comm, int* count) {
  return ask(comm, "kolo_comm_pending_joiners", "count", count, &kolo::Communicator::pending_joiners);
}

kolo_result_t kolo_comm_leaving(kolo_comm_t comm, int* leaving) {
  return ask(comm, "kolo_comm_leaving", "leaving", leaving, &kolo::Communicator::leaving);
}

kolo_result_t kolo_comm_worker_id(kolo_comm_t comm, char* buf, size_t size) {
  return api_call("kolo_comm_worker_id", [&]() -> Status {
    KOLO_TRY(kolo::check_comm(comm));
    const std::string& id = comm->impl->lineage().members[comm->impl->rank()];
    if (buf == nullptr || size < id.size() + 1) {
      return error(Code::kInvalidArgument, "buf of ", size, " bytes cannot hold the worker id '", id, "' (",
                   id.size() + 1, " bytes with its NUL)");
    }
    std::memcpy(buf, id.c_str(), id.size() + 1);
    return Status();
  });
}

kolo_result_t kolo_comm_destroy(kolo_comm_t comm) {
  return api_call("kolo_comm_destroy", [&]() -> Status {
    KOLO_TRY(kolo::check_comm(comm));
    kolo::unregister_comm(comm);
    delete comm;
    return Status();
  });
}

kolo_result_t kolo_comm_abort(kolo_comm_t comm) {
  return api_call("kolo_comm_abort", [&]() -> Status {
    KOLO_TRY(kolo::check_comm(comm));
    comm->impl->abort();
    kolo::abort_runtime(comm);
    return Status();
  });
}

kolo_result_t kolo_mem_alloc(void** ptr, size_t bytes) {
  return api_call("kolo_mem_alloc", [&]() -> Status {
    if (ptr == nullptr) return error(Code::kInvalidArgument, "ptr is NULL");
    if (bytes == 0) return error(Code::kInvalidArgument, "bytes is 0");
    return kolo::device::runtime().malloc(ptr, bytes);
  });
}

kolo_result_t kolo_mem_free(void* ptr) {
  return api_call("kolo_mem_free", [&]() -> Status {
    if (ptr == nullptr) return Status();
    return kolo::device::runtime().free(ptr);
  });
}

kolo_result_t kolo_mem_register(kolo_comm_t comm, void* buffer, size_t bytes, void** handle) {
  return api_call("kolo_mem_register", [&]() -> Status {
    KOLO_TRY(kolo::check_comm(comm));
    if (handle == nullptr) return error(Code::kInvalidArgument, "handle is NULL");
    if (buffer == nullptr || bytes == 0) {
      return error(Code::kInvalidArgument, "rank ", comm->impl->rank(), ": registering ", bytes, " bytes at ", buffer,
                   ": give a device buffer and its size");
    }
    if (kolo::device::runtime().pointer_info(buffer).kind != kolo::device::MemoryKind::kDevice) {
      return error(Code::kInvalidArgument, "rank ", comm->impl->rank(), ": ", buffer,
                   " is not device memory; only device buffers are registered");
    }
    kolo::Result<int> id = comm->impl->register_memory(buffer, bytes);
    if (!id.ok()) return id.status();
    *handle = reinterpret_cast<void*>(static_cast<uintptr_t>(id.value()) + 1);  // never NULL
    return Status();
  });
}

kolo_result_t kolo_mem_deregister(kolo_comm_t comm, void* handle) {
  return api_call("kolo_mem_deregister", [&]() -> Status {
    KOLO_TRY(kolo::check_comm(comm));
    const uintptr_t h = reinterpret_cast<uintptr_t>(handle);
    if (h == 0 || h > static_cast<uintptr_t>(INT32_MAX)) {
      return error(Code::kInvalidArgument, "rank ", comm->impl->rank(), ": ", handle,
                   " is not a handle kolo_mem_register gave");
    }
    return comm->impl->deregister_memory(static_cast<int>(h - 1));
  });
}

kolo_result_t kolo_comm_get_async_error(kolo_comm_t comm, kolo_result_t* async_error) {
  return api_call("kolo_comm_get_async_error", [&]() -> Status {
    KOLO_TRY(kolo::check_comm(comm));
    if (async_error == nullptr) return error(Code::kInvalidArgument, "async_error is NULL");
    const Status failure = comm->impl->async_error();
    *async_error = static_cast<kolo_result_t>(failure.code());
    // The caller asks what went wrong: leave it for kolo_last_error() on this thread.
    if (!failure.ok()) kolo::api_result("kolo_comm_get_async_error", failure);
    return Status();
  });
}

kolo_result_t kolo_comm_set_timeout(kolo_comm_t comm, double seconds) {
  return api_call("kolo_comm_set_timeout", [&]() -> Status {
    KOLO_TRY(kolo::check_comm(comm));
    if (!(seconds > 0)) {  // NaN too
      return kolo::error(kolo::Code::kInvalidArgument, "kolo_comm_set_timeout: seconds = ", seconds,
                         " is not a positive number of seconds");
    }
    comm->impl->set_timeout(std::min(seconds, 1e9));
    return kolo::Status();
  });
}

kolo_result_t kolo_comm_dump(kolo_comm_t comm, const char* folder) {
  return api_call("kolo_comm_dump", [&]() -> Status {
    if (comm == nullptr) {  // every communicator of this process
      return kolo::dump_all_recorders(kolo::DumpRequest{folder != nullptr ? folder : "", "request", ""}).status();
    }
    KOLO_TRY(kolo::check_comm(comm));
    kolo::Result<std::string> path = comm->impl->dump_trace(folder != nullptr ? folder : "");
    return path.status();
  });
}

int kolo_comm_rank(kolo_comm_t comm) { return query(comm, "kolo_comm_rank", &kolo::Communicator::rank); }
int kolo_comm_size(kolo_comm_t comm) { return query(comm, "kolo_comm_size", &kolo::Communicator::size); }
int kolo_comm_local_rank(kolo_comm_t comm) {
  return query(comm, "kolo_comm_local_rank", &kolo::Communicator::local_rank);
}
int kolo_comm_local_size(kolo_comm_t comm) {
  return query(comm, "kolo_comm_local_size", &kolo::Communicator::local_size);
}
int kolo_comm_cross_rank(kolo_comm_t comm) {
  return query(comm, "kolo_comm_cross_rank", &kolo::Communicator::cross_rank);
}
int kolo_comm_cross_size(kolo_comm_t comm) {
  return query(comm, "kolo_comm_cross_size", &kolo::Communicator::cross_size);
}

}  // extern "C"
