#include "engine/runtime/runtime.h"

#include <algorithm>
#include <chrono>

#include "engine/runtime/fusion.h"
#include "support/clock.h"
#include "support/device/device.h"
#include "support/env.h"
#include "support/log.h"

namespace kolo::runtime {
namespace {

std::chrono::steady_clock::duration milliseconds(double ms) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double, std::milli>(ms));
}

}  // namespace

Result<RuntimeSettings> RuntimeSettings::from_environment() {
  // Every KOLO_* value first (the runtime starts after its communicator was made, and the
  // environment may have changed since). The bounds of what the settings become (a size_t,
  // a duration in nanoseconds) are the table's ranges, which env_double checks: beyond
  // them (inf included) the conversions would be undefined behaviour.
  KOLO_TRY(env_check_all());
  RuntimeSettings s;
  Result<double> v = env_double("KOLO_CYCLE_TIME");
  if (!v.ok()) return v.status();
  s.cycle_ms = v.value();
  if (!(v = env_double("KOLO_FUSION_THRESHOLD")).ok()) return v.status();
  s.fusion_threshold = static_cast<size_t>(v.value());
  if (!(v = env_double("KOLO_CACHE_CAPACITY")).ok()) return v.status();
  s.cache_capacity = static_cast<size_t>(v.value());
  if (!(v = env_double("KOLO_STALL_CHECK_TIME")).ok()) return v.status();
  s.stall.check_seconds = v.value();
  if (!(v = env_double("KOLO_STALL_SHUTDOWN_TIME")).ok()) return v.status();
  s.stall.shutdown_seconds = v.value();
  s.autotune = env_string("KOLO_AUTOTUNE") == "1";
  s.timeline_path = env_string("KOLO_TIMELINE");
  s.timeout_seconds = env_timeout_seconds();
  return s;
}

Result<std::unique_ptr<Runtime>> Runtime::start(Communicator& parent, const RuntimeSettings& settings) {
  auto comm = parent.duplicate("runtime");
  if (!comm.ok()) return comm.status().with_context("starting the runtime: ");
  std::unique_ptr<Runtime> runtime(new Runtime(comm.take(), settings));
  if (!settings.timeline_path.empty() && runtime->rank() == 0) {
    Status s = runtime->start_timeline(settings.timeline_path);
    if (!s.ok()) log_warn(Subsys::kEngine, s.message());
  }
  runtime->thread_ = std::thread([r = runtime.get()] { r->loop(); });
  return runtime;
}

Runtime::Runtime(std::unique_ptr<Communicator> comm, const RuntimeSettings& settings)
    : comm_(std::move(comm)),
      settings_(settings),
      negotiator_(*comm_, settings.cache_capacity, settings.stall),
      runner_(*comm_, settings.timeout_seconds),
      autotuner_(settings.autotune && comm_->rank() == 0, settings.fusion_threshold, settings.cycle_ms) {}

Runtime::~Runtime() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status Runtime::enqueue(std::shared_ptr<Request> request) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!dead_.ok()) {
    return error(Code::kAborted, "the runtime stopped after an earlier failure (", dead_.message(), ")");
  }
  if (stopping_) return error(Code::kAborted, "the runtime is shutting down");
  if (join_requested_) {
    return error(Code::kInvalidUsage, "tensor '", request->name,
                 "': this rank has called kolo_join; enqueue again after it returns");
  }
  if (request->sig.device) {
    if (device_ < 0) device_ = request->device;
    if (request->device != device_) {
      return error(Code::kInvalidArgument, "tensor '", request->name, "' is memory of device ", request->device,
                   "; this communicator's runtime runs on device ", device_,
                   " (its first device tensor's): one device per rank");
    }
  }
  if (!in_flight_.insert(request->name).second) {
    return error(Code::kInvalidUsage, "tensor '", request->name,
                 "' is already in flight on this rank (enqueued, and its request not yet freed); names must be "
                 "unique among operations in flight");
  }
  request->enqueued_at = now_seconds();
  incoming_.push_back(std::move(request));
  wake_.notify_one();
  return Status();
}

Result<int> Runtime::join() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!dead_.ok()) return error(Code::kAborted, "the runtime stopped after an earlier failure (", dead_.message(), ")");
  if (join_requested_) return error(Code::kInvalidUsage, "kolo_join is already running on this communicator");
  join_requested_ = true;
  // The runtime's thread has no device of its own: a joined rank that never enqueued a
  // device tensor contributes zeros from the device current on the joining thread.
  auto current = device::runtime().current_device();
  join_device_ = current.ok() ? current.value() : 0;
  const uint64_t round = join_round_;
  wake_.notify_one();
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(settings_.timeout_seconds));
  if (!joined_.wait_until(lock, until, [&] { return join_round_ != round || !dead_.ok(); })) {
    join_requested_ = false;
    return error(Code::kTimeout, "kolo_join: not every rank joined within ", settings_.timeout_seconds,
                 " s (KOLO_TIMEOUT)");
  }
  if (join_round_ == round) return dead_;
  if (!join_status_.ok()) return join_status_;
  return last_joined_;
}

