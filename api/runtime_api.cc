// C entry points of the Horovod-style runtime (engine/runtime/): argument checks, then a
// Request handed to the communicator's runtime, which the first call starts.
#include <cmath>
#include <mutex>
#include <unordered_set>

#include "api/api_support.h"
#include "engine/runtime/runtime.h"
#include "support/device/buffer_place.h"
#include "support/env.h"

using kolo::Code;
using kolo::Status;
using kolo::api_call;
using kolo::error;
using kolo::runtime::OpKind;
using kolo::runtime::Request;
using kolo::runtime::Runtime;

struct kolo_request {
  std::shared_ptr<Request> impl;
  // The runtime that holds the request's name until kolo_request_free releases it (gone
  // once the communicator is destroyed).
  std::weak_ptr<Runtime> runtime;
};

namespace {

std::mutex g_mutex;        // the live-request registry
std::mutex g_start_mutex;  // runtime start-up (held through the rendezvous)
std::unordered_set<const kolo_request*>& live_requests() {
  static auto* set = new std::unordered_set<const kolo_request*>();
  return *set;
}

Status check_request(kolo_request_t request) {
  if (request == nullptr) return error(Code::kInvalidArgument, "request is NULL");
  std::lock_guard<std::mutex> lock(g_mutex);
  if (live_requests().count(request) == 0) {
    return error(Code::kInvalidUsage, "request ", static_cast<const void*>(request),
                 " is not a live request (never made, or already freed)");
  }
  return Status();
}

// The communicator's runtime, started on first use. Starting is a rendezvous of every rank
// of the communicator through the store.
kolo::Result<Runtime*> runtime_of(kolo_comm_t comm) {
  std::lock_guard<std::mutex> lock(g_start_mutex);
  if (!comm->runtime) {
    auto settings = kolo::runtime::RuntimeSettings::from_environment();
    if (!settings.ok()) return settings.status();
    auto started = Runtime::start(*comm->impl, settings.value());
    if (!started.ok()) return started.status();
    // Atomic: kolo_comm_abort reads it from any thread (abort_runtime).
    std::atomic_store(&comm->runtime, std::shared_ptr<Runtime>(started.take()));
  }
  return comm->runtime.get();
}

}  // namespace

namespace kolo {
// kolo_comm_abort: the runtime's own communicator too, so that its thread's cycle fails now
// and destroying the communicator does not wait for it (an elastic rebuild after a death).
void abort_runtime(kolo_comm_t comm) {
  if (std::shared_ptr<Runtime> runtime = std::atomic_load(&comm->runtime)) runtime->abort();
}
}  // namespace kolo

