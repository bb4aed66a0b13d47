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
// collective). Large single allreduce, reduce, broadcast, allgather, reduce_scatter and
// alltoall calls go in chunks, every chunk its own host collective (chunk_elems says when
// and how large): the input copies of the chunks are enqueued ahead of the holds, so the
// stream copies chunk i+1 in (and chunk i-1 out) while the progress thread runs the
// collective on chunk i. A chunk of a rank-major call (allgather's recv, reduce_scatter's
// send, alltoall's both: `ranks` blocks of `count`) is `ranks` strided pieces on the
// device, staged end to end as `ranks` blocks of the chunk's count: several copies per
// chunk, one host collective with the chunk's count. The chunk size depends only on
// constants, the call's count and dtype and the communicator size, so that every rank
// cuts alike. Allgatherv runs whole: its blocks have a count per rank and displacements
// of the caller's choosing, so a chunk would be an uneven host allgatherv of clipped
// counts, and its recv may have gaps that staging must carry through unchanged.
//
// The pinned staging in flight is bounded (kStagedInFlightBytes): past it, a chunk takes
// the buffers of the oldest queued operation, and its copies in wait on the device for
// that operation's copies out. The wait is on the stream, never in run(): run() is called
// with the communicator's call lock held, which the progress thread needs to run any host
// collective, so nothing queued could finish while run() waited on the host. For the same
// reason run() must never meet a full stream (CUDA would block the enqueue): make_room,
// before the lock, bounds what the queued calls hold on the streams.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
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


struct Buffer {
  void* p;
  size_t bytes;  // capacity
};

struct Operation {
  struct Copy {
    char* device;
    char* host;
    size_t bytes;
  };
  ~Operation() {
    if (!own_events) return;
    if (ready != nullptr) (void)device::runtime().event_destroy(ready);
    if (finished != nullptr) (void)device::runtime().event_destroy(finished);
  }
  void* stream = nullptr;
  std::vector<CollCall> host_calls;  // the calls on the staging buffers
  std::vector<Copy> ins;             // inputs to copy from the device
  std::vector<Copy> outs;            // results to copy back to the device
  // Under the executor's m_: pinned buffers held (from the pool, or taken from an earlier
  // operation), returned to the pool once `finished` has passed.
  std::vector<Buffer> staging;
  // Operations whose buffers this one took on another stream: kept (their `finished`
  // event with them) until this one's stream is past its wait for them.
  std::vector<std::shared_ptr<Operation>> waits_on;
  void* ready = nullptr;
  void* finished = nullptr;
  bool own_events = true;  // false: a stream may still refer to them (never destroyed)
  size_t items = 0;        // what it put on the stream (copies, events, the hold)
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  bool gave_up = false;  // the hold timed out: the stream went on before the host plan ran
};

// The stream's hold (step 2): runs on the device runtime's host-function thread, which
// may not call the device runtime. Past the deadline the stream goes on, copying out
// staging the host plan has not written; the progress thread then fails the communicator.
void hold_stream(void* arg) {
  Operation* op = static_cast<Operation*>(arg);
  std::unique_lock<std::mutex> lock(op->m);
  op->gave_up = !op->cv.wait_for(lock, std::chrono::duration<double>(env_timeout_seconds()), [&] { return op->done; });
}

