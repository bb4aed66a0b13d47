// The nccl executor: device calls through NCCL (KOLO_BACKEND=nccl), for side-by-side
// comparison and as a fallback. NCCL's semantics are kolo's (stream-ordered, one device
// per communicator), so each call maps to one NCCL call, or a group of them:
//   allreduce, broadcast, reduce, allgather, reduce_scatter  the NCCL collective;
//   allgatherv   one broadcast per rank, in a group (NCCL has no allgatherv);
//   alltoall     a send and a receive per peer, in a group (in place: from a copy of the
//                input in a scratch buffer, which NCCL's sends read while its receives write);
//   send, recv   ncclSend, ncclRecv.
// AVG arrives lowered to SUM and a divisor (as on every executor): kolo's own scale kernel
// divides on the stream after NCCL, so the result equals kolo's bit for bit.
//
// What NCCL lacks, this adds: every wait has a deadline. The NCCL communicator is
// nonblocking and made at the first device call (every rank must make one, as with
// ncclCommInitRank), from a unique id that rank 0 publishes through kolo's store. A watchdog
// thread follows every call's completion event: a call not done within KOLO_TIMEOUT, an
// error NCCL reports (a peer died), or kolo_comm_abort aborts the NCCL communicator, which
// releases the streams, and fails the kolo communicator with the reason.
//
// Only a GPU runs this file past loading the library (NCCL refuses other memory).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "engine/executors/executor.h"
#include "engine/executors/nccl_library.h"
#include "kernels/device_kernels.h"
#include "support/device/device.h"
#include "support/env.h"
#include "support/log.h"

namespace kolo {
namespace {

class NcclExecutor final : public Executor {
 public:
  NcclExecutor(const ExecutorEnv& env, const nccl::Library& lib) : env_(env), lib_(lib) {}

  ~NcclExecutor() override {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    const device::DeviceOps& dev = device::runtime();
    if (scratch_ != nullptr) {
      (void)dev.event_synchronize(scratch_free_, Deadline(env_timeout_seconds()));
      (void)dev.free(scratch_);
      (void)dev.event_destroy(scratch_free_);
    }
    if (comm_ == nullptr || aborted_) return;  // (ncclCommAbort freed it)
    // Finalize flushes what is queued, then destroy; if that does not finish, abort.
    int rc = lib_.comm_finalize(comm_);
    if (!settle(rc, "ncclCommFinalize", Deadline(env_timeout_seconds())).ok()) return;
    (void)lib_.comm_destroy(comm_);
  }

  Status run(const PlannedCall* calls, size_t n, const Deadline& deadline) override {
    KOLO_TRY(check_device_group(calls, n, env_.rank));
    const int device = calls[0].call.device;
    void* stream = calls[0].call.stream;
    device::ScopedDevice on_device(device);
    KOLO_TRY(on_device.status());
    if (aborted_.load(std::memory_order_acquire)) {
      return error(Code::kAborted, "rank ", env_.rank, ": the NCCL communicator was aborted");
    }
    KOLO_TRY(ensure_comm(device, deadline));
    scratch_used_ = false;
    const int started = lib_.group_start();
    if (started != nccl::kSuccess) return nccl::failure(lib_, comm_, started, "ncclGroupStart");
    Status enqueued;
    for (size_t i = 0; i < n && enqueued.ok(); ++i) enqueued = enqueue(calls[i].call);
    const int rc = lib_.group_end();  // always closes the group, even after an error
    KOLO_TRY(enqueued);
    KOLO_TRY(settle(rc, "ncclGroupEnd", deadline));
    for (size_t i = 0; i < n; ++i) KOLO_TRY(postscale(calls[i].call));
    if (scratch_used_) {  // the scratch is free again once this call's sends are done
      scratch_used_ = false;
      KOLO_TRY(device::runtime().event_record(scratch_free_, stream));
    }
    return watch(stream);
  }

  bool busy() const override { return busy_.load(std::memory_order_acquire); }