namespace {

constexpr int kMaxDims = 64;  // kolo_enqueue_options.ndim

Status check_scale(const char* name, double value) {
  if (!std::isfinite(value)) return error(Code::kInvalidArgument, name, " = ", value, " is not finite");
  return Status();
}

// Checks shared by every enqueue; fills the parts of the request that come from them.
Status check_enqueue(const char* name, kolo_dtype_t dtype, const kolo_enqueue_options* options, kolo_comm_t comm,
                     kolo_request_t* out, Request& request) {
  KOLO_TRY(kolo::check_comm(comm));
  KOLO_TRY(kolo::check_dtype(dtype));
  if (name == nullptr || name[0] == '\0') return error(Code::kInvalidArgument, "name is NULL or empty");
  if (out == nullptr) return error(Code::kInvalidArgument, "request (the output pointer) is NULL");
  request.name = name;
  request.sig.dtype = static_cast<kolo::DType>(dtype);
  if (options == nullptr) return Status();
  KOLO_TRY(check_scale("prescale", options->prescale));
  KOLO_TRY(check_scale("postscale", options->postscale));
  request.sig.prescale = options->prescale;
  request.sig.postscale = options->postscale;
  if (options->ndim < 0 || options->ndim > kMaxDims) {
    return error(Code::kInvalidArgument, "options->ndim = ", options->ndim, " is not in [0, ", kMaxDims, "]");
  }
  if (options->ndim > 0) {
    if (options->shape == nullptr) return error(Code::kInvalidArgument, "options->ndim > 0 but options->shape is NULL");
    request.sig.shape.assign(options->shape, options->shape + options->ndim);
    for (int64_t d : request.sig.shape) {
      if (d < 0) return error(Code::kInvalidArgument, "options->shape has a negative dimension (", d, ")");
    }
  }
  if (options->alloc != nullptr) {
    kolo_output_alloc_fn alloc = options->alloc;
    void* data = options->alloc_data;
    request.alloc = [alloc, data](size_t total, const std::vector<size_t>& counts) {
      return alloc(data, total, counts.data(), static_cast<int>(counts.size()));
    };
  }
  return Status();
}

// Host or device memory: every buffer of a request must be of one kind, and device
// buffers of one device. Called for each buffer the request reads or writes.
Status place(Request& request, const char* name, const void* buffer, kolo::device::BufferPlace* seen) {
  Status s = seen->add(name, buffer);
  if (!s.ok()) return s.with_context(kolo::str_cat("tensor '", request.name, "': "));
  request.sig.device = seen->on_device();
  request.device = seen->device_index();
  return Status();
}

// Device tensors: the runtime's stream must wait for the work the producer's stream holds
// now (Horovod's ready event), so an event is recorded on it at enqueue.
Status record_ready(Request& request, void* stream) {
  if (!request.sig.device) return Status();
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  kolo::device::ScopedDevice on(request.device);
  KOLO_TRY(on.status());
  KOLO_TRY(dev.event_create(&request.ready));
  return dev.event_record(request.ready, stream);
}

// Hands the request to the runtime; sets *out only after success.
Status submit(kolo_comm_t comm, std::shared_ptr<Request> request, const kolo_enqueue_options* options,
              kolo_request_t* out) {
  if (options != nullptr && options->wire_dtype != KOLO_DTYPE_COUNT &&
      options->wire_dtype != static_cast<kolo_dtype_t>(request->sig.dtype)) {
    if (request->sig.kind != OpKind::kAllreduce) {
      return error(Code::kUnsupported, "tensor '", request->name, "': wire_dtype compresses allreduces only, not ",
                   kolo::runtime::op_kind_name(request->sig.kind));
    }
    KOLO_TRY(kolo::check_wire(options->wire_dtype, static_cast<kolo_dtype_t>(request->sig.dtype),
                              static_cast<kolo_op_t>(request->sig.op)));
    request->sig.wire = static_cast<kolo::DType>(options->wire_dtype);
  }
  KOLO_TRY(record_ready(*request, options != nullptr ? options->stream : nullptr));
  auto runtime = runtime_of(comm);
  if (!runtime.ok()) return runtime.status();
  auto* handle = new kolo_request{request, comm->runtime};
  if (options != nullptr && options->callback != nullptr) {
    kolo_completion_fn callback = options->callback;
    void* data = options->callback_data;
    request->on_complete = [callback, data, handle](const Status& status) {
      callback(handle, static_cast<kolo_result_t>(status.code()), data);
    };
  }
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    live_requests().insert(handle);
  }
  Status s = runtime.value()->enqueue(std::move(request));
  if (!s.ok()) {
    std::lock_guard<std::mutex> lock(g_mutex);
    live_requests().erase(handle);
    delete handle;
    return s;
  }
  *out = handle;
  return Status();
}

Status check_reduce_op(kolo_op_t op, kolo_dtype_t dtype, const char* collective, Request& request) {
  KOLO_TRY(kolo::check_reduction_op(op, dtype, collective));
  request.sig.op = static_cast<kolo::ReduceOp>(op);
  return Status();
}

}  // namespace

