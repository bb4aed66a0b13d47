// The device_staged executor: device buffers through the host plan of the same call, for
// ranks on different hosts and for device send/recv. No host function, and no host thread
// ever holds a stream: the caller's stream waits on the device for a word in pinned host
// memory (wait_value), which the progress thread writes (support/device/README.md).
//
// Everything is on the caller's stream, nothing on streams of kolo's own: a stream whose
// progress the host waits for could share a hardware queue with the caller's stream
// (CUDA_DEVICE_MAX_CONNECTIONS) and sit behind its wait, a deadlock. A call is cut in
// chunks (chunk_elems; a group is one chunk), staged through a ring of kStagedSlots pinned
// slots, the copies of chunk i+kStagedSlots-1 in while the host works on chunk i:
//   in(0) in(1) .. in(K-1) | wait(0) out(0) in(K) | wait(1) out(1) in(K+1) | ...
// where in(j) is the copies of chunk j into its slot and `in_done`, wait(j) the device
// waiting for the word to reach chunk j's number, out(j) its results copied back and
// `out_done` (a later chunk on another stream waits for it before reusing the slot).
// The progress thread takes the chunks in order: waits for `in_done` (polling an event,
// with KOLO_TIMEOUT), runs the chunk's host plan through the host runner (the planner
// and host executors: ExecutorEnv::host), then writes the chunk's number into the word.
//
// Failures: inputs that never arrive, a host plan that fails, an abort: the communicator
// fails (the next call and kolo_comm_get_async_error say why), the results of that chunk
// and of every later one are left unwritten, and every wait is still released in order,
// within KOLO_TIMEOUT of the failure: nothing waits for a word nobody will write.
//
// Pinned memory: the ring (kStagedSlots x staged_slot_bytes), and one large buffer for a
// chunk that does not fit a slot (a big group, send/recv or allgatherv; a call so large
// that its chunks outgrow a slot), its chunks then one at a time. Allocating pinned memory
// synchronises the device (CUDA): the ring is taken when the executor is made (where the
// thread has a device context; else at its first device call), the large buffer before
// the call that needs it, in make_room, once this communicator has nothing queued and no
// staged call of the process is (StagedProcess). Buffers are never freed: a destroyed
// executor's go to the next one (freeing synchronises the device too, and a destroy may
// come while peers' last calls still wait for this rank).
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/executors/executor.h"
#include "engine/executors/device_staged/staged_chunks.h"
#include "engine/executors/device_staged/staged_layout.h"
#include "engine/executors/device_staged/staged_process.h"
#include "support/device/device.h"
#include "support/log.h"

namespace kolo {
namespace {

using namespace staged;  // NOLINT: the layout is this executor's own vocabulary

// One call (or group) as the progress thread gets it.
struct Operation {
  int device = -1;
  std::vector<Chunk> chunks;
};

// A staging buffer's last user: a later chunk on another stream waits for its copies out.
struct LastUse {
  void* stream = nullptr;
  void* out_done = nullptr;  // an event of the buffer's own, re-recorded by each user
  bool used = false;
};

class StagedDeviceExecutor final : public Executor {
 public:
  explicit StagedDeviceExecutor(const ExecutorEnv& env)
      : env_(env), slot_bytes_(staged_slot_bytes(env.size)), ipc_possible_(env.plan_context->device_ipc) {
    // The ring now where that creates no device context (kolo has no call queued yet, and
    // a collective set-up means no peer waits for this rank): a thread-rank could not take
    // it later while its peers' calls, waiting for it, are queued.
    if (device::runtime().context_current()) (void)ensure_ring(Deadline(0));
  }

