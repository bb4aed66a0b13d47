// The device_ipc executor: one-host device collectives as kernels over the peers' memory,
// no host in between. Every rank maps every peer's IPC region (transport/ipc/ipc_regions.h;
// its layout and programs: ipc_programs.h). Here: admission (everything that may refuse a
// call, before anything is enqueued), the set-up at the first call (regions, control
// words, the facts the planner decides the barrier kind from), the order of calls across
// streams (an event), the barriers, and the watcher that fails the communicator.
// The Plan's protocol picks the program (ipc_programs.h: the slot programs, compressed
// slots, one kernel, registered buffers read in place, a rank alone), each written once
// over an ops policy and proved by the verifier for 1-5 ranks (device_program_record.h,
// engine/local/local_program.h).
// Every barrier carries the call's digest (ipc_call_tag); ranks that are not making the
// same call, or not with the same registered buffers, fail on every rank instead of reading
// each other's memory wrongly.
// The Plan's barrier kind: a kernel that polls the peers' words, or (ranks in different
// processes that time-slice one GPU, or KOLO_DEVICE_BARRIER=host) a word the stream waits
// for, written by a thread of the executor once the peers have arrived (ipc_host_barrier.h).
// A barrier that gives up (KOLO_TIMEOUT: a dead peer; or kolo_comm_abort) leaves a reason
// in a host-mapped status word and returns, releasing the stream; later barriers return at
// once; a watcher thread fails the communicator with the reason.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "engine/executors/executor.h"
#include "engine/executors/device_ipc/ipc_host_barrier.h"
#include "engine/executors/device_ipc/ipc_programs.h"
#include "kernels/device_kernels.h"
#include "support/device/device.h"
#include "support/log.h"
#include "transport/ipc/ipc_peer_buffers.h"
#include "transport/ipc/ipc_regions.h"

namespace kolo {
namespace {

constexpr uint64_t kDestroyTag = 0x646e652d6f6c6f6bull;  // "kolo-end": the last barrier
constexpr uint64_t kFenceTag = 0x65636e65662d6b6cull;    // xored into a captured call's fences

// The host-mapped words the barrier kernels read and write.
struct Control {
  uint32_t abort;
  uint32_t status;
  uint32_t released;  // the host barriers' release word (ipc_host_barrier.h)
};

class IpcDeviceExecutor final : public Executor {
 public:
  explicit IpcDeviceExecutor(const ExecutorEnv& env) : env_(env) {}

  ~IpcDeviceExecutor() override {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    if (watcher_.joinable()) watcher_.join();
    device::ScopedDevice on_device(device_);
    const device::DeviceOps& dev = device::runtime();
    if (regions_ != nullptr && !release_together()) {
      log_warn(Subsys::kExec, "rank ", env_.rank, ": device IPC memory kept at destroy: a peer may still use it");
      (void)regions_.release();  // and control_: a kernel may still read it
      (void)peer_buffers_.release();  // the peers' buffers likewise stay mapped
      return;
    }
    peer_buffers_.reset();  // every call that read through its mappings is done
    host_barriers_.reset();  // its thread is done with the words
    regions_.reset();
    if (order_ != nullptr) (void)dev.event_destroy(order_);
    if (control_ != nullptr) (void)dev.host_free(control_);
  }

  // A last barrier after every call this rank made, so that no rank frees its region
  // while a peer still reads it; false when that cannot be known (then nothing is freed).
  bool release_together() {
    const device::DeviceOps& dev = device::runtime();
    // After a failure a peer may still be reading (or be dead), and after a call that
    // failed halfway this rank's barrier numbers may trail its peers' (its last barrier
    // would pass on their earlier posts): keep the memory.
    if (diverged_ || __atomic_load_n(&control_->status, __ATOMIC_ACQUIRE) != 0 ||
        __atomic_load_n(&control_->abort, __ATOMIC_ACQUIRE) != 0 || !peers_alive().ok()) {
      return false;
    }
    void* stream = nullptr;
    if (!dev.stream_create(&stream).ok()) return false;
    tag_ = kDestroyTag;
    // Outside any Plan: the kind the set-up's facts give, the same on every rank.
    const bool host = device_barrier_kind(barrier_facts_.agreed, barrier_facts_.processes_time_slice, env_.size) ==
                      BarrierKind::kDeviceHost;
    bool ok = dev.stream_wait_event(stream, order_).ok() && barrier(stream, host).ok() &&
              dev.stream_synchronize(stream, Deadline(env_.timeout() + 5)).ok() &&
              __atomic_load_n(&control_->status, __ATOMIC_ACQUIRE) == 0;
    (void)dev.stream_destroy(stream);
    return ok;
  }