extern "C" {

kolo_result_t kolo_enqueue_allreduce_group(const char* name, int ntensors, const void* const* sends,
                                           void* const* recvs, const size_t* counts, kolo_dtype_t dtype,
                                           kolo_op_t op, const kolo_enqueue_options* options, kolo_comm_t comm,
                                           kolo_request_t* out) {
  return api_call("kolo_enqueue_allreduce", [&]() -> Status {
    auto request = std::make_shared<Request>();
    KOLO_TRY(check_enqueue(name, dtype, options, comm, out, *request));
    KOLO_TRY(check_reduce_op(op, dtype, "allreduce", *request));
    if (ntensors < 1) return error(Code::kInvalidArgument, "ntensors = ", ntensors, " must be >= 1");
    if (sends == nullptr || recvs == nullptr || counts == nullptr) {
      return error(Code::kInvalidArgument, "sends, recvs or counts is NULL");
    }
    const size_t elem = kolo::dtype_size(request->sig.dtype);
    kolo::device::BufferPlace seen;
    for (int t = 0; t < ntensors; ++t) {
      KOLO_TRY(kolo::check_buffer(kolo::str_cat("sends[", t, "]").c_str(), sends[t], counts[t]));
      KOLO_TRY(place(*request, kolo::str_cat("sends[", t, "]").c_str(), sends[t], &seen));
      KOLO_TRY(kolo::check_buffer(kolo::str_cat("recvs[", t, "]").c_str(), recvs[t], counts[t]));
      KOLO_TRY(place(*request, kolo::str_cat("recvs[", t, "]").c_str(), recvs[t], &seen));
      KOLO_TRY(kolo::check_no_partial_overlap(sends[t], counts[t] * elem, recvs[t], counts[t] * elem));
      request->sends.push_back(sends[t]);
      request->recvs.push_back(recvs[t]);
      request->sig.counts.push_back(counts[t]);
    }
    request->sig.kind = OpKind::kAllreduce;
    return submit(comm, std::move(request), options, out);
  });
}

kolo_result_t kolo_enqueue_allreduce(const char* name, const void* send, void* recv, size_t count,
                                     kolo_dtype_t dtype, kolo_op_t op, const kolo_enqueue_options* options,
                                     kolo_comm_t comm, kolo_request_t* out) {
  return kolo_enqueue_allreduce_group(name, 1, &send, &recv, &count, dtype, op, options, comm, out);
}

kolo_result_t kolo_enqueue_allgather(const char* name, const void* send, size_t rows, size_t row_count,
                                     kolo_dtype_t dtype, const kolo_enqueue_options* options, kolo_comm_t comm,
                                     kolo_request_t* out) {
  return api_call("kolo_enqueue_allgather", [&]() -> Status {
    auto request = std::make_shared<Request>();
    KOLO_TRY(check_enqueue(name, dtype, options, comm, out, *request));
    kolo::device::BufferPlace seen;
    KOLO_TRY(kolo::check_buffer("send", send, rows * row_count));
    KOLO_TRY(place(*request, "send", send, &seen));
    if (!request->alloc) return error(Code::kInvalidArgument, "options->alloc is NULL: allgather needs it");
    request->sig.kind = OpKind::kAllgather;
    request->sig.counts = {row_count};
    request->local = {rows};
    request->sends = {send};
    request->recvs = {nullptr};
    return submit(comm, std::move(request), options, out);
  });
}

kolo_result_t kolo_enqueue_broadcast(const char* name, void* buf, size_t count, kolo_dtype_t dtype, int root,
                                     const kolo_enqueue_options* options, kolo_comm_t comm, kolo_request_t* out) {
  return api_call("kolo_enqueue_broadcast", [&]() -> Status {
    auto request = std::make_shared<Request>();
    KOLO_TRY(check_enqueue(name, dtype, options, comm, out, *request));
    kolo::device::BufferPlace seen;
    KOLO_TRY(kolo::check_rank("root", root, comm->impl->size()));
    KOLO_TRY(kolo::check_buffer("buf", buf, count));
    KOLO_TRY(place(*request, "buf", buf, &seen));
    request->sig.kind = OpKind::kBroadcast;
    request->sig.root = root;
    request->sig.counts = {count};
    request->sends = {buf};
    request->recvs = {buf};
    return submit(comm, std::move(request), options, out);
  });
}

kolo_result_t kolo_enqueue_alltoall(const char* name, const void* send, const size_t* send_counts,
                                    kolo_dtype_t dtype, const kolo_enqueue_options* options, kolo_comm_t comm,
                                    kolo_request_t* out) {
  return api_call("kolo_enqueue_alltoall", [&]() -> Status {
    auto request = std::make_shared<Request>();
    KOLO_TRY(check_enqueue(name, dtype, options, comm, out, *request));
    kolo::device::BufferPlace seen;
    if (send_counts == nullptr) return error(Code::kInvalidArgument, "send_counts is NULL");
    if (!request->alloc) return error(Code::kInvalidArgument, "options->alloc is NULL: alltoall needs it");
    size_t total = 0;
    for (int q = 0; q < comm->impl->size(); ++q) {
      request->local.push_back(send_counts[q]);
      total += send_counts[q];
    }
    KOLO_TRY(kolo::check_buffer("send", send, total));
    KOLO_TRY(place(*request, "send", send, &seen));
    request->sig.kind = OpKind::kAlltoall;
    request->sends = {send};
    request->recvs = {nullptr};
    return submit(comm, std::move(request), options, out);
  });
}

kolo_result_t kolo_enqueue_reduce_scatter(const char* name, const void* send, void* recv, size_t recvcount,
                                          kolo_dtype_t dtype, kolo_op_t op, const kolo_enqueue_options* options,
                                          kolo_comm_t comm, kolo_request_t* out) {
  return api_call("kolo_enqueue_reduce_scatter", [&]() -> Status {
    auto request = std::make_shared<Request>();
    KOLO_TRY(check_enqueue(name, dtype, options, comm, out, *request));
    kolo::device::BufferPlace seen;
    KOLO_TRY(check_reduce_op(op, dtype, "reduce_scatter", *request));
    KOLO_TRY(kolo::check_buffer("send", send, recvcount));
    KOLO_TRY(place(*request, "send", send, &seen));
    KOLO_TRY(kolo::check_buffer("recv", recv, recvcount));
    KOLO_TRY(place(*request, "recv", recv, &seen));
    const size_t block = recvcount * kolo::dtype_size(request->sig.dtype);
    const char* own = static_cast<const char*>(send) + comm->impl->rank() * block;
    if (recv != own) {
      KOLO_TRY(kolo::check_disjoint(send, block * comm->impl->size(), recv, block, "recv == send + rank * recvcount"));
    }
    request->sig.kind = OpKind::kReduceScatter;
    request->sig.counts = {recvcount};
    request->sends = {send};
    request->recvs = {recv};
    return submit(comm, std::move(request), options, out);
  });
}

kolo_result_t kolo_test(kolo_request_t request) {
  kolo_result_t result = KOLO_IN_PROGRESS;
  kolo_result_t rc = api_call("kolo_test", [&]() -> Status {
    KOLO_TRY(check_request(request));
    if (!request->impl->done()) return Status();
    Status s = request->impl->status();
    result = static_cast<kolo_result_t>(s.code());
    return s;
  });
  return rc != KOLO_SUCCESS ? rc : result;
}

kolo_result_t kolo_wait(kolo_request_t request) {
  return api_call("kolo_wait", [&]() -> Status {
    KOLO_TRY(check_request(request));
    return request->impl->wait(kolo::env_timeout_seconds());
  });
}

kolo_result_t kolo_request_free(kolo_request_t request) {
  return api_call("kolo_request_free", [&]() -> Status {
    KOLO_TRY(check_request(request));
    if (!request->impl->done()) {
      return error(Code::kInvalidUsage, "request '", request->impl->name, "' is still in progress; wait for it first");
    }
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      live_requests().erase(request);
    }
    if (auto runtime = request->runtime.lock()) runtime->release(request->impl->name);
    delete request;
    return Status();
  });
}

kolo_result_t kolo_join(kolo_comm_t comm, int* last_rank) {
  return api_call("kolo_join", [&]() -> Status {
    KOLO_TRY(kolo::check_comm(comm));
    auto runtime = runtime_of(comm);
    if (!runtime.ok()) return runtime.status();
    auto last = runtime.value()->join();
    if (!last.ok()) return last.status();
    if (last_rank != nullptr) *last_rank = last.value();
    return Status();
  });
}

kolo_result_t kolo_timeline_start(kolo_comm_t comm, const char* path) {
  return api_call("kolo_timeline_start", [&]() -> Status {
    KOLO_TRY(kolo::check_comm(comm));
    if (path == nullptr || path[0] == '\0') return error(Code::kInvalidArgument, "path is NULL or empty");
    auto runtime = runtime_of(comm);
    if (!runtime.ok()) return runtime.status();
    return runtime.value()->start_timeline(path);
  });
}

kolo_result_t kolo_timeline_stop(kolo_comm_t comm) {
  return api_call("kolo_timeline_stop", [&]() -> Status {
    KOLO_TRY(kolo::check_comm(comm));
    if (comm->runtime) comm->runtime->stop_timeline();
    return Status();
  });
}

}  // extern "C"