  ~StagedDeviceExecutor() override {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    // Every wait is released; the copies out behind them may still read the staging. Once
    // they are done the buffers go to the process's kept ones (never freed: that would
    // synchronise the device while peers' calls may still wait for this rank).
    const device::DeviceOps& dev = device::runtime();
    bool idle = true;
    for (auto& [device, events] : events_) {
      device::ScopedDevice on_device(device);
      std::vector<LastUse*> uses;
      for (LastUse& use : events.slots) uses.push_back(&use);
      uses.push_back(&events.large);
      for (LastUse* use : uses) {
        if (use->out_done == nullptr) continue;
        if (use->used) idle = dev.event_synchronize(use->out_done, Deadline(env_.timeout())).ok() && idle;
        (void)dev.event_destroy(use->out_done);
      }
      for (void* e : events.free) (void)dev.event_destroy(e);
    }
    if (!idle) {
      log_warn(Subsys::kExec, "rank ", env_.rank, ": device staging kept at destroy: a stream still copies from it");
      return;
    }
    StagedProcess& process = StagedProcess::get();
    if (ring_ != nullptr) process.give(ring_, ring_bytes_);
    if (large_ != nullptr) process.give(large_, large_bytes_);
    if (word_ != nullptr) process.give_word(word_);
  }

  Status run(const PlannedCall* calls, size_t n, const Deadline& deadline) override {
    const device::DeviceOps& dev = device::runtime();
    KOLO_TRY(check_device_group(calls, n, env_.rank));
    const int device = calls[0].call.device;
    device::ScopedDevice on_device(device);
    KOLO_TRY(on_device.status());
    KOLO_TRY(refuse_graph_capture(calls[0].call, env_.rank, "device_staged"));
    std::lock_guard<std::mutex> staging(staging_m_);  // ensure_staging replaces nothing meanwhile
    if (ring_ == nullptr || word_ == nullptr) {
      return error(Code::kInternal, "rank ", env_.rank, ": device staging was not set up before the call");
    }
    auto op = std::make_unique<Operation>();
    op->device = device;
    std::vector<CollCall> host_calls;
    for (size_t i = 0; i < n; ++i) host_calls.push_back(calls[i].call);
    // Cut as the Plan says (a group: one chunk).
    KOLO_TRY(chunks_of(host_calls.data(), n, calls[0].plan->chunk_elems, env_.size, env_.rank, &op->chunks));
    give_plans(calls, n, op->chunks);
    const bool fits = std::all_of(op->chunks.begin(), op->chunks.end(), [&](const Chunk& c) { return c.bytes <= slot_bytes_; });
    if (!fits && large_bytes_ < largest(op->chunks)) {
      // make_room takes the large buffer for the calls it expects here: those with
      // send/recv where device_ipc runs the rest. This one came through device_ipc's
      // fallback (peers that cannot map each other's memory), alike on every rank.
      return error(Code::kUnsupported, "rank ", env_.rank, ": device ", coll_name(calls[0].call.spec.kind),
                   " needs ", largest(op->chunks), " bytes of staging in one piece, more than a slot (",
                   slot_bytes_, " bytes) holds, where the GPUs cannot map each other's memory");
    }
    DeviceEvents* events;
    {
      std::lock_guard<std::mutex> lock(m_);  // the progress thread reads the map
      events = &events_[device];
    }
    StagedProcess& process = StagedProcess::get();
    std::shared_lock<std::shared_mutex> enqueueing(process.enqueue);
    Status s = enqueue(dev, calls[0].call.stream, fits, *events, op.get());
    if (!s.ok()) {
      // Part of it may be on the stream: its waits must still be released, in order.
      std::lock_guard<std::mutex> lock(m_);
      abandoned_ = true;
    }
    size_t items = 0;  // what it put on the stream (stream_items' count, from the chunks made)
    for (const Chunk& c : op->chunks) items += c.ins.size() + c.outs.size() + kStagedChunkItems;
    process.queued.fetch_add(1, std::memory_order_acq_rel);
    {
      std::lock_guard<std::mutex> lock(m_);
      queued_items_ += items;
      items_of_.push_back(items);
      queue_.push_back(std::move(op));
      ++pending_;
      busy_.store(true, std::memory_order_release);
      if (!thread_.joinable()) thread_ = std::thread([this] { progress(); });
    }
    cv_.notify_all();
    return s;
  }

  // The host Plans the calls' Plans recorded, to the chunks they fit: a group's chunk holds
  // every call whole; a single call's chunks of the planned size (a shorter last one is
  // planned when it runs). Chunks cut otherwise than planned (a call whose buffers overlap,
  // which the API refuses) run with plans of their own.
  static void give_plans(const PlannedCall* calls, size_t n, std::vector<Chunk>& chunks) {
    for (Chunk& c : chunks) {
      c.host_plans.assign(c.host_calls.size(), nullptr);
      for (size_t k = 0; k < c.host_calls.size() && k < n; ++k) {
        const Plan& p = *calls[k].plan;
        const size_t planned = p.chunk_elems != 0 ? p.chunk_elems : calls[k].call.spec.count;
        if (p.chunk_plan && c.host_calls[k].spec.count == planned) c.host_plans[k] = p.chunk_plan;
      }
    }
  }

