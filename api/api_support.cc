#include "api/api_support.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>
#include <string>
#include <unordered_set>

#include "kernels/adasum_math.h"
#include "kernels/dtype.h"
#include "support/device/device.h"

namespace kolo {
namespace {

thread_local std::string t_last_error;

std::mutex g_comms_mutex;
std::unordered_set<const kolo_comm*>& live_comms() {
  static auto* set = new std::unordered_set<const kolo_comm*>();
  return *set;
}
// Every call checks its handle; a program calls with the same one again and again. Each
// thread remembers the last handle it found live and how many communicators had been
// destroyed then: while none has been since, the handle is still live, without the lock.
std::atomic<uint64_t> g_comms_destroyed{0};
thread_local const kolo_comm* t_checked_comm = nullptr;
thread_local uint64_t t_checked_at = 0;

}  // namespace

const char* last_error_text() { return t_last_error.c_str(); }

kolo_result_t api_result(const char* function, const Status& status) {
  if (status.ok()) return KOLO_SUCCESS;
  t_last_error = str_cat(function, ": ", status.message());
  return static_cast<kolo_result_t>(status.code());
}

kolo_result_t api_exception(const char* function) {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return api_result(function, error(Code::kSystem, "out of memory"));
  } catch (const std::exception& e) {
    return api_result(function, error(Code::kInternal, "unexpected exception: ", e.what()));
  } catch (...) {
    return api_result(function, error(Code::kInternal, "unexpected exception"));
  }
}

void register_comm(kolo_comm* comm) {
  std::lock_guard<std::mutex> lock(g_comms_mutex);
  live_comms().insert(comm);
}

void unregister_comm(kolo_comm* comm) {
  std::lock_guard<std::mutex> lock(g_comms_mutex);
  live_comms().erase(comm);
  g_comms_destroyed.fetch_add(1, std::memory_order_acq_rel);
}

Status check_comm(kolo_comm_t comm) {
  if (comm == nullptr) return error(Code::kInvalidArgument, "comm is NULL");
  // Read before the lookup: a destroy after it makes the next call look again.
  const uint64_t destroyed = g_comms_destroyed.load(std::memory_order_acquire);
  if (comm == t_checked_comm && destroyed == t_checked_at) return Status();
  std::lock_guard<std::mutex> lock(g_comms_mutex);
  if (live_comms().count(comm) == 0) {
    return error(Code::kInvalidUsage, "comm ", static_cast<const void*>(comm),
                 " is not an initialised communicator (never created, or already destroyed)");
  }
  t_checked_comm = comm;
  t_checked_at = destroyed;
  return Status();
}

Status check_dtype(kolo_dtype_t dtype) {
  if (static_cast<int>(dtype) < 0 || dtype >= KOLO_DTYPE_COUNT) {
    return error(Code::kInvalidArgument, "dtype = ", static_cast<int>(dtype), " is out of range [0, ",
                 static_cast<int>(KOLO_DTYPE_COUNT), ")");
  }
  return Status();
}

Status check_op(kolo_op_t op) {
  if (static_cast<int>(op) < 0 || op >= KOLO_OP_COUNT) {
    return error(Code::kInvalidArgument, "op = ", static_cast<int>(op), " is out of range [0, ",
                 static_cast<int>(KOLO_OP_COUNT), ")");
  }
  return Status();
}

Status check_reduction_op(kolo_op_t op, kolo_dtype_t dtype, const char* collective) {
  KOLO_TRY(check_op(op));
  if (op != KOLO_ADASUM) return Status();
  if (std::string(collective) != "allreduce") {
    return error(Code::kInvalidArgument, "op = KOLO_ADASUM is not element-wise: allreduce only, not ", collective);
  }
  if (!kolo::adasum_dtype(static_cast<kolo::DType>(dtype))) {
    return error(Code::kInvalidArgument, "op = KOLO_ADASUM is defined for FLOAT16, BFLOAT16, FLOAT32 and FLOAT64, not ",
                 kolo::dtype_name(static_cast<kolo::DType>(dtype)));
  }
  return Status();
}

Status check_buffer(const char* name, const void* buffer, size_t count) {
  if (buffer == nullptr && count > 0) return error(Code::kInvalidArgument, name, " is NULL with count ", count);
  return Status();
}

Status check_rank(const char* name, int value, int size) {
  if (value < 0 || value >= size) {
    return error(Code::kInvalidArgument, name, " = ", value, " is out of range for a communicator of ", size,
                 " ranks");
  }
  return Status();
}

// Compressed allreduce: FLOAT32 data summed (or averaged) with contributions carried as
// FLOAT16, BFLOAT16 or FLOAT8 (block-scaled) and accumulated in FLOAT32.
Status check_wire(kolo_dtype_t wire, kolo_dtype_t dtype, kolo_op_t op) {
  if (wire != KOLO_FLOAT16 && wire != KOLO_BFLOAT16 && wire != KOLO_FLOAT8_E4M3 && wire != KOLO_FLOAT8_E5M2) {
    return error(Code::kInvalidArgument, "wire_dtype = ", static_cast<int>(wire),
                 " is not KOLO_DTYPE_COUNT (as the data), FLOAT16, BFLOAT16, FLOAT8_E4M3 or FLOAT8_E5M2");
  }
  if (dtype != KOLO_FLOAT32) {
    return error(Code::kUnsupported, "wire_dtype = ", kolo::dtype_name(static_cast<kolo::DType>(wire)),
                 " compresses FLOAT32 data; this call's data is ", kolo::dtype_name(static_cast<kolo::DType>(dtype)));
  }
  if (op != KOLO_SUM && op != KOLO_AVG) {
    return error(Code::kUnsupported, "wire_dtype = ", kolo::dtype_name(static_cast<kolo::DType>(wire)),
                 " compresses sums (SUM, AVG); op is ", kolo::op_name(static_cast<kolo::ReduceOp>(op)));
  }
  return Status();
}

Status check_no_partial_overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  if (a == nullptr || b == nullptr || a == b) return Status();
  auto x = reinterpret_cast<uintptr_t>(a);
  auto y = reinterpret_cast<uintptr_t>(b);
  if (x < y + b_bytes && y < x + a_bytes) {
    return error(Code::kInvalidArgument, "send and recv buffers overlap without being the same buffer ",
                 "(in-place calls pass the same pointer)");
  }
  return Status();
}

Status check_disjoint(const void* send, size_t send_bytes, const void* recv, size_t recv_bytes, const char* in_place) {
  if (send == nullptr || recv == nullptr || send_bytes == 0 || recv_bytes == 0) return Status();
  auto x = reinterpret_cast<uintptr_t>(send);
  auto y = reinterpret_cast<uintptr_t>(recv);
  if (x < y + recv_bytes && y < x + send_bytes) {
    return error(Code::kInvalidArgument, "send ", send, " and recv ", recv, " overlap, and not as the in-place form (",
                 in_place, ")");
  }
  return Status();
}

}  // namespace kolo