  bool queues_device_work() const override { return true; }
  bool compresses(const CollSpec& spec) const override { return spec.kind == CollKind::kAllreduce; }

  // The regions, barriers and watcher, at the first device call that could run here; the
  // planner then knows whether the peers map (else it stages every device call) and how
  // the barriers wait.
  Result<bool> set_up(const CollCall& call, const Deadline& deadline, PlanContext& ctx) override {
    if (!plan_runs_on_device_ipc(call.spec, ctx, false)) return false;
    device::ScopedDevice on_device(call.device);
    KOLO_TRY(on_device.status());
    Result<bool> capturing = device::runtime().stream_capturing(call.stream);
    if (!capturing.ok()) return capturing.status();
    if (capturing.value()) {
      return error(Code::kUnsupported, "rank ", env_.rank, ": the first device call of a communicator sets up its "
                   "device memory, which cannot happen inside a CUDA graph capture: make one device call on it before "
                   "capturing");
    }
    KOLO_TRY(ensure(call.device, deadline));
    ctx.device_setup = unavailable_ ? DeviceSetup::kUnmappable : DeviceSetup::kMapped;
    ctx.device_barrier = barrier_facts_.agreed;
    ctx.device_processes_time_slice = barrier_facts_.processes_time_slice;
    return true;
  }

  // A group (group_runs_on_device_ipc) is its calls in order. Every call is admitted
  // before any is enqueued, so that a refusal leaves nothing enqueued and the
  // communicator usable (executor.h); a failure while enqueuing fails it.
  Status run(const PlannedCall* calls, size_t n, const Deadline& deadline) override {
    std::vector<Admitted> admitted(n);
    for (size_t i = 0; i < n; ++i) KOLO_TRY(admit(calls[i], deadline, &admitted[i]));
    // Kernels queued behind a barrier that gives up must not read the peers' buffers.
    ScopedKernelGuard guard(failed_word());
    for (size_t i = 0; i < n; ++i) {
      Status s = enqueue_call(calls[i], admitted[i]);
      if (!s.ok()) {
        diverged_ = true;
        if (s.code() == Code::kUnsupported) s = error(Code::kSystem, s.message());
        return s;
      }
    }
    return Status();
  }

  // What admission found out about a call, for its enqueue.
  struct Admitted {
    bool graph = false;  // the stream is being captured into a CUDA graph
    InPlaceBuffers at;   // Protocol::kZeroCopy: where every rank's buffers are
    RegisteredBuffers windows;  // and the windows that hold them (none: shared by share_buffers)
  };

  // Everything that may refuse a call, before anything is enqueued: the device, the set-up
  // (made at the first call), capture, compression where peers cannot map, registration.
  Status admit(const PlannedCall& pc, const Deadline& deadline, Admitted* a) {
    const CollCall& call = pc.call;
    device::ScopedDevice on_device(call.device);
    KOLO_TRY(on_device.status());
    Result<bool> capturing = device::runtime().stream_capturing(call.stream);
    if (!capturing.ok()) return capturing.status();
    a->graph = capturing.value();
    if (regions_ == nullptr) {  // set_up ran (Communicator::set_up_device) and found no mapping
      return error(Code::kInternal, "rank ", env_.rank, ": a device call was planned on device_ipc, which is not set "
                   "up here");
    }
    KOLO_TRY(ensure(call.device, deadline));  // the device it was set up on
    if (control_->status != 0) return failure();
    if (pc.plan->barrier == BarrierKind::kDeviceHost && host_barriers_ == nullptr) {
      return error(Code::kInternal, "rank ", env_.rank, ": the Plan asks device_ipc for barriers on the host, which "
                   "this rank has no shared-memory domain for");
    }
    if (a->graph && pc.plan->barrier == BarrierKind::kDeviceHost) {
      return error(Code::kUnsupported, "rank ", env_.rank, ": the device collectives of this communicator wait for "
                   "each other on the host (ranks in different processes share a GPU, or KOLO_DEVICE_BARRIER=host), "
                   "which a CUDA graph cannot replay (run one process per GPU, or the ranks as threads of one "
                   "process, to capture)");
    }
    if (pc.plan->zero_copy()) KOLO_TRY(locate(call, a));
    return Status();
  }

