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
#include <cstdlib>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "engine/executors/executor.h"
#include "engine/executors/nccl/nccl_library.h"
#include "kernels/device_kernels.h"
#include "support/device/device.h"
#include "support/log.h"

namespace kolo {
namespace {

// The collectives that take a reduction operation.
bool reduces(CollKind kind) {
  return kind == CollKind::kAllreduce || kind == CollKind::kReduce || kind == CollKind::kReduceScatter;
}

class NcclExecutor final : public Executor {
 public:
  NcclExecutor(const ExecutorEnv& env, const nccl::Library& lib) : env_(env), lib_(lib) {}
  double timeout() const { return env_.timeout(); }

  ~NcclExecutor() override {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    device::ScopedDevice on_device(device_);  // events and memory of this device only
    {
      // Finalize flushes what is queued, then destroy; if that fails or does not finish
      // in time, abort, as NCCL advises after an error.
      std::unique_lock<std::mutex> lock(comm_m_);
      if (comm_ != nullptr && !aborted_) {
        Status finalized = settle(lib_.comm_finalize(comm_), "ncclCommFinalize", Deadline(timeout()), lock);
        if (finalized.ok()) {
          (void)lib_.comm_destroy(comm_);
        } else {
          abort_comm();
        }
      }
    }
    // NCCL is done with the scratch now (finalized or aborted).
    const device::DeviceOps& dev = device::runtime();
    if (scratch_ != nullptr) (void)dev.free(scratch_);
    if (scratch_free_ != nullptr) (void)dev.event_destroy(scratch_free_);
  }

  Status run(const PlannedCall* calls, size_t n, const Deadline& deadline) override {
    KOLO_TRY(check_device_group(calls, n, env_.rank));
    for (size_t i = 0; i < n; ++i) KOLO_TRY(check(calls[i].call, n));  // before any NCCL call
    const int device = calls[0].call.device;
    void* stream = calls[0].call.stream;
    device::ScopedDevice on_device(device);
    KOLO_TRY(on_device.status());
    std::unique_lock<std::mutex> lock(comm_m_);
    KOLO_TRY(ensure_comm(device, deadline, lock));
    const int started = lib_.group_start();
    if (started != nccl::kSuccess) return nccl::failure(lib_, comm_, started, "ncclGroupStart");
    Status enqueued;
    for (size_t i = 0; i < n && enqueued.ok(); ++i) enqueued = enqueue(calls[i].call);
    // The group is always closed and settled, even after an error: a nonblocking
    // communicator takes no other call while it is in progress.
    Status ended = settle(lib_.group_end(), "ncclGroupEnd", deadline, lock);
    KOLO_TRY(enqueued);
    KOLO_TRY(ended);
    lock.unlock();
    for (size_t i = 0; i < n; ++i) KOLO_TRY(postscale(calls[i].call));
    if (scratch_used_) {  // the scratch is free again once this call's sends are done
      scratch_used_ = false;
      KOLO_TRY(device::runtime().event_record(scratch_free_, stream));
    }
    // Captured into a CUDA graph: the graph's launches are the user's; there is no
    // enqueued work for the watchdog to follow.
    Result<bool> capturing = device::runtime().stream_capturing(stream);
    if (capturing.ok() && capturing.value()) return Status();
    return watch(stream);
  }

  bool busy() const override { return busy_.load(std::memory_order_acquire); }
  bool queues_device_work() const override { return true; }

