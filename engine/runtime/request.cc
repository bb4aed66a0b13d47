#include "engine/runtime/request.h"

#include <chrono>

#include "support/device/device.h"

namespace kolo::runtime {

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kAllreduce: return "allreduce";
    case OpKind::kAllgather: return "allgather";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kAlltoall: return "alltoall";
    case OpKind::kReduceScatter: return "reduce_scatter";
    case OpKind::kCount: break;
  }
  return "unknown";
}

uint64_t Signature::total_count() const {
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  return total;
}

static std::string counts_text(const std::vector<uint64_t>& counts) {
  if (counts.size() == 1) return str_cat(counts[0]);
  std::string out = "[";
  for (size_t i = 0; i < counts.size(); ++i) out += str_cat(i ? "," : "", counts[i]);
  return out + "]";
}

std::string Signature::difference(const Signature& a, const Signature& b, std::string* a_value,
                                  std::string* b_value) {
  auto differ = [&](const char* field, const std::string& x, const std::string& y) {
    *a_value = x;
    *b_value = y;
    return std::string(field);
  };
  if (a.kind != b.kind) return differ("operation", op_kind_name(a.kind), op_kind_name(b.kind));
  if (a.dtype != b.dtype) return differ("dtype", dtype_name(a.dtype), dtype_name(b.dtype));
  if (a.counts != b.counts) {
    const char* field = a.kind == OpKind::kAllgather ? "elements per row" : "count";
    return differ(field, counts_text(a.counts), counts_text(b.counts));
  }
  if (a.shape != b.shape) {
    auto text = [](const std::vector<int64_t>& shape) {
      std::string out = "(";
      for (size_t i = 0; i < shape.size(); ++i) out += str_cat(i ? ", " : "", shape[i]);
      return out + (shape.size() == 1 ? ",)" : ")");
    };
    return differ(a.kind == OpKind::kAllgather || a.kind == OpKind::kAlltoall ? "row shape" : "shape",
                  text(a.shape), text(b.shape));
  }
  if (a.op != b.op) return differ("op", op_name(a.op), op_name(b.op));
  if (a.root != b.root) return differ("root", str_cat(a.root), str_cat(b.root));
  if (a.prescale != b.prescale) return differ("prescale", str_cat(a.prescale), str_cat(b.prescale));
  if (a.postscale != b.postscale) return differ("postscale", str_cat(a.postscale), str_cat(b.postscale));
  if (a.wire != b.wire) {
    auto wire = [](DType t) { return std::string(t == DType::kCount ? "none" : dtype_name(t)); };
    return differ("wire_dtype", wire(a.wire), wire(b.wire));
  }
  if (a.device != b.device) {
    return differ("memory", a.device ? "device" : "host", b.device ? "device" : "host");
  }
  return "";
}

Request::~Request() {
  if (ready != nullptr) (void)device::runtime().event_destroy(ready);
}

void Request::complete(const Status& status) {
  // The callback runs before the request reads as done, so that an adapter's bookkeeping
  // is finished by the time kolo_wait or kolo_test reports completion.
  if (on_complete) on_complete(status);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    status_ = status;
  }
  cv_.notify_all();
}

bool Request::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

Status Request::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return status_;
}

Status Request::wait(double seconds) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto until = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                      std::chrono::duration<double>(seconds));
  if (!cv_.wait_until(lock, until, [&] { return done_; })) {
    return error(Code::kTimeout, "request '", name, "' did not complete within ", seconds,
                 " s (KOLO_TIMEOUT); ranks may not all have submitted it (see the stall inspector's log)");
  }
  return status_;
}

}  // namespace kolo::runtime
