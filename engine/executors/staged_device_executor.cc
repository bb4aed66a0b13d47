// The device_staged executor: device buffers through the host plan of the same call, for
// ranks on different hosts and for device send/recv. No host function, and no host thread
// ever holds a stream (CUDA runs every stream's host functions on one thread of the
// process, and some of its calls wait for the whole device: a held stream deadlocks them).
//
// On the caller's stream a call puts two items, whatever its size:
//   record `ready`;  wait_value(word >= seq)   (a stream memory operation, on the device)
// The progress thread takes the calls (operations) in order and, for each, on two streams
// of its own (a lane: `in` and `out`), pipelines the chunks (steps) through a ring of
// kStagedSlots pinned slots:
//   in:   wait `ready`; copy step i+1 device -> slot; record in_done
//   host: wait in_done of step i (polling an event, with KOLO_TIMEOUT); run its host plan
//         through the communicator (ExecutorEnv::run_host)
//   out:  copy step i-1 slot -> device; record out_done; after the last step, write seq
// so the caller's stream goes on once the results are on the device. A slot is reused by
// the step kStagedSlots later, the `in` stream waiting (on the device) for the `out` copy
// that read it last. Steps are the chunks of a large single call (chunk_elems), or one
// step for a group or a call that is not cut.
//
// Failures: inputs that never arrive, a host plan that fails, an abort: the communicator
// fails (the next call and kolo_comm_get_async_error say why), this call's and every later
// call's results are left unwritten, and every stream is still released by its seq, within
// KOLO_TIMEOUT of the failure: nothing waits for a word nobody will write.
//
// Pinned memory: the ring (kStagedSlots x staged_slot_bytes) is the only pinned staging,
// taken once. Allocating pinned memory synchronises the device (CUDA), so it is taken only
// while no staged call of the process is queued (StagedProcess); until then, and for a step
// larger than a slot (a big group, send/recv or allgatherv), staging is pageable host memory.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "engine/executors/executor.h"
#include "engine/executors/staged_layout.h"
#include "support/device/device.h"
#include "support/env.h"
#include "support/log.h"

namespace kolo {
namespace {

using namespace staged;  // NOLINT: the layout is this executor's own vocabulary

// What every staged executor of the process shares: the pinned words that release the
// callers' streams, and the rule for pinned allocations. A pinned allocation waits for all
// work queued on the device; were a staged call queued, its stream would wait for a host
// collective that may need this very thread (a thread-rank's peer) to go on: a deadlock.
// So pinned memory is taken only while `queued` is zero, holding `enqueue` exclusively
// (run() holds it shared while it enqueues a call).
class StagedProcess {
 public:
  static StagedProcess& get() {
    static StagedProcess* p = new StagedProcess();  // never destroyed: streams may still read its words
    return *p;
  }

  // A word for an executor's releases, in pinned memory the device maps.
  Result<uint32_t*> take_word() {
    std::unique_lock<std::shared_mutex> lock(enqueue);
    if (free_words_.empty()) {
      void* page = nullptr;
      KOLO_TRY(device::runtime().host_alloc(&page, kWordsPerPage * sizeof(uint32_t)));
      auto* words = static_cast<uint32_t*>(page);
      for (size_t i = 0; i < kWordsPerPage; ++i) {
        words[i] = 0;
        free_words_.push_back(&words[i]);
      }
    }
    uint32_t* w = free_words_.back();
    free_words_.pop_back();
    return w;
  }
  void give_word(uint32_t* w) {
    std::unique_lock<std::shared_mutex> lock(enqueue);
    free_words_.push_back(w);
  }

  // Pinned memory of `bytes`, or null when a staged call of the process is queued.
  Result<void*> try_pinned(size_t bytes) {
    std::unique_lock<std::shared_mutex> lock(enqueue);
    if (queued.load(std::memory_order_acquire) != 0) return static_cast<void*>(nullptr);
    void* p = nullptr;
    KOLO_TRY(device::runtime().host_alloc(&p, bytes));
    return p;
  }

  std::shared_mutex enqueue;
  std::atomic<size_t> queued{0};  // calls whose streams wait for a host collective