Status Runtime::start_timeline(const std::string& path) {
  auto timeline = Timeline::open(path, rank());
  if (!timeline.ok()) return timeline.status();
  std::lock_guard<std::mutex> lock(mutex_);
  timeline_ = std::shared_ptr<Timeline>(timeline.take());
  return Status();
}

void Runtime::stop_timeline() {
  std::shared_ptr<Timeline> timeline;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    timeline.swap(timeline_);
  }
  // The file is complete when this returns: wait for the running cycle to drop its copy
  // (a cycle is bounded by KOLO_TIMEOUT like every collective).
  Deadline deadline(settings_.timeout_seconds);
  while (timeline && timeline.use_count() > 1 && !deadline.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

RuntimeStats Runtime::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void Runtime::loop() {
  using Clock = std::chrono::steady_clock;
  auto tick = Clock::now();
  for (;;) {
    const double cycle_ms = autotuner_.cycle_ms(last_tuning_);
    // A rank that holds requests a peer lacks waits inside the next cycle's allreduce
    // rather than here: the peer's enqueue then completes the cycle (pacing.h).
    const bool holding = !pending_.empty();
    const double wait_ms = last_cycle_.wait_ms(holding, cycle_ms);
    if (wait_ms > 0) wait_for_work(std::min(tick, Clock::now() + milliseconds(wait_ms)));
    tick = Clock::now() + milliseconds(cycle_ms);
    if (!cycle(holding && wait_ms == 0)) return;
  }
}

void Runtime::wait_for_work(std::chrono::steady_clock::time_point until) {
  std::unique_lock<std::mutex> lock(mutex_);
  // Work of its own starts the cycle at once. The tick still matters: it brings an idle
  // rank to the cycles that a peer's stop, stall check or join needs.
  wake_.wait_until(lock, until, [&] { return has_work_locked(); });
}

// Reads the thread's own state too (pending_, joined_locally_): called on that thread.
bool Runtime::has_work_locked() const {
  return !incoming_.empty() || stopping_ || (join_requested_ && !joined_locally_ && pending_.empty());
}

bool Runtime::cycle(bool early) {
  CycleInput input;
  std::shared_ptr<Timeline> timeline;
  bool newly_joined = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& request : incoming_) {
      const std::string name = request->name;  // read before the move below
      pending_[name] = Pending{std::move(request), false};
    }
    incoming_.clear();
    input.shutting_down = stopping_;
    timeline = timeline_;
    // A rank joins once its own queue is empty: what it enqueued before still runs.
    if (join_requested_ && !joined_locally_ && pending_.empty()) {
      joined_locally_ = newly_joined = true;
      joined_at_cycle_ = static_cast<int64_t>(stats_.cycles);
    }
  }
  runner_.set_timeline(timeline.get());
  const double now = now_seconds();
  input.joined = joined_locally_;
  input.newly_joined = newly_joined;
  input.tuning = autotuner_.setting();
  if (settings_.stall.check_seconds > 0 && now - last_stall_check_ >= settings_.stall.check_seconds) {
    for (const auto& [name, p] : pending_) {
      if (now - p.request->enqueued_at >= settings_.stall.check_seconds) input.stall_check = true;
    }
  }
  Result<CycleOutput> result = negotiator_.negotiate(pending_, input);
  const double negotiated_at = now_seconds();
  if (!result.ok()) {
    die(result.status().with_context("runtime negotiation: "));
    return false;
  }
  CycleOutput& out = result.value();
  last_tuning_ = out.tuning;
  last_cycle_.record(!out.ready.empty() || out.slow_path, out.some_rank_idle);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.cycles;
    stats_.early_cycles += early ? 1 : 0;
    stats_.slow_cycles += out.slow_path ? 1 : 0;
    stats_.cached_hits += out.cached_hits;
    stats_.cache_entries = negotiator_.cache().size();
    if (!out.slow_path && out.ready.empty()) ++stats_.idle_cycles;
    if (!out.slow_path && !out.ready.empty()) {
      ++stats_.cached_cycles;
      stats_.cached_cycle_seconds += negotiated_at - now;
    }
  }
  if (out.shutdown) {
    die(error(Code::kAborted, "the runtime was shut down (kolo_comm_destroy on a rank) while this request was pending"));
    return false;
  }
  if (!out.stop.ok()) {
    die(out.stop);
    return false;
  }
  if (out.stall_checked) last_stall_check_ = now;
  if (out.all_joined) {
    Status s = all_joined();
    if (!s.ok()) {
      die(s);
      return false;
    }
    return true;
  }
  if (out.ready.empty()) return true;
  if (timeline) timeline->mark("CYCLE_START", now, str_cat("\"ready\": ", out.ready.size(), ", \"cached\": ", out.cached_hits));
  execute(out.ready, negotiated_at, autotuner_.threshold(out.tuning));
  if (!runner_.comm_error().ok()) {
    die(runner_.comm_error());
    return false;
  }
  return true;
}

