// What every C entry point shares: the communicator handle, the registry that tells a
// live handle from a destroyed one, the thread's last error, and argument checks.
#pragma once

#include <functional>
#include <memory>

#include "engine/communicator.h"
#include "kolo/kolo.h"
#include "support/status.h"

namespace kolo::runtime {
class Runtime;
}  // namespace kolo::runtime

struct kolo_comm {
  std::unique_ptr<kolo::Communicator> impl;
  // The Horovod-style runtime, started by the first kolo_enqueue_* or kolo_join (see
  // api/runtime_api.cc). Declared after impl so that it is stopped first.
  std::shared_ptr<kolo::runtime::Runtime> runtime = nullptr;
};

namespace kolo {

// The result for a C entry point: success, or the status's code with its message kept
// for kolo_last_error (prefixed with the function's name).
kolo_result_t api_result(const char* function, const Status& status);
// The same for an exception that escaped (none may cross the C API).
kolo_result_t api_exception(const char* function);

// Runs body and turns its Status (or an exception) into the C result. A template, not a
// std::function: the captures of an entry point's lambda would cost an allocation per call.
template <class Body>
kolo_result_t api_call(const char* function, Body&& body) {
  try {
    Status status = body();
    return status.ok() ? KOLO_SUCCESS : api_result(function, status);
  } catch (...) {
    return api_exception(function);
  }
}

void register_comm(kolo_comm* comm);
void unregister_comm(kolo_comm* comm);
// kInvalidArgument for NULL, kInvalidUsage for a handle that is not live.
Status check_comm(kolo_comm_t comm);

Status check_dtype(kolo_dtype_t dtype);
Status check_op(kolo_op_t op);
// check_op, and KOLO_ADASUM only where `collective` is "allreduce" and dtype a float type.
Status check_reduction_op(kolo_op_t op, kolo_dtype_t dtype, const char* collective);
Status check_buffer(const char* name, const void* buffer, size_t count);
Status check_rank(const char* name, int value, int size);
// Compressed allreduce: FLOAT32 data summed (or averaged) with contributions carried as
// FLOAT16, BFLOAT16 or FLOAT8 (block-scaled) and accumulated in FLOAT32.
Status check_wire(kolo_dtype_t wire, kolo_dtype_t dtype, kolo_op_t op);
// Two byte ranges that overlap without being the same range (not in-place, not apart).
Status check_no_partial_overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes);
// For collectives whose in-place form is not send == recv (allgather(v), reduce_scatter):
// any overlap but that form (checked by the caller) is an error naming the form.
Status check_disjoint(const void* send, size_t send_bytes, const void* recv, size_t recv_bytes, const char* in_place);

}  // namespace kolo