 private:
  static constexpr size_t kWordsPerPage = 1024;
  std::vector<uint32_t*> free_words_;
};

// A piece to copy: device memory and where it lies in its step's staging.
struct Copy {
  char* device;
  size_t offset;
  size_t bytes;
};

// One chunk, or one group: the host calls on its staging, the copies in and out.
struct Step {
  std::vector<CollCall> host_calls;  // send/recv: offsets into the staging (npos: none)
  std::vector<size_t> send_at, recv_at;
  std::vector<Copy> ins, outs;
  size_t bytes = 0;  // the staging it needs
};

struct Operation {
  void* stream = nullptr;  // the caller's
  int device = -1;
  void* ready = nullptr;  // recorded on the caller's stream after its inputs
  uint32_t seq = 0;       // the word value that releases the caller's stream
  std::vector<Step> steps;
};

// A step's staging: a slot of the ring, or pageable memory the slot holds until reused.
struct Slot {
  char* pinned = nullptr;
  std::unique_ptr<char[]> pageable;
  void* in_done = nullptr;
  void* out_done = nullptr;
  bool used = false;  // out_done recorded at least once
};

// The streams, ring and events of one device.
struct Lane {
  void* in = nullptr;
  void* out = nullptr;
  void* ring = nullptr;  // kStagedSlots slots of slot_bytes, pinned; null until taken
  Slot slots[kStagedSlots];
  std::vector<void*> free_events;  // `ready` events to reuse
};

constexpr size_t kNowhere = ~size_t{0};

class StagedDeviceExecutor final : public Executor {
 public:
  explicit StagedDeviceExecutor(const ExecutorEnv& env) : env_(env), slot_bytes_(staged_slot_bytes(env.size)) {}

  ~StagedDeviceExecutor() override {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    const device::DeviceOps& dev = device::runtime();
    bool all_idle = true;
    for (auto& [device, lane] : lanes_) {
      device::ScopedDevice on_device(device);
      // What the lane still copies refers to the ring: it must be done before it goes.
      bool idle = true;
      for (void* s : {lane->in, lane->out}) {
        if (s != nullptr) idle = dev.stream_synchronize(s, Deadline(env_timeout_seconds())).ok() && idle;
      }
      all_idle = all_idle && idle;
      if (!idle) continue;  // kept: a stream still refers to it
      for (Slot& slot : lane->slots) {
        for (void* e : {slot.in_done, slot.out_done}) {
          if (e != nullptr) (void)dev.event_destroy(e);
        }
      }
      for (void* e : lane->free_events) (void)dev.event_destroy(e);
      for (void* s : {lane->in, lane->out}) {
        if (s != nullptr) (void)dev.stream_destroy(s);
      }
      if (lane->ring != nullptr) (void)dev.host_free(lane->ring);
    }
    // Every release is written once the lanes are idle; a word a stream may still be
    // about to write is never handed on.
    if (word_ != nullptr && all_idle) StagedProcess::get().give_word(word_);
  }

  Status run(const PlannedCall* calls, size_t n, const Deadline& deadline) override {
    const device::DeviceOps& dev = device::runtime();
    KOLO_TRY(check_device_group(calls, n, env_.rank));
    const int device = calls[0].call.device;
    device::ScopedDevice on_device(device);
    KOLO_TRY(on_device.status());
    KOLO_TRY(refuse_graph_capture(calls[0].call, env_.rank, "device_staged"));
    auto op = std::make_unique<Operation>();
    op->stream = calls[0].call.stream;
    op->device = device;
    KOLO_TRY(steps_of(calls, n, &op->steps));
    KOLO_TRY(prepare(dev, device, &op->ready));
    StagedProcess& process = StagedProcess::get();
    std::shared_lock<std::shared_mutex> enqueueing(process.enqueue);
    const uint32_t seq = next_seq_ + 1;
    KOLO_TRY(dev.event_record(op->ready, op->stream));
    Status held = dev.wait_value(op->stream, word_, seq);
    if (!held.ok()) return held;  // `ready` alone is harmless; the call is not queued
    next_seq_ = seq;
    op->seq = seq;
    process.queued.fetch_add(1, std::memory_order_acq_rel);
    {
      std::lock_guard<std::mutex> lock(m_);
      queue_.push_back(std::move(op));
      ++pending_;
      busy_.store(true, std::memory_order_release);
      if (!thread_.joinable()) thread_ = std::thread([this] { progress(); });
    }
    cv_.notify_all();
    return Status();
  }