  // Captured into a CUDA graph (replayed later, any number of times, between other
  // calls): the barrier numbers come from the device counter, so nothing else is fixed
  // but the slots. A barrier before and after (tagged as fences, and the call's digest
  // marks it captured) keeps a replay's slots apart from the calls around it: no peer
  // still reads a slot it writes, none reads its slots after. The slot counter is not
  // advanced by a capture (nothing ran). The order event is left alone: the graph's
  // launches are ordered by their stream.
  Status enqueue_call(const PlannedCall& pc, const Admitted& a) {
    const CollCall& call = pc.call;
    device::ScopedDevice on_device(call.device);
    KOLO_TRY(on_device.status());
    const device::DeviceOps& dev = device::runtime();
    const uint64_t call_tag_value = ipc_call_tag(call, *pc.plan, a.windows, a.graph);
    // The Plan's barrier kind (a call without barriers has no fences either: flagged, alone).
    const bool host = pc.plan->barrier == BarrierKind::kDeviceHost;
    // Zero-copy writes no slot; the flagged protocol has boxes of its own, and its flags
    // number the calls from device memory, captured or not.
    const bool fence = a.graph && !pc.plan->zero_copy() && pc.plan->protocol != Protocol::kFlagged;
    const uint64_t chunks_before = chunks_;
    Status s;
    // After the previous call: its stream orders it already where it is the same (one
    // runtime call less per call: thread-ranks of one process queue theirs one at a time).
    // A stream destroyed with work queued keeps its resources until that work is done, so
    // a new stream cannot take its handle while the previous call may still run.
    if (!a.graph && call.stream != last_stream_) s = dev.stream_wait_event(call.stream, order_);
    tag_ = call_tag_value ^ kFenceTag;
    if (s.ok() && fence) s = barrier(call.stream, host);
    tag_ = call_tag_value;
    if (s.ok()) {
      switch (pc.plan->protocol) {  // the planner's choice (plan.cc)
        case Protocol::kZeroCopy: s = enqueue_zero_copy(ipc_run(host), call, a.at); break;
        case Protocol::kFlagged: s = enqueue_flagged(ipc_run(host), call); break;
        case Protocol::kCompressedSlots: s = enqueue_compressed(ipc_run(host), call, pc.plan->algorithm, chunks_); break;
        case Protocol::kAlone: s = enqueue_alone(call); break;
        case Protocol::kSlots: s = enqueue_slots(ipc_run(host), call, pc.plan->algorithm, chunks_); break;
        default:
          s = error(Code::kInternal, "rank ", env_.rank, ": device_ipc has no protocol ",
                    protocol_name(pc.plan->protocol));
      }
    }
    tag_ = call_tag_value ^ kFenceTag;
    if (s.ok() && fence) s = barrier(call.stream, host);
    if (s.ok() && !a.graph) s = dev.event_record(order_, call.stream);
    if (s.ok() && !a.graph) last_stream_ = call.stream;
    if (a.graph) chunks_ = chunks_before;
    if (!s.ok()) {
      diverged_ = true;
      // Part of the call may be enqueued: not a refusal (executor.h), the communicator fails.
      if (s.code() == Code::kUnsupported) s = error(Code::kSystem, s.message());
    }
    return s;
  }

  // Everything enqueued so far is done (before registered buffers are unmapped).
  Status drain(const Deadline& deadline) override {
    if (order_ == nullptr || regions_ == nullptr) return Status();
    device::ScopedDevice on_device(device_);
    return device::runtime().event_synchronize(order_, deadline);
  }

  void abort() override {
    Control* control = control_ready_.load(std::memory_order_acquire);
    if (control != nullptr) __atomic_store_n(&control->abort, 1u, __ATOMIC_RELEASE);
  }