  Status drain(const Deadline& deadline) override {
    std::unique_lock<std::mutex> lock(m_);
    while (!pending_.empty()) {
      if (aborted_.load(std::memory_order_acquire)) break;
      if (deadline.expired()) {
        return error(Code::kTimeout, "rank ", env_.rank, ": NCCL calls still running at the deadline (KOLO_TIMEOUT)");
      }
      cv_.wait_for(lock, std::chrono::milliseconds(1));
    }
    if (aborted_.load(std::memory_order_acquire)) {
      return error(Code::kAborted, "rank ", env_.rank, ": the NCCL communicator was aborted");
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
  // when the communicator's state leaves it. Polls under comm_m_ (held by `lock`), which
  // it lets go while it sleeps so that the watchdog can abort; ends at the deadline and on
  // kolo_comm_abort, aborting the NCCL communicator.
  Status settle(int rc, const char* what, const Deadline& deadline, std::unique_lock<std::mutex>& lock) {
    while (rc == nccl::kInProgress) {
      if (abort_requested_.load(std::memory_order_acquire)) {
        abort_comm();
        return error(Code::kAborted, "rank ", env_.rank, ": communicator aborted during ", what);
      }
      if (deadline.expired()) {
        abort_comm();
        return error(Code::kTimeout, "rank ", env_.rank, ": ", what, " still in progress at the deadline (KOLO_TIMEOUT)");
      }
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      lock.lock();
      if (aborted_) return error(Code::kAborted, "rank ", env_.rank, ": the NCCL communicator was aborted during ", what);
      const int polled = lib_.comm_get_async_error(comm_, &rc);
      if (polled != nccl::kSuccess) return nccl::failure(lib_, comm_, polled, "ncclCommGetAsyncError");
    }
    if (rc != nccl::kSuccess) return nccl::failure(lib_, comm_, rc, what);
    return Status();
  }

  // The NCCL communicator, made at the first call on the device of its buffers. Under
  // comm_m_.
  Status ensure_comm(int device, const Deadline& deadline, std::unique_lock<std::mutex>& lock) {
    if (aborted_) return error(Code::kAborted, "rank ", env_.rank, ": the NCCL communicator was aborted");
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
    device_ = device;
    Status made = rc == nccl::kSuccess || rc == nccl::kInProgress
                      ? settle(rc, "ncclCommInitRankConfig", deadline, lock)
                      : nccl::failure(lib_, comm_, rc, "ncclCommInitRankConfig");
    if (!made.ok()) {
      abort_comm();  // a communicator NCCL handed back frees with an abort
      return made;
    }
    log_info(Subsys::kInit, "rank ", env_.rank, ": NCCL communicator of ", env_.size, " ranks on device ", device);
    watchdog_ = std::thread([this] { watch_loop(); });
    return Status();
  }

  // What NCCL cannot take, refused before the group starts.
  Status check(const CollCall& call, size_t group_size) {
    const CollSpec& s = call.spec;
    if (s.prescaled) {
      return error(Code::kUnsupported, "rank ", env_.rank, ": KOLO_BACKEND=nccl does not prescale device buffers");
    }
    if (s.kind == CollKind::kBarrier) {
      return error(Code::kInternal, "rank ", env_.rank, ": a barrier reached the nccl executor (it has no buffers)");
    }
    if (s.kind == CollKind::kAlltoall && call.send == call.recv && group_size > 1) {
      return error(Code::kUnsupported, "rank ", env_.rank, ": KOLO_BACKEND=nccl runs an in-place alltoall alone, not in a group");
    }
    Result<int> dtype = nccl::dtype_of(s.dtype, lib_.version);
    if (!dtype.ok()) return dtype.status();
    if (reduces(s.kind)) return nccl::op_of(s.op).status();
    return Status();
  }

  // One call's NCCL calls, inside the group (checked already).
  Status enqueue(const CollCall& call) {
    const CollSpec& s = call.spec;
    const int t = nccl::dtype_of(s.dtype, lib_.version).value();
    const int op = reduces(s.kind) ? nccl::op_of(s.op).value() : 0;
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
      case CollKind::kBarrier: break;  // refused by check()
    }
    // Inside a group a nonblocking communicator may answer "in progress": group_end settles.
    if (rc != nccl::kSuccess && rc != nccl::kInProgress) return nccl::failure(lib_, comm_, rc, coll_name(s.kind));
    return Status();
  }

  // A copy of `bytes` at `input` in the scratch buffer, in stream order: the copy waits
  // until the previous call that used the scratch (on any stream) has finished with it.
  // Grows only; one per executor, one use per group (check() sees to it).
  Result<const char*> input_copy(const char* input, size_t bytes, void* stream) {
    const device::DeviceOps& dev = device::runtime();
    if (scratch_free_ == nullptr) KOLO_TRY(dev.event_create(&scratch_free_));
    if (scratch_bytes_ < bytes) {
      if (scratch_ != nullptr) {
        KOLO_TRY(dev.event_synchronize(scratch_free_, Deadline(timeout())));
        KOLO_TRY(dev.free(scratch_));
        scratch_ = nullptr;
        scratch_bytes_ = 0;
      }
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
      pending_.push_back({event, Deadline(timeout())});
      busy_.store(true, std::memory_order_release);
    }
    cv_.notify_all();
    return Status();
  }

  void watch_loop() {
    const device::DeviceOps& dev = device::runtime();
    (void)dev.set_device(device_);  // its events' device; no context on another GPU
    while (true) {
      Status why;
      {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait_for(lock, std::chrono::milliseconds(1));
        if (stop_ && pending_.empty()) break;
        while (!pending_.empty()) {  // retire what has finished, oldest first
          Result<bool> done = dev.event_query(pending_.front().event);
          if (!done.ok() || !done.value()) break;
          (void)dev.event_destroy(pending_.front().event);
          pending_.pop_front();
        }
        if (pending_.empty()) busy_.store(false, std::memory_order_release);
        if (!pending_.empty() && pending_.front().deadline.expired()) {
          why = error(Code::kTimeout, "rank ", env_.rank, ": an NCCL call did not finish within KOLO_TIMEOUT (",
                      timeout(), " s); a peer may have died");
        }
      }
      if (why.ok()) why = nccl_trouble();
      if (why.ok() && !aborted_) continue;
      // Fail the communicator first, so that nothing that sees the queue empty passes.
      if (!why.ok()) env_.fail(why);
      {
        std::lock_guard<std::mutex> lock(comm_m_);
        abort_comm();  // releases the streams
      }
      break;
    }
    // Whatever is left will never be waited for.
    std::lock_guard<std::mutex> lock(m_);
    for (Pending& p : pending_) (void)dev.event_destroy(p.event);
    pending_.clear();
    busy_.store(false, std::memory_order_release);
    cv_.notify_all();
  }

  // An abort asked for, or an error NCCL reports (a peer died): ok when neither. Does not
  // wait for a call that holds the communicator; the next round asks again.
  Status nccl_trouble() {
    if (abort_requested_.load(std::memory_order_acquire)) {
      return error(Code::kAborted, "rank ", env_.rank, ": communicator was aborted");
    }
    std::unique_lock<std::mutex> lock(comm_m_, std::try_to_lock);
    if (!lock.owns_lock() || aborted_) return Status();
    int state = nccl::kSuccess;
    if (lib_.comm_get_async_error(comm_, &state) == nccl::kSuccess && state != nccl::kSuccess &&
        state != nccl::kInProgress) {
      return nccl::failure(lib_, comm_, state, str_cat("rank ", env_.rank, ": NCCL").c_str());
    }
    return Status();
  }

  // Under comm_m_, so that no other thread is inside an NCCL call on the communicator it
  // frees; later calls see aborted_.
  void abort_comm() {
    if (comm_ == nullptr || aborted_.exchange(true)) return;
    (void)lib_.comm_abort(comm_);
  }

  ExecutorEnv env_;
  const nccl::Library& lib_;
  // Every NCCL call on comm_ (NCCL takes one thread at a time per communicator), and the
  // abort; never held while waiting for m_.
  std::mutex comm_m_;
  nccl::Comm comm_ = nullptr;
  std::atomic<bool> aborted_{false};  // comm_ aborted (and freed): no NCCL call on it again
  int device_ = -1;
  void* scratch_ = nullptr;  // in-place alltoall's input copy (device memory)
  size_t scratch_bytes_ = 0;
  void* scratch_free_ = nullptr;  // recorded after the last call that read the scratch
  bool scratch_used_ = false;     // by the call being enqueued
  // The watchdog's queue.
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  std::atomic<bool> busy_{false};
  std::atomic<bool> abort_requested_{false};
  bool stop_ = false;
  std::thread watchdog_;
};

}  // namespace

// Only when KOLO_BACKEND=nccl: then a missing library or device runtime fails the
// communicator's creation with the reason.
// KOLO_BACKEND=nccl: device calls go to NCCL.
bool declare_nccl_executor(const PlannerInputs& in, PlanContext&) { return in.settings.nccl_backend; }

MadeExecutor create_nccl_executor(const ExecutorEnv& env) {
  Result<const nccl::Library*> lib = nccl::library(env.settings->nccl_library);
  if (!lib.ok()) return lib.status();
  const char* runtime = device::runtime().name;
  if (!device::runtime().kind.gpu) {
    return error(Code::kUnsupported, "KOLO_BACKEND=nccl needs the cuda device runtime, and this process has '", runtime,
                 "' (KOLO_DEVICE); NCCL runs on GPU memory only");
  }
  if (env.settings->nccl_comm_blocking) {
    log_warn(Subsys::kInit, "NCCL_COMM_BLOCKING=1 makes NCCL's calls block: KOLO_TIMEOUT cannot end a hang in them");
  }
  return MadeExecutor(std::make_unique<NcclExecutor>(env, *lib.value()));
}

}  // namespace kolo