  bool busy() const override { return busy_.load(std::memory_order_acquire); }

  void abort() override {  // ends a make_room wait; the host plans fail through the links
    {
      std::lock_guard<std::mutex> lock(m_);
      aborted_ = true;
    }
    cv_.notify_all();
  }

  // run() holds the call lock, which the progress thread needs for every host plan, and
  // CUDA blocks an enqueue into a full stream: a call waits here, before the lock, while
  // kStagedQueuedCalls are queued (two stream items each).
  Status make_room(const CollCall*, size_t, const Deadline& deadline) override {
    KOLO_TRY(device::assert_may_block("a device call waiting for room on its stream"));
    std::unique_lock<std::mutex> lock(m_);
    while (pending_ >= kStagedQueuedCalls) {
      if (aborted_) return error(Code::kAborted, "rank ", env_.rank, ": communicator was aborted");
      if (deadline.expired()) {
        return error(Code::kTimeout, "rank ", env_.rank, ": ", pending_,
                     " device calls still waiting for their host collectives at the deadline (KOLO_TIMEOUT)");
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
  // ---- the caller's side ---------------------------------------------------------------

  // The steps of calls[0..n): each chunk of a single large call, else one for all.
  Status steps_of(const PlannedCall* calls, size_t n, std::vector<Step>* steps) const {
    const size_t per = n == 1 ? chunk_elems(calls[0].call, env_.size, env_.rank) : 0;
    if (per == 0) {
      std::vector<Part> parts;
      for (size_t i = 0; i < n; ++i) parts.push_back(part_of(calls[i].call, 0, calls[i].call.spec.count, env_.size, env_.rank));
      steps->emplace_back();
      return lay_out(parts, &steps->back());
    }
    const size_t count = calls[0].call.spec.count;
    for (size_t first = 0; first < count; first += per) {
      steps->emplace_back();
      KOLO_TRY(lay_out({part_of(calls[0].call, first, std::min(per, count - first), env_.size, env_.rank)}, &steps->back()));
    }
    return Status();
  }

  // Where each region of each part goes in the step's staging, and the copies in and out.
  Status lay_out(const std::vector<Part>& parts, Step* step) const {
    size_t end = 0;
    for (const Part& p : parts) {
      Layout l;
      KOLO_TRY(layout_of(p, env_.rank, &l));
      size_t at[2] = {0, 0};
      for (int r = 0; r < l.regions; ++r) {
        at[r] = end;
        end += staged_aligned(l.region[r].total());
      }
      CollCall host = p.call;
      host.spec.device = false;
      host.stream = nullptr;
      host.send = host.recv = nullptr;
      step->send_at.push_back(l.send_in < 0 ? kNowhere : at[l.send_in] + l.region[l.send_in].locate(p.send.device, p.send.bytes));
      step->recv_at.push_back(l.recv_in < 0 ? kNowhere : at[l.recv_in] + l.region[l.recv_in].locate(p.recv.device, p.recv.bytes));
      if (l.whole_in) {
        add_copies(l.region[0], l.region[0], at[0], &step->ins);
      } else if (l.send_in >= 0) {
        add_copies(p.send, l.region[l.send_in], at[l.send_in], &step->ins);
      }
      if (l.recv_in >= 0) add_copies(p.recv, l.region[l.recv_in], at[l.recv_in], &step->outs);
      step->host_calls.push_back(host);
    }
    step->bytes = end;
    return Status();
  }

  // The pieces of `view`, each to where it lies in the staging of `region` (at `at`).
  static void add_copies(const View& view, const View& region, size_t at, std::vector<Copy>* copies) {
    for (size_t q = 0; q < view.blocks; ++q) {
      const char* d = view.device + q * view.stride;
      copies->push_back({const_cast<char*>(d), at + region.locate(d, view.bytes), view.bytes});
    }
  }

  // Before a call is queued: the release word, the device's lane (its ring, when pinned
  // memory may be taken now) and a `ready` event. Only here are device resources made:
  // under the call lock, with no call of this communicator queued or one queued already.
  Status prepare(const device::DeviceOps& dev, int device, void** ready) {
    if (word_ == nullptr) {
      Result<uint32_t*> w = StagedProcess::get().take_word();
      if (!w.ok()) return w.status();
      word_ = w.value();
      next_seq_ = __atomic_load_n(word_, __ATOMIC_ACQUIRE);  // a reused word goes on from its value
    }
    std::lock_guard<std::mutex> lock(lanes_m_);
    std::unique_ptr<Lane>& lane = lanes_[device];
    if (lane == nullptr) {
      lane = std::make_unique<Lane>();
      KOLO_TRY(dev.stream_create(&lane->in));
      KOLO_TRY(dev.stream_create(&lane->out));
      for (Slot& slot : lane->slots) {
        KOLO_TRY(dev.event_create(&slot.in_done));
        KOLO_TRY(dev.event_create(&slot.out_done));
      }
    }
    if (lane->ring == nullptr) {
      Result<void*> ring = StagedProcess::get().try_pinned(kStagedSlots * slot_bytes_);
      if (!ring.ok()) return ring.status();
      if (ring.value() != nullptr) {
        lane->ring = ring.value();
        for (int s = 0; s < kStagedSlots; ++s) lane->slots[s].pinned = static_cast<char*>(lane->ring) + s * slot_bytes_;
      }
    }
    if (!lane->free_events.empty()) {
      *ready = lane->free_events.back();
      lane->free_events.pop_back();
      return Status();
    }
    return dev.event_create(ready);
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
        if (--pending_ == 0) busy_.store(false, std::memory_order_release);
      }
      cv_.notify_all();
    }
  }

  Lane& lane_of(int device) {
    std::lock_guard<std::mutex> lock(lanes_m_);
    return *lanes_[device];
  }

  // One call: its steps through the ring, then the caller's stream released by its seq.
  void process(Operation& op) {
    const device::DeviceOps& dev = device::runtime();
    device::ScopedDevice on_device(op.device);
    Lane& lane = lane_of(op.device);
    Status s = broken_;
    if (s.ok()) s = on_device.status();
    if (s.ok()) s = dev.stream_wait_event(lane.in, op.ready);
    std::vector<Slot*> slot_of(op.steps.size(), nullptr);
    size_t staged = 0;  // steps whose copies in are enqueued
    for (size_t i = 0; s.ok() && i < op.steps.size(); ++i) {
      // Up to kStagedSlots steps ahead: step j reuses the slot step j - kStagedSlots left.
      while (s.ok() && staged < op.steps.size() && staged < i + kStagedSlots) {
        slot_of[staged] = &lane.slots[next_slot_++ % kStagedSlots];
        s = stage_in(dev, lane, op, op.steps[staged], *slot_of[staged]);
        ++staged;
      }
      if (s.ok()) {
        s = dev.event_synchronize(slot_of[i]->in_done, Deadline(env_timeout_seconds()));
        if (!s.ok()) s = error(s.code(), "rank ", env_.rank, ": device inputs of a call never arrived: ", s.message());
      }
      if (s.ok()) s = run_host(op.steps[i], *slot_of[i]);
      if (s.ok()) s = stage_out(dev, lane, op.steps[i], *slot_of[i]);
    }
    return_event(lane, op.ready);
    if (!s.ok() && broken_.ok()) {
      broken_ = s;
      env_.fail(s);  // the peers' calls end with an error through the links
    }
    // Behind every copy out of this call (and of the earlier ones): release its stream.
    Status released = dev.write_value(lane.out, word_, op.seq);
    if (!released.ok()) {
      log_warn(Subsys::kExec, "rank ", env_.rank, ": releasing a device stream on the device failed (",
               released.message(), "); released from the host");
      __atomic_store_n(word_, op.seq, __ATOMIC_RELEASE);
    }
  }

  // The step's staging: its slot when it fits, else pageable memory the slot keeps.
  Status staging_of(const device::DeviceOps& dev, const Operation& op, const Step& step, Slot& slot, char** base) {
    if (slot.pageable != nullptr) {
      // The last copy out of it must be done before it goes (it is from pageable memory).
      KOLO_TRY(dev.event_synchronize(slot.out_done, Deadline(env_timeout_seconds())));
      slot.pageable.reset();
    }
    if (slot.pinned != nullptr && step.bytes <= slot_bytes_) {
      *base = slot.pinned;
      return Status();
    }
    // A copy from the device into pageable memory returns once done: the inputs must be
    // there first, or this thread would wait without a deadline.
    KOLO_TRY(dev.event_synchronize(op.ready, Deadline(env_timeout_seconds())));
    slot.pageable.reset(new (std::nothrow) char[std::max<size_t>(step.bytes, 1)]);
    if (slot.pageable == nullptr) {
      return error(Code::kSystem, "rank ", env_.rank, ": out of host memory staging ", step.bytes, " bytes of a device call");
    }
    *base = slot.pageable.get();
    return Status();
  }

  static char* base_of(const Slot& slot) { return slot.pageable != nullptr ? slot.pageable.get() : slot.pinned; }

  // On `in`: after the slot's last copy out, the step's copies into it; in_done.
  Status stage_in(const device::DeviceOps& dev, Lane& lane, const Operation& op, const Step& step, Slot& slot) {
    if (slot.used) KOLO_TRY(dev.stream_wait_event(lane.in, slot.out_done));
    char* base = nullptr;
    KOLO_TRY(staging_of(dev, op, step, slot, &base));
    for (const Copy& c : step.ins) KOLO_TRY(dev.memcpy_async(base + c.offset, c.device, c.bytes, lane.in));
    return dev.event_record(slot.in_done, lane.in);
  }

  // The host plan of the step, on its staging, through the communicator (in call order).
  Status run_host(Step& step, const Slot& slot) {
    char* base = base_of(slot);
    for (size_t k = 0; k < step.host_calls.size(); ++k) {
      step.host_calls[k].send = step.send_at[k] == kNowhere ? nullptr : base + step.send_at[k];
      step.host_calls[k].recv = step.recv_at[k] == kNowhere ? nullptr : base + step.recv_at[k];
    }
    return env_.run_host(step.host_calls.data(), step.host_calls.size());
  }

  // On `out`: the step's results back to the device; out_done.
  Status stage_out(const device::DeviceOps& dev, Lane& lane, const Step& step, Slot& slot) {
    char* base = base_of(slot);
    for (const Copy& c : step.outs) KOLO_TRY(dev.memcpy_async(c.device, base + c.offset, c.bytes, lane.out));
    KOLO_TRY(dev.event_record(slot.out_done, lane.out));
    slot.used = true;
    return Status();
  }

  void return_event(Lane& lane, void* event) {
    std::lock_guard<std::mutex> lock(lanes_m_);
    lane.free_events.push_back(event);
  }

  ExecutorEnv env_;
  const size_t slot_bytes_;
  // Under the call lock (run) and, once a call is queued, read by the progress thread.
  uint32_t* word_ = nullptr;
  uint32_t next_seq_ = 0;  // the last seq given out
  std::mutex lanes_m_;
  std::map<int, std::unique_ptr<Lane>> lanes_;  // by device
  // The progress thread's own.
  uint64_t next_slot_ = 0;
  Status broken_;  // the first failure: later calls only release their streams
  // Under m_.
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Operation>> queue_;
  size_t pending_ = 0;  // queued or being processed
  std::atomic<bool> busy_{false};  // pending_ > 0, readable without the lock
  bool stop_ = false;
  bool aborted_ = false;  // kolo_comm_abort: make_room waits no more
  std::thread thread_;  // started by the first device call
};

}  // namespace

MadeExecutor create_staged_device_executor(const ExecutorEnv& env) {
  return MadeExecutor(std::make_unique<StagedDeviceExecutor>(env));
}

}  // namespace kolo
