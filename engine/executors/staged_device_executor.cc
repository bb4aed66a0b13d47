// The device_staged executor: device buffers through the host plan of the same call.
// On the caller's stream, in order:
//   1. copy the inputs from the device into pinned host staging buffers; record `ready`;
//   2. a host function that holds the stream until the host plan has run on the staging
//      buffers (done by this executor's progress thread, in call order), or until
//      KOLO_TIMEOUT: a stream is never held forever, even when a peer died;
//   3. copy the outputs back into the device buffers; record `finished`.
// The progress thread takes the operations in the order they were enqueued, waits for
// `ready`, runs the host plan through the communicator (ExecutorEnv::run_host), releases
// the stream, and frees the staging once `finished` has passed. A failure fails the
// communicator: the next call and kolo_comm_get_async_error report it.
//
// Staging buffers come from a pool of pinned buffers (pinning costs far more than a
// collective). Large allreduce, reduce and broadcast calls go in chunks of
// kStagedChunkBytes, every chunk its own host collective: all chunks' input copies are
// enqueued first, so the stream copies chunk i+1 in (and chunk i-1 out) while the progress
// thread runs the collective on chunk i. The chunk size is a constant so that every rank
// cuts alike.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/executors/executor.h"
#include "support/device/device.h"
#include "support/env.h"
#include "support/log.h"

namespace kolo {
namespace {

// Bytes of the input and output buffers of a call on `ranks` ranks (what the API checks).
struct CallBytes {
  size_t in = 0, out = 0;
};

CallBytes bytes_of(const CollSpec& s, int ranks, int rank) {
  const size_t n = s.bytes(), all = n * static_cast<size_t>(ranks);
  switch (s.kind) {
    case CollKind::kAllreduce:
    case CollKind::kBroadcast:
    case CollKind::kReduce: return {n, n};
    case CollKind::kAllgather: return {n, all};
    case CollKind::kAllgatherv: {
      size_t end = 0;
      for (size_t q = 0; q < s.counts.size() && q < s.displs.size(); ++q) end = std::max(end, s.displs[q] + s.counts[q]);
      return {s.counts.size() > static_cast<size_t>(rank) ? s.counts[rank] * dtype_size(s.dtype) : n,
              end * dtype_size(s.dtype)};
    }
    case CollKind::kReduceScatter: return {all, n};
    case CollKind::kAlltoall: return {all, all};
    case CollKind::kSend: return {n, 0};
    case CollKind::kRecv: return {0, n};
    case CollKind::kBarrier: return {0, 0};
  }
  return {0, 0};
}

// Pinned buffers kept for reuse, by size. A request takes the smallest free buffer that
// fits and is at most twice as large; the pool keeps at most kPoolBytes.
class PinnedPool {
 public:
  static constexpr size_t kPoolBytes = size_t{1} << 30;
  ~PinnedPool() {
    for (auto& [bytes, p] : free_) (void)device::runtime().host_free(p);
  }
  Status take(size_t bytes, void** out) {
    std::lock_guard<std::mutex> lock(m_);
    auto it = free_.lower_bound(bytes);
    if (it != free_.end() && it->first <= 2 * bytes) {
      *out = it->second;
      size_of_[*out] = it->first;
      held_ -= it->first;
      free_.erase(it);
      return Status();
    }
    KOLO_TRY(device::runtime().host_alloc(out, bytes));
    size_of_[*out] = bytes;
    return Status();
  }
  void give(void* p) {
    std::lock_guard<std::mutex> lock(m_);
    const size_t bytes = size_of_[p];
    size_of_.erase(p);
    while (held_ + bytes > kPoolBytes && !free_.empty()) {  // make room: the largest go first
      auto last = std::prev(free_.end());
      (void)device::runtime().host_free(last->second);
      held_ -= last->first;
      free_.erase(last);
    }
    if (held_ + bytes > kPoolBytes) {
      (void)device::runtime().host_free(p);
      return;
    }
    free_.emplace(bytes, p);
    held_ += bytes;
  }

 private:
  std::mutex m_;
  std::multimap<size_t, void*> free_;
  std::map<void*, size_t> size_of_;
  size_t held_ = 0;
};

constexpr size_t kStagedChunkBytes = size_t{4} << 20;

struct Operation {
  struct Copy {
    void* device;
    char* host;
    size_t bytes;
  };
  std::vector<CollCall> host_calls;  // the calls on the staging buffers
  std::vector<Copy> outs;            // results to copy back to the device
  std::vector<void*> staging;        // from the pool, returned once `finished` has passed
  void* ready = nullptr;
  void* finished = nullptr;
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
};

// The stream's hold (step 2): runs on the device runtime's host-function thread.
void hold_stream(void* arg) {
  Operation* op = static_cast<Operation*>(arg);
  std::unique_lock<std::mutex> lock(op->m);
  op->cv.wait_for(lock, std::chrono::duration<double>(env_timeout_seconds()), [&] { return op->done; });
}

class StagedDeviceExecutor final : public Executor {
 public:
  explicit StagedDeviceExecutor(const ExecutorEnv& env) : env_(env) {}