  // make_room sizes the staging before the call is planned (it runs without the call lock,
  // which planning needs): by the planner's rule, which the Plan records (plan.cc).
  size_t planned_chunk_elems(const CollCall* calls, size_t n) const {
    return n == 1 ? staged_chunk_elems(calls[0].spec, env_.size) : 0;
  }

  bool busy() const override { return busy_.load(std::memory_order_acquire); }
  bool queues_device_work() const override { return true; }

  void abort() override {  // ends a make_room wait; the host plans fail through the links
    {
      std::lock_guard<std::mutex> lock(m_);
      aborted_ = true;
    }
    cv_.notify_all();
  }

  // Before the call lock, which run() holds and the progress thread needs for every host
  // plan: room on the stream (CUDA blocks an enqueue into a full stream), and the pinned
  // staging the call needs, taken once nothing is queued.
  Status make_room(const CollCall* calls, size_t n, const Deadline& deadline) override {
    KOLO_TRY(device::assert_may_block("a device call waiting for room on its stream"));
    // An empty group, or no device (the call fails where it names its buffers).
    if (n == 0 || !device::runtime().kind.runs_kernels) return Status();
    KOLO_TRY(ensure_staging(calls, n, deadline));
    std::unique_lock<std::mutex> lock(m_);
    if (queued_items_ == 0) return Status();  // the common case: no count needed
    const size_t items = stream_items(calls, n, planned_chunk_elems(calls, n), env_.size, env_.rank);
    while (queued_items_ > 0 && queued_items_ + items > kStagedStreamItems) {
      if (aborted_) return error(Code::kAborted, "rank ", env_.rank, ": communicator was aborted");
      if (deadline.expired()) {
        return error(Code::kTimeout, "rank ", env_.rank, ": ", queued_items_,
                     " device stream items still waiting for their host collectives at the deadline (KOLO_TIMEOUT)");
      }
      cv_.wait_for(lock, std::chrono::milliseconds(10));
    }
    return Status();
  }