// The request this rank runs for a response: its own, or for a joined rank a stand-in that
// sends zeros and keeps nothing.
std::shared_ptr<Request> Runtime::take(const Response& resp) {
  auto it = pending_.find(resp.name);
  if (it != pending_.end()) {
    auto request = std::move(it->second.request);
    pending_.erase(it);
    return request;
  }
  auto stand_in = std::make_shared<Request>();
  stand_in->name = resp.name;
  stand_in->sig = resp.sig;
  stand_in->sends.assign(resp.sig.counts.size(), nullptr);
  stand_in->recvs.assign(resp.sig.counts.size(), nullptr);
  stand_in->enqueued_at = now_seconds();
  if (resp.sig.device) {  // zeros from this rank's device, or the one current where kolo_join was called
    std::lock_guard<std::mutex> lock(mutex_);
    stand_in->device = device_ >= 0 ? device_ : join_device_;
  }
  return stand_in;
}

void Runtime::execute(std::vector<Response>& ready, double negotiated_at, size_t threshold) {
  std::vector<std::shared_ptr<Request>> requests;
  for (const Response& resp : ready) requests.push_back(take(resp));
  size_t bytes = 0;
  for (size_t i = 0; i < ready.size(); ++i) {
    if (ready[i].code != Code::kOk) finish(*requests[i], Status(ready[i].code, ready[i].message));
  }
  for (const auto& group : plan_fusion(ready, threshold)) {
    std::vector<Request*> members;
    for (size_t i : group) {
      members.push_back(requests[i].get());
      bytes += ready[i].sig.total_count() * dtype_size(ready[i].sig.dtype);
    }
    Status s = runner_.comm_error().ok() ? runner_.allreduce(members, negotiated_at) : runner_.comm_error();
    for (Request* r : members) finish(*r, s);
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.collectives;
    stats_.fused_tensors += members.size();
  }
  for (size_t i = 0; i < ready.size(); ++i) {
    if (ready[i].code != Code::kOk || ready[i].sig.kind == OpKind::kAllreduce) continue;
    Status s = runner_.comm_error().ok() ? runner_.run(ready[i], *requests[i], negotiated_at) : runner_.comm_error();
    finish(*requests[i], s);
  }
  autotuner_.record(bytes, now_seconds());
}

void Runtime::finish(Request& request, const Status& status) {
  // The name stays taken until the caller frees the request (release): a second enqueue
  // of it before then is refused whether or not the first has completed yet, so the
  // refusal does not depend on how fast the peers were (Horovod's handle semantics).
  request.complete(status);
}

void Runtime::release(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  in_flight_.erase(name);
}

// Every rank has joined: find the last one (the largest join cycle; cycles run in lock
// step, so their numbers agree across ranks) and release the kolo_join callers.
Status Runtime::all_joined() {
  std::vector<int64_t> at(size());
  CollCall call;
  call.spec.kind = CollKind::kAllgather;
  call.spec.dtype = DType::kInt64;
  call.spec.count = 1;
  call.send = &joined_at_cycle_;
  call.recv = at.data();
  KOLO_TRY(comm_->run(call));
  int last = 0;
  for (int r = 1; r < size(); ++r) {
    if (at[r] >= at[last]) last = r;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  joined_locally_ = false;
  join_requested_ = false;
  last_joined_ = last;
  join_status_ = Status();
  ++join_round_;
  joined_.notify_all();
  return Status();
}

void Runtime::die(const Status& status) {
  std::vector<std::shared_ptr<Request>> doomed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (dead_.ok()) dead_ = status.ok() ? error(Code::kInternal, "runtime stopped") : status;
    for (auto& request : incoming_) doomed.push_back(std::move(request));
    incoming_.clear();
    joined_.notify_all();
  }
  for (auto& [name, p] : pending_) doomed.push_back(std::move(p.request));
  pending_.clear();
  if (!status.ok() && status.code() != Code::kAborted) log_warn(Subsys::kEngine, "runtime stopped: ", status.message());
  for (auto& request : doomed) finish(*request, dead_);
}

}  // namespace kolo::runtime