 private:
  // The regions, control words, order event and watcher, made at the first call (every
  // rank makes the same first device_ipc call), on the device of its buffers.
  Status ensure(int device, const Deadline& deadline) {
    if (diverged_) return error(Code::kAborted, "rank ", env_.rank, ": the device_ipc path failed earlier");
    if (regions_ != nullptr || unavailable_) {
      if (device == device_) return Status();
      return error(Code::kInvalidArgument, "rank ", env_.rank, ": the device_ipc path of a communicator runs on one "
                   "device; it was set up on device ", device_, " and this call's buffers are on device ", device);
    }
    const device::DeviceOps& dev = device::runtime();
    KOLO_TRY(device_preload_kernels(dev));
    void* control = nullptr;
    KOLO_TRY(dev.host_alloc(&control, sizeof(Control)));
    control_ = static_cast<Control*>(control);
    std::memset(control_, 0, sizeof(Control));
    KOLO_TRY(dev.event_create(&order_));
    diverged_ = true;  // until the setup has succeeded: it is not tried twice
    IpcSite site{env_.store, str_cat(env_.store_prefix, "/device_ipc"), env_.shared ? env_.shared->index() : 0,
                 env_.shared ? env_.shared->size() : 1, [this] { return peers_alive(); }};
    // What the planner decides the barrier kind from (device_ipc_barrier); none for a site of one.
    Result<DeviceBarrierFacts> facts = device_barrier_facts(site, device, *env_.settings, deadline);
    if (!facts.ok()) return facts.status().with_context(str_cat("rank ", env_.rank, ": "));
    barrier_facts_ = facts.value();
    Result<std::unique_ptr<IpcRegions>> regions = IpcRegions::create(site, kIpcRegionBytes, deadline);
    if (!regions.ok()) {
      // A peer's memory cannot be mapped (no peer access between these GPUs): every rank
      // learns it in the same setup, and every rank stages from now on.
      const Code code = regions.status().code();
      if (code != Code::kUnsupported && code != Code::kMismatch) {
        return regions.status().with_context(str_cat("rank ", env_.rank, ": "));
      }
      log_warn(Subsys::kExec, "rank ", env_.rank, ": device collectives staged through host memory: ",
               regions.status().message());
      unavailable_ = true;
      diverged_ = false;
      device_ = device;
      return Status();
    }
    regions_ = regions.take();
    if (env_.shared != nullptr && env_.size > 1) peer_buffers_ = std::make_unique<PeerBuffers>(*env_.shared);
    // Either barrier kind can run, as each call's Plan says (a host barrier's thread starts
    // at its first use).
    if (env_.shared != nullptr) {
      host_barriers_ = std::make_unique<HostBarriers>(
          *env_.shared, HostBarrierWords{&control_->status, &control_->abort, failed_word(), &control_->released},
          env_.timeout_seconds);
    }
    device_ = device;
    control_ready_.store(control_, std::memory_order_release);
    diverged_ = false;
    watcher_ = std::thread([this] { watch(); });
    return Status();
  }

  // Where every rank's buffers of a zero-copy call are: in registered windows (the
  // communicator found them when it set spec.registered), else shared for this call by
  // share_buffers just before; a miss is a bug, refused before anything ran.
  Status locate(const CollCall& call, Admitted* a) {
    const int n = regions_->size();
    if (env_.windows != nullptr && find_registered(call, *env_.windows, regions_->index(), n, &a->windows)) {
      const IpcWindows& w = *env_.windows;
      for (int r = 0; r < n; ++r) {
        if (a->windows.send.window >= 0) a->at.send[r] = w.address(a->windows.send.window, r) + a->windows.send.offset;
        if (a->windows.recv.window >= 0) a->at.recv[r] = w.address(a->windows.recv.window, r) + a->windows.recv.offset;
      }
      return Status();
    }
    if (shared_.valid && shared_.send == call.send && shared_.recv == call.recv) {
      shared_.valid = false;  // one call's
      a->at = shared_.at;
      return Status();
    }
    return error(Code::kUnsupported, "rank ", env_.rank, ": a zero-copy ", coll_name(call.spec.kind),
                 " whose buffers are neither in a registered window nor shared");
  }