// An operation being staged: its parts, where they go, and the buffer of each region.
struct Staging {
  std::shared_ptr<Operation> op;
  std::vector<Part> parts;
  std::vector<Layout> layouts;
  std::vector<size_t> sizes;  // every region of every part, in order
  std::vector<int> buffer;    // per region: its index in op->staging; -1 until taken
};

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
    KOLO_TRY(check_device_group(calls, n, env_.rank));
    // The copies and events go to the device of the buffers and the stream.
    device::ScopedDevice on_device(calls[0].call.device);
    KOLO_TRY(on_device.status());
    KOLO_TRY(refuse_graph_capture(calls[0].call, env_.rank, "device_staged"));
    // One operation per chunk of a large single call, else one for all the calls.
    std::vector<std::vector<Part>> plan = parts_of(calls, n);
    // Stages operations while their staging fits (or can be taken from queued operations);
    // when neither, enqueues the hold and copies out of the oldest staged one, which makes
    // its buffers available to the next. Past the cap the stream gets in_0 .. in_w,
    // hold_0, out_0, in_w+1 (into chunk 0's buffers), hold_1, out_1, in_w+2, ... Nothing
    // here waits: the caller holds the communicator's call lock, which the progress thread
    // needs for every host collective.
    std::deque<std::shared_ptr<Operation>> staged;  // inputs enqueued, hold not yet
    Staging next;
    size_t k = 0;
    Status s;
    while (s.ok() && (k < plan.size() || !staged.empty())) {
      if (k < plan.size()) {
        if (next.op == nullptr) s = begin(dev, std::move(plan[k]), stream, &next);
        bool got = false;
        if (s.ok()) s = acquire(dev, &next, staged.empty(), &got);
        if (s.ok() && got) {
          s = stage_inputs(dev, &next);
          if (s.ok()) {
            staged.push_back(std::move(next.op));
            next = Staging();
            ++k;
          }
          continue;
        }
        if (!s.ok()) break;
      }
      s = finish(dev, staged.front());
      if (s.ok()) staged.pop_front();
    }
    if (!s.ok()) {
      // What is on the stream may still touch these: they are kept, never reused.
      if (next.op != nullptr) staged.push_back(next.op);
      std::lock_guard<std::mutex> lock(m_);
      for (auto& op : staged) abandon_locked(op);
      return s;
    }
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

  // Holds release only as the progress thread runs host plans, which need the call lock;
  // run() holds that lock, so it must never meet a full stream (CUDA would block it there
  // until the holds' deadline). A call waits here, before the lock, until what it would
  // enqueue if staged and what the operations whose host plans have not run hold fit in
  // kStagedStreamItems, or nothing is queued. (A single call adds at most about
  // kStagedCallItems: chunk_elems; a group of calls is one operation of its own size.)
  Status make_room(const CollCall* calls, size_t n, const Deadline& deadline) override {
    const size_t items = stream_items(calls, n, env_.size, env_.rank);
    std::unique_lock<std::mutex> lock(m_);
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
  // A single large call as chunks (chunk_elems), else one operation for all the calls.
  std::vector<std::vector<Part>> parts_of(const PlannedCall* calls, size_t n) const {
    std::vector<std::vector<Part>> ops;
    const size_t per = n == 1 ? chunk_elems(calls[0].call, env_.size, env_.rank) : 0;
    if (per == 0) {
      ops.emplace_back();
      for (size_t i = 0; i < n; ++i) {
        ops.back().push_back(part_of(calls[i].call, 0, calls[i].call.spec.count, env_.size, env_.rank));
      }
      return ops;
    }
    const size_t count = calls[0].call.spec.count;
    for (size_t first = 0; first < count; first += per) {
      ops.push_back({part_of(calls[0].call, first, std::min(per, count - first), env_.size, env_.rank)});
    }
    return ops;
  }

  // A new operation for `parts`: its events and the regions its staging must hold.
  Status begin(const device::DeviceOps& dev, std::vector<Part> parts, void* stream, Staging* st) {
    st->op = std::make_shared<Operation>();
    st->op->stream = stream;
    st->parts = std::move(parts);
    KOLO_TRY(dev.event_create(&st->op->ready));
    KOLO_TRY(dev.event_create(&st->op->finished));
    for (const Part& p : st->parts) {
      st->layouts.emplace_back();
      KOLO_TRY(layout_of(p, env_.rank, &st->layouts.back()));
      for (int r = 0; r < st->layouts.back().regions; ++r) st->sizes.push_back(st->layouts.back().region[r].total());
    }
    st->buffer.assign(st->sizes.size(), -1);
    return Status();
  }

  // Takes a buffer for every region of st: one the operation holds already and does not
  // use, else a new one from the pool while the staging in flight stays within the cap,
  // else the buffers of the oldest queued operation (the stream waits for its copies out).
  // *got = false when none of these can be had and `alone` is false (this call has staged
  // operations whose holds are not enqueued: enqueuing one makes its buffers available).
  // When `alone` and no queued operation holds staging, a region the cap has no room for
  // is taken from the pool all the same: the cap bounds reuse, it refuses nothing.
  Status acquire(const device::DeviceOps& dev, Staging* st, bool alone, bool* got) {
    Operation* op = st->op.get();
    std::unique_lock<std::mutex> lock(m_);
    for (size_t r = 0; r < st->sizes.size(); ++r) {
      const size_t need = st->sizes[r];
      while (st->buffer[r] < 0) {
        int best = -1;
        for (size_t b = 0; b < op->staging.size(); ++b) {
          if (op->staging[b].bytes < need) continue;
          if (std::find(st->buffer.begin(), st->buffer.end(), static_cast<int>(b)) != st->buffer.end()) continue;
          if (best < 0 || op->staging[b].bytes < op->staging[best].bytes) best = static_cast<int>(b);
        }
        if (best >= 0) {
          st->buffer[r] = best;
          break;
        }
        if (in_flight_ + need <= kStagedInFlightBytes || (held_.empty() && alone)) {
          in_flight_ += need;  // reserved while the pool pins it
          lock.unlock();
          Buffer b{nullptr, 0};
          Status taken = pool_.take(need, &b.p, &b.bytes);
          lock.lock();
          if (!taken.ok()) {
            in_flight_ -= need;
            return taken;
          }
          in_flight_ += b.bytes - need;
          op->staging.push_back(b);
          continue;
        }
        if (held_.empty()) {
          *got = false;
          return Status();
        }
        std::shared_ptr<Operation> old = std::move(held_.front());
        held_.pop_front();
        if (old->stream != op->stream) {
          // On the same stream, its order puts our copies in after old's copies out.
          KOLO_TRY(dev.stream_wait_event(op->stream, old->finished));
          op->waits_on.push_back(old);
        }
        for (const Buffer& b : old->staging) op->staging.push_back(b);
        old->staging.clear();
      }
    }
    *got = true;
    return Status();
  }

  // Step 1 on the stream: the copies in, `ready`. The host calls point into the staging.
  Status stage_inputs(const device::DeviceOps& dev, Staging* st) {
    Operation* op = st->op.get();
    size_t next_region = 0;
    for (size_t i = 0; i < st->parts.size(); ++i) {
      const Part& p = st->parts[i];
      const Layout& l = st->layouts[i];
      char* base[2] = {nullptr, nullptr};
      for (int r = 0; r < l.regions; ++r) base[r] = static_cast<char*>(op->staging[st->buffer[next_region++]].p);
      CollCall host = p.call;
      host.spec.device = false;
      host.stream = nullptr;
      host.send = l.send_in < 0 ? nullptr : base[l.send_in] + l.region[l.send_in].locate(p.send.device, p.send.bytes);
      host.recv = l.recv_in < 0 ? nullptr : base[l.recv_in] + l.region[l.recv_in].locate(p.recv.device, p.recv.bytes);
      if (l.whole_in) {
        add_copies(l.region[0], l.region[0], base[0], &op->ins);
      } else if (l.send_in >= 0) {
        add_copies(p.send, l.region[l.send_in], base[l.send_in], &op->ins);
      }
      if (l.recv_in >= 0) add_copies(p.recv, l.region[l.recv_in], base[l.recv_in], &op->outs);
      op->host_calls.push_back(host);
    }
    for (const Operation::Copy& c : op->ins) KOLO_TRY(dev.memcpy_async(c.host, c.device, c.bytes, op->stream));
    return dev.event_record(op->ready, op->stream);
  }

  // The pieces of `view`, each to where it lies in the staging of `region` (at `base`).
  static void add_copies(const View& view, const View& region, char* base, std::vector<Operation::Copy>* copies) {
    for (size_t q = 0; q < view.blocks; ++q) {
      const char* d = view.device + q * view.stride;
      copies->push_back({const_cast<char*>(d), base + region.locate(d, view.bytes), view.bytes});
    }
  }

  // Steps 2-3: hold the stream until the host plan has run, copy the results out,
  // `finished`; then the operation goes to the progress thread.
  Status finish(const device::DeviceOps& dev, const std::shared_ptr<Operation>& op) {
    KOLO_TRY(dev.launch_host_func(op->stream, hold_stream, op.get()));
    for (const Operation::Copy& c : op->outs) KOLO_TRY(dev.memcpy_async(c.device, c.host, c.bytes, op->stream));
    KOLO_TRY(dev.event_record(op->finished, op->stream));
    {
      std::lock_guard<std::mutex> lock(m_);
      op->items = op->ins.size() + op->outs.size() + 3;
      queued_items_ += op->items;
      queue_.push_back(op);
      if (!op->staging.empty()) held_.push_back(op);
      ++pending_;
      busy_.store(true, std::memory_order_release);
      if (!thread_.joinable()) thread_ = std::thread([this] { progress(); });
    }
    cv_.notify_all();
    return Status();
  }

  // An operation a stream may still refer to, but that will not run: kept as it is.
  void abandon_locked(const std::shared_ptr<Operation>& op) {
    for (const Buffer& b : op->staging) in_flight_ -= b.bytes;
    op->own_events = false;
    kept_.push_back(op);
  }

  // Returns the staging of an operation whose `finished` has passed to the pool.
  void release(Operation* op) {
    std::vector<Buffer> staging;
    std::vector<std::shared_ptr<Operation>> waited;  // dropped after the lock
    {
      std::lock_guard<std::mutex> lock(m_);
      staging.swap(op->staging);
      waited.swap(op->waits_on);
      for (const Buffer& b : staging) in_flight_ -= b.bytes;
      auto it = std::find_if(held_.begin(), held_.end(), [&](const auto& h) { return h.get() == op; });
      if (it != held_.end()) held_.erase(it);
    }
    for (const Buffer& b : staging) pool_.give(b.p);
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
      // Inputs that never arrived (a broken or stuck stream) must not reach the peers as
      // data: the communicator fails instead, which ends the peers' calls with an error.
      Status ready = dev.event_synchronize(op->ready, Deadline(timeout));
      bool late;  // the hold gave up already: the stream has gone on, the staging with it
      {
        std::lock_guard<std::mutex> lock(op->m);
        late = op->gave_up;
      }
      if (late) {
        // Not run: its staging may be another call's by now. Failed below.
      } else if (!ready.ok()) {
        env_.fail(error(ready.code(), "rank ", env_.rank, ": device inputs of a call never arrived: ", ready.message()));
      } else {
        (void)env_.run_host(op->host_calls.data(), op->host_calls.size());  // a failure fails the communicator
      }
      bool gave_up;
      {
        std::lock_guard<std::mutex> lock(op->m);
        op->done = true;
        gave_up = op->gave_up;
      }
      op->cv.notify_all();
      if (gave_up) {
        env_.fail(error(Code::kTimeout, "rank ", env_.rank, ": a device call's stream waited KOLO_TIMEOUT (", timeout,
                        " s) for its host collective and went on without it; its results are wrong"));
      }
      retiring_.push_back(op);
      retire(dev, false);  // what the stream has finished with; the rest later
      {
        std::lock_guard<std::mutex> lock(m_);
        queued_items_ -= op->items;
        if (--pending_ == 0) busy_.store(false, std::memory_order_release);
      }
      cv_.notify_all();
    }
  }

  // Frees the staging of operations whose results the stream has copied out, oldest first
  // (without blocking, or waiting for each). An operation whose stream never gets there is
  // kept, out of the staging in flight: its host function still refers to it.
  void retire(const device::DeviceOps& dev, bool block) {
    while (!retiring_.empty()) {
      const std::shared_ptr<Operation>& op = retiring_.front();
      bool finished;
      if (block) {
        finished = dev.event_synchronize(op->finished, Deadline(env_timeout_seconds())).ok();
      } else {
        Result<bool> query = dev.event_query(op->finished);
        if (!query.ok() || !query.value()) return;
        finished = true;
      }
      if (finished) {
        release(op.get());
      } else {
        std::lock_guard<std::mutex> lock(m_);
        auto it = std::find(held_.begin(), held_.end(), op);
        if (it != held_.end()) held_.erase(it);
        abandon_locked(op);
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
  size_t queued_items_ = 0;  // stream items of the queued operations (make_room)
  std::atomic<bool> busy_{false};  // pending_ > 0, readable without the lock
  bool stop_ = false;
  bool aborted_ = false;  // kolo_comm_abort: make_room waits no more
  // Under m_: queued operations that hold staging, oldest first (a new operation past the
  // cap takes theirs), and the bytes of staging that operations hold.
  std::deque<std::shared_ptr<Operation>> held_;
  size_t in_flight_ = 0;
  std::deque<std::shared_ptr<Operation>> retiring_;  // collective done, copies out pending
  std::vector<std::shared_ptr<Operation>> kept_;  // streams that never finished, or failed enqueues
  std::thread thread_;  // started by the first device call
};

}  // namespace

MadeExecutor create_staged_device_executor(const ExecutorEnv& env) {
  return MadeExecutor(std::make_unique<StagedDeviceExecutor>(env));
}

}  // namespace kolo