  Status drain(const Deadline& deadline) override {
    KOLO_TRY(device::assert_may_block("waiting for queued device calls"));
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
  // Per device: `in_done` events to reuse, and each buffer's last use.
  struct DeviceEvents {
    std::vector<void*> free;
    LastUse slots[kStagedSlots];
    LastUse large;
  };

  // The word, the ring and, for a call with a chunk larger than a slot, the large buffer.
  // The large buffer in use is replaced only once this communicator's calls are done and
  // its copies out have run; run() holds staging_m_ while it enqueues, so no call takes
  // it meanwhile. The wait for the calls is outside staging_m_ (their host plans need the
  // call lock, which a run() waiting for staging_m_ would hold).
  Status ensure_staging(const CollCall* calls, size_t n, const Deadline& deadline) {
    {
      std::lock_guard<std::mutex> staging(staging_m_);
      if (ring_ == nullptr || word_ == nullptr) KOLO_TRY(ensure_ring(deadline));
    }
    // Where device_ipc runs, only calls with send/recv come here: no other call needs the
    // large buffer (its allocation waits for the device, which a thread-rank's peers'
    // kernels may hold), nor the layout that tells (every device call passes here).
    bool p2p = false;
    for (size_t i = 0; i < n; ++i) p2p = p2p || calls[i].spec.kind == CollKind::kSend || calls[i].spec.kind == CollKind::kRecv;
    if (ipc_possible_ && !p2p) return Status();
    std::vector<Chunk> chunks;
    KOLO_TRY(chunks_of(calls, n, planned_chunk_elems(calls, n), env_.size, env_.rank, &chunks));
    const size_t need = largest(chunks);
    if (need <= slot_bytes_) return Status();
    while (true) {
      {
        std::lock_guard<std::mutex> staging(staging_m_);
        if (need <= large_bytes_) return Status();
        if (!busy()) {
          KOLO_TRY(large_done(deadline));
          size_t got = 0;
          Result<void*> buffer = StagedProcess::get().pinned(need, &got, large_, large_bytes_, deadline, env_.rank);
          if (!buffer.ok()) return buffer.status();
          large_ = buffer.value();
          large_bytes_ = got;
          return Status();
        }
      }
      KOLO_TRY(drain(deadline));
    }
  }

  // The word and the ring (a no-op once taken). Under staging_m_ (or in the constructor).
  Status ensure_ring(const Deadline& deadline) {
    if (word_ == nullptr) {
      Result<uint32_t*> w = StagedProcess::get().take_word();
      if (!w.ok()) return w.status();
      word_ = w.value();
      next_seq_ = __atomic_load_n(word_, __ATOMIC_ACQUIRE);  // a reused word goes on from its value
    }
    if (ring_ == nullptr) {
      size_t got = 0;
      Result<void*> ring = StagedProcess::get().pinned(kStagedSlots * slot_bytes_, &got, nullptr, 0, deadline, env_.rank);
      if (!ring.ok()) return ring.status();
      ring_ = static_cast<char*>(ring.value());
      ring_bytes_ = got;
    }
    return Status();
  }

  // The copies out of the large buffer are done (on every device it was used on). Under
  // staging_m_: no run() records a new use meanwhile.
  Status large_done(const Deadline& deadline) {
    std::vector<void*> last;
    {
      std::lock_guard<std::mutex> lock(m_);
      for (auto& [device, events] : events_) {
        if (events.large.used) last.push_back(events.large.out_done);
      }
    }
    for (void* e : last) KOLO_TRY(device::runtime().event_synchronize(e, deadline));
    return Status();
  }

  // The chunks on the caller's stream: the copies in of up to kStagedSlots chunks ahead,
  // then per chunk its wait, its copies out and the next copies in. Chunks that do not all
  // fit a slot share the large buffer, one at a time. Every chunk gets its number even
  // when enqueuing fails halfway (the progress thread releases them all).
  Status enqueue(const device::DeviceOps& dev, void* stream, bool fits, DeviceEvents& events, Operation* op) {
    std::vector<LastUse*> use(op->chunks.size(), nullptr);
    for (size_t j = 0; j < op->chunks.size(); ++j) {  // nothing here fails: every chunk is released
      Chunk& c = op->chunks[j];
      c.seq = ++next_seq_;
      if (fits) {
        const size_t slot = next_slot_++ % kStagedSlots;
        c.staging = ring_ + slot * slot_bytes_;
        use[j] = &events.slots[slot];
      } else {
        c.staging = static_cast<char*>(large_);
        use[j] = &events.large;
      }
      for (size_t k = 0; k < c.host_calls.size(); ++k) {
        c.host_calls[k].send = c.send_at[k] == kNowhere ? nullptr : c.staging + c.send_at[k];
        c.host_calls[k].recv = c.recv_at[k] == kNowhere ? nullptr : c.staging + c.recv_at[k];
      }
    }
    for (Chunk& c : op->chunks) KOLO_TRY(take_event(dev, events, &c.in_done));
    const size_t ahead = fits ? kStagedSlots : 1;
    size_t staged = 0;
    for (size_t i = 0; i < op->chunks.size(); ++i) {
      for (; staged < op->chunks.size() && staged < i + ahead; ++staged) {
        KOLO_TRY(stage_in(dev, stream, op->chunks[staged], *use[staged]));
      }
      const Chunk& c = op->chunks[i];
      KOLO_TRY(dev.wait_value(stream, word_, c.seq));
      for (const Copy& x : c.outs) KOLO_TRY(dev.memcpy_async(x.device, c.staging + x.offset, x.bytes, stream));
      KOLO_TRY(dev.event_record(use[i]->out_done, stream));
      use[i]->stream = stream;
      use[i]->used = true;
    }
    return Status();
  }

  // A chunk's copies into its staging, after the staging's last user on another stream.
  Status stage_in(const device::DeviceOps& dev, void* stream, const Chunk& c, LastUse& use) {
    if (use.out_done == nullptr) KOLO_TRY(dev.event_create(&use.out_done));
    if (use.used && use.stream != stream) KOLO_TRY(dev.stream_wait_event(stream, use.out_done));
    for (const Copy& x : c.ins) KOLO_TRY(dev.memcpy_async(c.staging + x.offset, x.device, x.bytes, stream));
    return dev.event_record(c.in_done, stream);
  }

  Status take_event(const device::DeviceOps& dev, DeviceEvents& events, void** event) {
    {
      std::lock_guard<std::mutex> lock(m_);
      if (!events.free.empty()) {
        *event = events.free.back();
        events.free.pop_back();
        return Status();
      }
    }
    return dev.event_create(event);
  }

  // ---- the progress thread -------------------------------------------------------------

  void progress() {
    while (true) {
      std::unique_ptr<Operation> op;
      {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        op = std::move(queue_.front());
        queue_.pop_front();
      }
      process(*op);
      StagedProcess::get().queued.fetch_sub(1, std::memory_order_acq_rel);
      {
        std::lock_guard<std::mutex> lock(m_);
        queued_items_ -= items_of_.front();
        items_of_.pop_front();
        if (--pending_ == 0) busy_.store(false, std::memory_order_release);
      }
      cv_.notify_all();
    }
  }

  // One call: each chunk's host plan once its inputs are staged, then its release.
  void process(Operation& op) {
    const device::DeviceOps& dev = device::runtime();
    device::ScopedDevice on_device(op.device);
    {
      std::lock_guard<std::mutex> lock(m_);
      if (abandoned_ && broken_.ok()) {
        broken_ = error(Code::kInternal, "rank ", env_.rank, ": a device call failed while being enqueued");
      }
    }
    for (Chunk& c : op.chunks) {
      Status s = broken_;
      if (s.ok()) s = on_device.status();
      if (s.ok()) {
        s = dev.event_synchronize(c.in_done, Deadline(env_.timeout()));
        if (!s.ok()) s = error(s.code(), "rank ", env_.rank, ": device inputs of a call never arrived: ", s.message());
      }
      if (s.ok()) s = env_.host->run_host(c.host_calls.data(), c.host_calls.size(), c.host_plans.data());
      if (!s.ok() && broken_.ok()) {
        broken_ = s;
        env_.fail(s);  // the peers' calls end with an error through the links
      }
      // The stream goes on to the copies out: the results, or (after a failure) staging
      // nobody wrote, which the communicator's error covers.
      __atomic_store_n(word_, c.seq, __ATOMIC_RELEASE);
      if (c.in_done != nullptr) {
        std::lock_guard<std::mutex> lock(m_);
        events_[op.device].free.push_back(c.in_done);
      }
    }
  }

  ExecutorEnv env_;
  const size_t slot_bytes_;
  const bool ipc_possible_;  // device_ipc takes the device calls without send/recv
  // Made before any call is queued (constructor, make_room: under staging_m_), read by
  // run() under staging_m_ and (the word) by the progress thread.
  std::mutex staging_m_;
  uint32_t* word_ = nullptr;
  char* ring_ = nullptr;
  size_t ring_bytes_ = 0;
  void* large_ = nullptr;
  size_t large_bytes_ = 0;
  // Under the call lock (run).
  uint32_t next_seq_ = 0;  // the last chunk number given out
  uint64_t next_slot_ = 0;
  std::map<int, DeviceEvents> events_;  // by device; `free` under m_ as well
  // The progress thread's own.
  Status broken_;  // the first failure: later chunks are only released
  // Under m_.
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Operation>> queue_;
  std::deque<size_t> items_of_;  // the stream items of each queued operation
  size_t queued_items_ = 0;
  size_t pending_ = 0;  // queued or being processed
  std::atomic<bool> busy_{false};  // pending_ > 0, readable without the lock
  bool stop_ = false;
  bool aborted_ = false;    // kolo_comm_abort: make_room waits no more
  bool abandoned_ = false;  // an enqueue failed halfway: the communicator is broken
  std::thread thread_;  // started by the first device call
};

}  // namespace

// Any device call can be staged through host memory: the row always runs.
bool declare_staged_device_executor(const PlannerInputs&, PlanContext&) { return true; }

MadeExecutor create_staged_device_executor(const ExecutorEnv& env) {
  return MadeExecutor(std::make_unique<StagedDeviceExecutor>(env));
}

}  // namespace kolo