  Result<bool> share_buffers(const CollCall& call, const Deadline& deadline) override {
    shared_.valid = false;
    if (peer_buffers_ == nullptr) return false;
    const PeerReadBuffers b = peer_read_buffers(call, regions_->size());
    PeerBuffers::Buffer mine[PeerBuffers::kMaxBuffers];
    int n = 0, which[PeerBuffers::kMaxBuffers];  // which[i]: 0 the input, 1 the output
    for (int k = 0; k < 2; ++k) {
      if (b.ptr[k] == nullptr) continue;
      mine[n] = {b.ptr[k], b.bytes[k]};
      which[n++] = k;
    }
    std::vector<char*> at[PeerBuffers::kMaxBuffers];
    Result<bool> shared = peer_buffers_->exchange(mine, n, call.spec.registered, deadline, at);
    if (!shared.ok()) return shared.status().with_context(str_cat("rank ", env_.rank, ": "));
    if (!shared.value()) return false;
    shared_ = SharedCall{};
    for (int k = 0; k < n; ++k) {
      char** into = which[k] == 0 ? shared_.at.send : shared_.at.recv;
      std::copy(at[k].begin(), at[k].end(), into);
    }
    shared_.send = call.send;
    shared_.recv = call.recv;
    shared_.valid = true;
    return true;
  }

  // What the programs of ipc_programs.h need, for the call being enqueued.
  IpcRun ipc_run(bool host) {
    return IpcRun{*regions_, env_.rank, tag_, [this, host](void* stream) { return barrier(stream, host); },
                  &control_->abort, &control_->status, failed_word(), env_.timeout()};
  }

  // A step barrier of the kind the caller's Plan names (every rank's Plan is the same).
  Status barrier(void* stream, bool host) {
    // The planner's INFO log hears once which kind ran, so that a test of the Plan checks
    // the path taken, not only the Plan's label (tests/multiproc/expect_plan.sh).
    if (!ran_kind_[host]) {
      ran_kind_[host] = true;
      log_info(Subsys::kPlan, "ran: device_ipc barrier ", host ? "device_host" : "device_kernel", " (rank ",
               env_.rank, ")");
    }
    if (host) return host_barrier(stream);
    const int n = regions_->size(), me = regions_->index();
    BarrierArgs a;
    for (int p = 0; p < n; ++p) {
      a.post[p] = reinterpret_cast<BarrierWord*>(regions_->region(p) + me * kIpcWordStride);
      a.wait[p] = reinterpret_cast<const BarrierWord*>(regions_->region(me) + p * kIpcWordStride);
    }
    a.ranks = n;
    a.counter = reinterpret_cast<uint64_t*>(regions_->region(me) + kIpcCounterOffset);
    a.tag = tag_;
    a.timeout_ns = static_cast<uint64_t>(env_.timeout() * 1e9);
    a.abort = &control_->abort;
    a.status = &control_->status;
    a.failed = failed_word();
    return device_barrier(device::runtime(), a, stream);
  }

  // A barrier_body.h barrier waited for on the host (ipc_host_barrier.h).
  Status host_barrier(void* stream) { return host_barriers_->enqueue(++host_barrier_count_, tag_, stream); }

  uint32_t* failed_word() const { return reinterpret_cast<uint32_t*>(regions_->region(regions_->index()) + kIpcFailedOffset); }

  // Why the barriers gave up, as the communicator's error.
  Status failure() const {
    const uint32_t status = __atomic_load_n(&control_->status, __ATOMIC_ACQUIRE);
    if (status == kBarrierAborted) return error(Code::kAborted, "rank ", env_.rank, ": communicator was aborted");
    if (status >= kBarrierMismatch) {
      return error(Code::kMismatch, "rank ", env_.rank, ": device collective differs from rank ",
                   global_rank(static_cast<int>(status - kBarrierMismatch)),
                   "'s (another collective, count, type, op or root; or buffers registered with kolo_mem_register on "
                   "one rank and not the other, or at other offsets in their windows)");
    }
    const int local = static_cast<int>(status - kBarrierTimedOut);
    return error(Code::kTimeout, "rank ", env_.rank, ": device collective waited more than KOLO_TIMEOUT (",
                 env_.timeout(), " s) for rank ", global_rank(local),
                 " (dead, or not making the same calls)");
  }