  ~StagedDeviceExecutor() override {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  Status run(const PlannedCall* calls, size_t n, const Deadline& deadline) override {
    const device::DeviceOps& dev = device::runtime();
    void* stream = calls[0].call.stream;
    for (size_t i = 1; i < n; ++i) {
      if (calls[i].call.stream != stream || calls[i].call.device != calls[0].call.device) {
        return error(Code::kInvalidArgument, "rank ", env_.rank, ": a group of device calls on different streams or devices (",
                     stream, " on device ", calls[0].call.device, " and ", calls[i].call.stream, " on device ",
                     calls[i].call.device, "); kolo runs a group on one stream");
      }
    }
    // The copies and events go to the device of the buffers and the stream.
    device::ScopedDevice on_device(calls[0].call.device);
    KOLO_TRY(on_device.status());
    // One operation per chunk of a large elementwise call, else one for all the calls.
    std::vector<PlannedCall> pieces = chunks_of(calls, n);
    const PlannedCall* parts = pieces.empty() ? calls : pieces.data();
    const size_t nparts = pieces.empty() ? 1 : pieces.size();
    const size_t per_op = pieces.empty() ? n : 1;
    std::vector<std::shared_ptr<Operation>> ops;
    Status s;
    for (size_t k = 0; k < nparts && s.ok(); ++k) {
      ops.push_back(std::make_shared<Operation>());
      s = stage_inputs(dev, parts + (pieces.empty() ? 0 : k), per_op, stream, ops.back().get());
    }
    for (size_t k = 0; k < ops.size() && s.ok(); ++k) s = stage_outputs(dev, stream, ops[k].get());
    if (!s.ok()) {
      for (auto& op : ops) release(dev, op.get());
      return s;
    }
    {
      std::lock_guard<std::mutex> lock(m_);
      for (auto& op : ops) queue_.push_back(op);
      pending_ += ops.size();
      busy_.store(true, std::memory_order_release);
      if (!thread_.joinable()) thread_ = std::thread([this] { progress(); });
    }
    cv_.notify_all();
    return Status();
  }

  bool busy() const override { return busy_.load(std::memory_order_acquire); }

  Status drain(const Deadline& deadline) override {
    std::unique_lock<std::mutex> lock(m_);
    while (pending_ > 0) {
      if (deadline.expired()) {
        return error(Code::kTimeout, "rank ", env_.rank, ": device calls still queued at the deadline (KOLO_TIMEOUT)");
      }
      cv_.wait_for(lock, std::chrono::milliseconds(10));
    }
    return Status();
  }

 private:
  // A single large allreduce, reduce or broadcast as chunks (empty: run it whole).
  static std::vector<PlannedCall> chunks_of(const PlannedCall* calls, size_t n) {
    std::vector<PlannedCall> pieces;
    const CollSpec& s = calls[0].call.spec;
    const bool elementwise = s.kind == CollKind::kAllreduce || s.kind == CollKind::kReduce || s.kind == CollKind::kBroadcast;
    if (n != 1 || !elementwise || s.bytes() <= 2 * kStagedChunkBytes) return pieces;
    const size_t es = dtype_size(s.dtype), per = kStagedChunkBytes / es;
    for (size_t first = 0; first < s.count; first += per) {
      PlannedCall piece = calls[0];
      piece.call.spec.count = std::min(per, s.count - first);
      if (piece.call.send != nullptr) piece.call.send = static_cast<const char*>(piece.call.send) + first * es;
      if (piece.call.recv != nullptr) piece.call.recv = static_cast<char*>(piece.call.recv) + first * es;
      pieces.push_back(std::move(piece));
    }
    return pieces;
  }

  // Step 1 on the stream: staging, the copies in, `ready`. The host calls point into the
  // staging buffers.
  Status stage_inputs(const device::DeviceOps& dev, const PlannedCall* calls, size_t n, void* stream, Operation* op) {
    KOLO_TRY(dev.event_create(&op->ready));
    KOLO_TRY(dev.event_create(&op->finished));
    std::vector<Operation::Copy>& outs = op->outs;
    for (size_t i = 0; i < n; ++i) {
      CollCall host = calls[i].call;
      host.spec.device = false;
      host.stream = nullptr;
      const CallBytes b = bytes_of(host.spec, env_.size, env_.rank);
      // A broadcast's send buffer is read at the root only; elsewhere it may be anything.
      if (host.spec.kind == CollKind::kBroadcast && host.spec.root != env_.rank && !host.spec.in_place) {
        host.send = nullptr;
      }
      const char* send = static_cast<const char*>(host.send);
      char* recv = static_cast<char*>(host.recv);
      const size_t in = send != nullptr ? b.in : 0, out = recv != nullptr ? b.out : 0;
      // In place the input lies inside the output (or, reduce_scatter, the other way):
      // one staging buffer covers both, so the host plan sees the same aliasing.
      const char* lo = send;
      const char* hi = send + in;
      const bool overlap = send != nullptr && recv != nullptr && send < recv + out && recv < send + in;
      if (recv != nullptr && (send == nullptr || overlap)) {
        lo = send == nullptr ? recv : std::min<const char*>(send, recv);
        hi = std::max<const char*>(send == nullptr ? recv + out : send + in, recv + out);
      }
      char* in_stage = nullptr;
      char* out_stage = nullptr;
      if (hi > lo) {
        void* p = nullptr;
        KOLO_TRY(pool_.take(static_cast<size_t>(hi - lo), &p));
        op->staging.push_back(p);
        char* base = static_cast<char*>(p);
        if (send != nullptr) in_stage = base + (send - lo);
        if (recv != nullptr && (send == nullptr || overlap)) out_stage = base + (recv - lo);
        // Copies the whole span in place: the host plan may read any of it.
        if (send != nullptr) KOLO_TRY(dev.memcpy_async(base, lo, static_cast<size_t>(hi - lo), stream));
      }
      if (recv != nullptr && out_stage == nullptr && out > 0) {
        void* p = nullptr;
        KOLO_TRY(pool_.take(out, &p));
        op->staging.push_back(p);
        out_stage = static_cast<char*>(p);
      }
      host.send = in_stage;
      host.recv = out_stage;
      if (recv != nullptr && out > 0) outs.push_back({recv, out_stage, out});
      op->host_calls.push_back(host);
    }
    return dev.event_record(op->ready, stream);
  }

  // Steps 2-3: hold the stream until the host plan has run, copy the results out, `finished`.
  Status stage_outputs(const device::DeviceOps& dev, void* stream, Operation* op) {
    KOLO_TRY(dev.launch_host_func(stream, hold_stream, op));
    for (const Operation::Copy& c : op->outs) KOLO_TRY(dev.memcpy_async(c.device, c.host, c.bytes, stream));
    return dev.event_record(op->finished, stream);
  }

  void release(const device::DeviceOps& dev, Operation* op) {
    for (void* p : op->staging) pool_.give(p);
    op->staging.clear();
    if (op->ready != nullptr) (void)dev.event_destroy(op->ready);
    if (op->finished != nullptr) (void)dev.event_destroy(op->finished);
    op->ready = op->finished = nullptr;
  }

  void progress() {
    const device::DeviceOps& dev = device::runtime();
    while (true) {
      std::shared_ptr<Operation> op;
      {
        std::unique_lock<std::mutex> lock(m_);
        if (queue_.empty() && !retiring_.empty()) {
          lock.unlock();
          retire(dev, true);  // idle: wait for the streams to finish copying out
          lock.lock();
        }
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) {
          lock.unlock();
          retire(dev, true);
          return;
        }
        op = queue_.front();
        queue_.pop_front();
      }
      const double timeout = env_timeout_seconds();
      // The host plan runs even when the inputs never arrived (a broken stream), so that
      // every rank runs the same collectives; the stream's own error tells the caller.
      Status ready = dev.event_synchronize(op->ready, Deadline(timeout));
      if (!ready.ok()) log_warn(Subsys::kExec, "rank ", env_.rank, ": device inputs not ready: ", ready.message());
      (void)env_.run_host(op->host_calls.data(), op->host_calls.size());  // a failure fails the communicator
      {
        std::lock_guard<std::mutex> lock(op->m);
        op->done = true;
      }
      op->cv.notify_all();
      retiring_.push_back(op);
      retire(dev, false);  // what the stream has finished with; the rest later
      {
        std::lock_guard<std::mutex> lock(m_);
        if (--pending_ == 0) busy_.store(false, std::memory_order_release);
      }
      cv_.notify_all();
    }
  }