  Status drain(const Deadline& deadline) override {
    std::unique_lock<std::mutex> lock(m_);
    while (!pending_.empty()) {
      if (deadline.expired()) {
        return error(Code::kTimeout, "rank ", env_.rank, ": NCCL calls still running at the deadline (KOLO_TIMEOUT)");
      }
      cv_.wait_for(lock, std::chrono::milliseconds(1));
    }
    return Status();
  }

  void abort() override {
    abort_requested_.store(true, std::memory_order_release);
    cv_.notify_all();
  }

 private:
  struct Pending {
    void* event;
    Deadline deadline;
  };

  // NCCL calls on a nonblocking communicator may return "in progress"; the call is done
  // when the communicator's state leaves it.
  Status settle(int rc, const char* what, const Deadline& deadline) {
    while (rc == nccl::kInProgress) {
      if (deadline.expired()) {
        {
          std::lock_guard<std::mutex> lock(m_);
          abort_comm();
        }
        return error(Code::kTimeout, "rank ", env_.rank, ": ", what, " still in progress at the deadline (KOLO_TIMEOUT)");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      if (lib_.comm_get_async_error(comm_, &rc) != nccl::kSuccess) break;
    }
    if (rc != nccl::kSuccess) return nccl::failure(lib_, comm_, rc, what);
    return Status();
  }

  // The NCCL communicator, made at the first call on the device of its buffers.
  Status ensure_comm(int device, const Deadline& deadline) {
    if (comm_ != nullptr) {
      if (device == device_) return Status();
      return error(Code::kInvalidArgument, "rank ", env_.rank, ": KOLO_BACKEND=nccl runs a communicator on one device; it "
                   "was made on device ", device_, " and this call's buffers are on device ", device);
    }
    nccl::UniqueId id{};
    if (env_.rank == 0) {
      const int rc = lib_.get_unique_id(&id);
      if (rc != nccl::kSuccess) return nccl::failure(lib_, nullptr, rc, "ncclGetUniqueId");
    }
    Result<std::string> shared = env_.from_rank0("nccl/unique_id", std::string(id.bytes, sizeof id.bytes));
    if (!shared.ok()) return shared.status().with_context(str_cat("rank ", env_.rank, ", NCCL unique id: "));
    if (shared.value().size() != sizeof id.bytes) {
      return error(Code::kRemote, "rank ", env_.rank, ": the NCCL unique id from rank 0 has ", shared.value().size(),
                   " bytes, not ", sizeof id.bytes);
    }
    std::copy(shared.value().begin(), shared.value().end(), id.bytes);
    nccl::Config config;
    config.blocking = 0;  // so that kolo's deadlines can end every wait
    const int rc = lib_.comm_init_rank_config(&comm_, env_.size, id, env_.rank, &config);
    if (rc != nccl::kSuccess && rc != nccl::kInProgress) {
      comm_ = nullptr;
      return nccl::failure(lib_, nullptr, rc, "ncclCommInitRankConfig");
    }
    KOLO_TRY(settle(rc, "ncclCommInitRankConfig", deadline));
    device_ = device;
    log_info(Subsys::kInit, "rank ", env_.rank, ": NCCL communicator of ", env_.size, " ranks on device ", device);
    watchdog_ = std::thread([this] { watch_loop(); });
    return Status();
  }

  Status enqueue(const CollCall& call) {
    const CollSpec& s = call.spec;
    if (s.prescaled) {
      return error(Code::kUnsupported, "rank ", env_.rank, ": KOLO_BACKEND=nccl does not prescale device buffers");
    }
    Result<int> dtype = nccl::dtype_of(s.dtype, lib_.version);
    if (!dtype.ok()) return dtype.status();
    const bool reduces = s.kind == CollKind::kAllreduce || s.kind == CollKind::kReduce || s.kind == CollKind::kReduceScatter;
    int op = 0;
    if (reduces) {
      Result<int> o = nccl::op_of(s.op);
      if (!o.ok()) return o.status();
      op = o.value();
    }
    const int t = dtype.value();
    const size_t es = dtype_size(s.dtype);
    void* st = call.stream;
    const char* send = static_cast<const char*>(call.send);
    char* recv = static_cast<char*>(call.recv);
    int rc = nccl::kSuccess;
    switch (s.kind) {
      case CollKind::kAllreduce: rc = lib_.all_reduce(send, recv, s.count, t, op, comm_, st); break;
      case CollKind::kBroadcast: rc = lib_.broadcast(send, recv, s.count, t, s.root, comm_, st); break;
      case CollKind::kReduce: rc = lib_.reduce(send, recv, s.count, t, op, s.root, comm_, st); break;
      case CollKind::kAllgather: rc = lib_.all_gather(send, recv, s.count, t, comm_, st); break;
      case CollKind::kReduceScatter: rc = lib_.reduce_scatter(send, recv, s.count, t, op, comm_, st); break;
      case CollKind::kAllgatherv:
        for (int r = 0; r < env_.size && rc == nccl::kSuccess; ++r) {
          rc = lib_.broadcast(send, recv + s.displs[r] * es, s.counts[r], t, r, comm_, st);
        }
        break;
      case CollKind::kAlltoall:
        if (send == recv && s.count > 0) {
          Result<const char*> copy = input_copy(send, env_.size * s.count * es, st);
          if (!copy.ok()) return copy.status();
          send = copy.value();
        }
        for (int r = 0; r < env_.size && rc == nccl::kSuccess; ++r) {
          rc = lib_.send(send + r * s.count * es, s.count, t, r, comm_, st);
          if (rc == nccl::kSuccess) rc = lib_.recv(recv + r * s.count * es, s.count, t, r, comm_, st);
        }
        break;
      case CollKind::kSend: rc = lib_.send(send, s.count, t, s.peer, comm_, st); break;
      case CollKind::kRecv: rc = lib_.recv(recv, s.count, t, s.peer, comm_, st); break;
      case CollKind::kBarrier:
        return error(Code::kInternal, "rank ", env_.rank, ": a barrier reached the nccl executor (it has no buffers)");
    }
    // Inside a group a nonblocking communicator may answer "in progress": group_end settles.
    if (rc != nccl::kSuccess && rc != nccl::kInProgress) return nccl::failure(lib_, comm_, rc, coll_name(s.kind));
    return Status();
  }

  // A copy of `bytes` at `input` in the scratch buffer, in stream order: the copy waits
  // until the previous call that used the scratch (on any stream) has finished with it.
  // Grows only; one per executor.
  Result<const char*> input_copy(const char* input, size_t bytes, void* stream) {
    const device::DeviceOps& dev = device::runtime();
    if (scratch_used_) {
      return error(Code::kUnsupported, "rank ", env_.rank, ": KOLO_BACKEND=nccl takes one in-place alltoall per group");
    }
    if (scratch_bytes_ < bytes) {
      if (scratch_ != nullptr) {
        KOLO_TRY(dev.event_synchronize(scratch_free_, Deadline(env_timeout_seconds())));
        KOLO_TRY(dev.free(scratch_));
        scratch_ = nullptr;
        scratch_bytes_ = 0;
      }
      if (scratch_free_ == nullptr) KOLO_TRY(dev.event_create(&scratch_free_));
      KOLO_TRY(dev.malloc(&scratch_, bytes));
      scratch_bytes_ = bytes;
    } else {
      KOLO_TRY(dev.stream_wait_event(stream, scratch_free_));
    }
    KOLO_TRY(dev.memcpy_async(scratch_, input, bytes, stream));
    scratch_used_ = true;
    return static_cast<const char*>(scratch_);
  }

  // AVG's division (and any postscale) on the stream, after NCCL, by kolo's kernel.
  Status postscale(const CollCall& call) {
    const CollSpec& s = call.spec;
    if (!s.postscaled || call.recv == nullptr) return Status();
    if (s.kind == CollKind::kReduce && s.root != env_.rank) return Status();
    return device_scale_copy(call.recv, call.recv, s.count, s.dtype, call.postscale, call.stream);
  }

  // The watchdog follows the call through an event recorded after it.
  Status watch(void* stream) {
    const device::DeviceOps& dev = device::runtime();
    void* event = nullptr;
    KOLO_TRY(dev.event_create(&event));
    Status s = dev.event_record(event, stream);
    if (!s.ok()) {
      (void)dev.event_destroy(event);
      return s;
    }
    {
      std::lock_guard<std::mutex> lock(m_);
      pending_.push_back({event, Deadline(env_timeout_seconds())});
      busy_.store(true, std::memory_order_release);
    }
    cv_.notify_all();
    return Status();
  }

  void watch_loop() {
    const device::DeviceOps& dev = device::runtime();
    std::unique_lock<std::mutex> lock(m_);
    while (!(stop_ && pending_.empty()) && !aborted_.load(std::memory_order_acquire)) {
      cv_.wait_for(lock, std::chrono::milliseconds(1));
      while (!pending_.empty()) {  // retire what has finished, oldest first
        Result<bool> done = dev.event_query(pending_.front().event);
        if (!done.ok() || !done.value()) break;
        (void)dev.event_destroy(pending_.front().event);
        pending_.pop_front();
      }
      if (pending_.empty()) busy_.store(false, std::memory_order_release);
      Status why = trouble();
      if (why.ok()) continue;
      abort_comm();
      for (Pending& p : pending_) (void)dev.event_destroy(p.event);  // released by the abort
      pending_.clear();
      busy_.store(false, std::memory_order_release);
      lock.unlock();
      env_.fail(why);
      cv_.notify_all();
      lock.lock();
    }
  }

  // Why the NCCL communicator must be aborted (ok: it need not). Under m_.
  Status trouble() {
    if (abort_requested_.load(std::memory_order_acquire)) {
      return error(Code::kAborted, "rank ", env_.rank, ": communicator was aborted");
    }
    int state = nccl::kSuccess;
    if (lib_.comm_get_async_error(comm_, &state) == nccl::kSuccess && state != nccl::kSuccess &&
        state != nccl::kInProgress) {
      return nccl::failure(lib_, comm_, state, str_cat("rank ", env_.rank, ": NCCL").c_str());
    }
    if (!pending_.empty() && pending_.front().deadline.expired()) {
      return error(Code::kTimeout, "rank ", env_.rank, ": an NCCL call did not finish within KOLO_TIMEOUT (",
                   env_timeout_seconds(), " s); a peer may have died");
    }
    return Status();
  }

  // Under m_, so that the watchdog never asks a communicator that is being freed. A call
  // that another thread is enqueuing at that moment is NCCL's to end (it allows aborting a
  // nonblocking communicator from another thread); later calls see aborted_.
  void abort_comm() {
    if (comm_ == nullptr || aborted_.exchange(true)) return;
    (void)lib_.comm_abort(comm_);
  }

  ExecutorEnv env_;
  const nccl::Library& lib_;
  nccl::Comm comm_ = nullptr;
  int device_ = -1;
  void* scratch_ = nullptr;  // in-place alltoall's input copy (device memory)
  size_t scratch_bytes_ = 0;
  void* scratch_free_ = nullptr;  // recorded after the last call that read the scratch
  bool scratch_used_ = false;     // by the call being enqueued
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  std::atomic<bool> busy_{false};
  std::atomic<bool> abort_requested_{false};
  std::atomic<bool> aborted_{false};
  bool stop_ = false;
  std::thread watchdog_;
};

}  // namespace

// Only when KOLO_BACKEND=nccl: then a missing library or device runtime fails the
// communicator's creation with the reason.
MadeExecutor create_nccl_executor(const ExecutorEnv& env) {
  if (!env.nccl_backend) return std::unique_ptr<Executor>();
  Result<const nccl::Library*> lib = nccl::library();
  if (!lib.ok()) return lib.status();
  const char* runtime = device::runtime().name;
  if (std::string(runtime) != "cuda") {
    return error(Code::kUnsupported, "KOLO_BACKEND=nccl needs the cuda device runtime, and this process has '", runtime,
                 "' (KOLO_DEVICE=", env_string("KOLO_DEVICE"), "); NCCL runs on GPU memory only");
  }
  return MadeExecutor(std::make_unique<NcclExecutor>(env, *lib.value()));
}

}  // namespace kolo