  // The host's ranks (a communicator of one rank has no shared-memory domain).
  Status peers_alive() const { return env_.shared ? env_.shared->members_alive() : Status(); }
  int global_rank(int local) const { return env_.shared ? env_.shared->global_rank(local) : env_.rank; }

  // Fails the communicator once a barrier has given up (the status word: host memory, a
  // load), and ends the barriers early when a peer on this host died or failed (the
  // abort word), instead of letting them wait out KOLO_TIMEOUT.
  // A peer's failure is not reported at once: its own barrier may be about to say why
  // better (ranks making different calls fail one after another, and each one's barrier
  // sees the mismatch), so the barriers are released and their word taken if they give
  // one within a few polls; an abort they give is the peer's failure.
  void watch() {
    std::unique_lock<std::mutex> lock(m_);
    Status peer;   // a peer's failure, once seen
    int waited = 0;  // polls since
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(5));
      const uint32_t status = __atomic_load_n(&control_->status, __ATOMIC_ACQUIRE);
      Status why;
      if (status != 0) {
        why = status == kBarrierAborted && !peer.ok() ? peer : failure();
      } else if (!peer.ok()) {
        if (++waited >= 10) why = peer;  // no barrier running to say more
      } else {
        peer = peers_alive();
        if (!peer.ok()) __atomic_store_n(&control_->abort, 1u, __ATOMIC_RELEASE);  // release the streams
      }
      if (why.ok()) continue;
      lock.unlock();
      env_.fail(why.with_context(str_cat("rank ", env_.rank, ", device collective: ")));
      return;
    }
  }

  ExecutorEnv env_;
  std::unique_ptr<IpcRegions> regions_;
  Control* control_ = nullptr;  // pinned host memory, mapped for the kernels
  std::atomic<Control*> control_ready_{nullptr};  // control_ once set up, for abort()
  bool diverged_ = false;  // a call failed halfway: barrier numbers may differ from peers'
  bool unavailable_ = false;  // the regions could not be mapped on some rank: calls are staged
  void* order_ = nullptr;       // recorded after each call: the next one waits for it
  void* last_stream_ = nullptr;  // the stream of the last call outside a capture
  int device_ = -1;
  uint64_t chunks_ = 0;    // chunks enqueued so far: slot = chunk % 2
  uint64_t tag_ = 0;       // the digest of the call being enqueued (call_tag)
  DeviceBarrierFacts barrier_facts_;  // found at set-up, for the planner
  bool ran_kind_[2] = {false, false};  // a kernel barrier, a host barrier enqueued so far
  uint64_t host_barrier_count_ = 0;  // host barriers enqueued so far: the next one's number
  std::unique_ptr<HostBarriers> host_barriers_;  // where the host has a shared-memory domain
  // User buffers read in place without registration (ctx.share_buffers), and what
  // share_buffers found for the call about to run.
  std::unique_ptr<PeerBuffers> peer_buffers_;
  struct SharedCall {
    bool valid = false;
    const void* send = nullptr;
    const void* recv = nullptr;
    InPlaceBuffers at;
  } shared_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread watcher_;
};

}  // namespace

// Where every rank of the communicator is on this host, the device runtime can map
// peers' memory, and NCCL was not asked for (KOLO_DEVICE_IPC=0 turns it off): its set-up
// is still to come, its one-kernel collectives carry up to a box, and it can share plain
// (cudaMalloc) buffers with the peers for a call (KOLO_DEVICE_AUTO_REGISTER).
bool declare_ipc_device_executor(const PlannerInputs& in, PlanContext& ctx) {
  const PlannerFacts& f = in.facts;
  if (!(f.shared_memory || f.size == 1) || f.size > kMaxIpcRanks || in.settings.nccl_backend || !f.device_maps_peers ||
      !in.settings.device_ipc) {
    return false;
  }
  ctx.device_ipc = true;
  ctx.device_setup = DeviceSetup::kNotYet;
  ctx.share_buffers = f.shared_memory && f.size > 1 && in.settings.device_auto_register;
  ctx.flagged_bytes = in.settings.device_flagged ? kFlaggedMaxBytes : 0;
  return true;
}

MadeExecutor create_ipc_device_executor(const ExecutorEnv& env) {
  return MadeExecutor(std::make_unique<IpcDeviceExecutor>(env));
}

}  // namespace kolo
