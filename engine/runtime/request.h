// A named asynchronous operation as the runtime sees it: what every rank must agree on
// (Signature), this rank's buffers, and a completion that tests, waits and callbacks
// share. Requests are made by the C API (api/runtime_api.cc) and completed exactly once
// by the runtime's background thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "support/status.h"

namespace kolo::runtime {

enum class OpKind : uint8_t { kAllreduce, kAllgather, kBroadcast, kAlltoall, kReduceScatter, kCount };
const char* op_kind_name(OpKind kind);

// What all ranks must submit identically under one name. Per-rank sizes that may differ
// by design (allgather's first dimension, alltoall's splits) live in Request::local.
struct Signature {
  OpKind kind = OpKind::kAllreduce;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // allreduce, reduce_scatter
  int64_t root = 0;              // broadcast
  double prescale = 1.0;         // allreduce
  double postscale = 1.0;        // allreduce
  DType wire = DType::kCount;    // allreduce: the type on the wire (kCount: the data's own)
  bool device = false;           // the tensors are device memory (every rank's must be)
  // allreduce: elements of each tensor of the group; broadcast: {count};
  // reduce_scatter: {recvcount}; allgather: {elements per row}; alltoall: {}.
  std::vector<uint64_t> counts;
  // The tensor's shape as the caller gave it (kolo_enqueue_options.shape; empty: not
  // given), compared like the rest: same element count in another shape is a mismatch.
  std::vector<int64_t> shape;

  bool operator==(const Signature&) const = default;
  uint64_t total_count() const;
  // "" when equal; otherwise the first field that differs, as "<field>: <a> vs <b>".
  static std::string difference(const Signature& a, const Signature& b, std::string* a_value, std::string* b_value);
};

// Output allocation once every rank's size is known (allgather, alltoall): gets the total
// element count and each rank's share; returns the buffer or null.
using OutputAlloc = std::function<void*(size_t total_count, const std::vector<size_t>& rank_counts)>;

class Request {
 public:
  Request() = default;
  ~Request();  // destroys the ready event
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  std::string name;
  Signature sig;
  // allgather: {rows}; alltoall: elements sent to each peer; empty otherwise.
  std::vector<uint64_t> local;
  std::vector<const void*> sends;  // one per tensor; null = zeros (a joined rank's part)
  std::vector<void*> recvs;        // one per tensor; null = discard (a joined rank's part)
  OutputAlloc alloc;
  std::function<void(const Status&)> on_complete;  // on the runtime's thread, once
  double enqueued_at = 0;  // now_seconds(), for the timeline and the stall inspector
  // Device tensors (sig.device): the device that holds them, and an event recorded at
  // enqueue on the stream that produces them; the runtime's stream waits for it before
  // reading them. Outputs from `alloc` must be memory of the same device.
  int device = -1;
  void* ready = nullptr;

  // Runs on_complete, then marks the request done with `status` and wakes waiters.
  // Called once, by the runtime's thread.
  void complete(const Status& status);
  bool done() const;
  Status status() const;
  // Blocks until done or the deadline passes (then kTimeout naming the request).
  Status wait(double seconds);

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_;
};

}  // namespace kolo::runtime