  // Frees the staging of operations whose results the stream has copied out, oldest first
  // (without blocking, or waiting for each). An operation whose stream never gets there is
  // kept: its host function still refers to it.
  void retire(const device::DeviceOps& dev, bool block) {
    while (!retiring_.empty()) {
      Operation* op = retiring_.front().get();
      bool finished;
      if (block) {
        finished = dev.event_synchronize(op->finished, Deadline(env_timeout_seconds())).ok();
      } else {
        Result<bool> query = dev.event_query(op->finished);
        if (!query.ok() || !query.value()) return;
        finished = true;
      }
      if (finished) {
        release(dev, op);
      } else {
        stuck_.push_back(retiring_.front());
      }
      retiring_.pop_front();
    }
  }

  ExecutorEnv env_;
  PinnedPool pool_;  // before the thread: outlives it
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Operation>> queue_;
  size_t pending_ = 0;
  std::atomic<bool> busy_{false};  // pending_ > 0, readable without the lock
  bool stop_ = false;
  std::deque<std::shared_ptr<Operation>> retiring_;  // collective done, copies out pending
  std::vector<std::shared_ptr<Operation>> stuck_;  // streams that never finished: kept alive
  std::thread thread_;  // started by the first device call
};

}  // namespace

MadeExecutor create_staged_device_executor(const ExecutorEnv& env) {
  return MadeExecutor(std::make_unique<StagedDeviceExecutor>(env));
}

}  // namespace kolo
