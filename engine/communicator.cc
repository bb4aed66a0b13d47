#include "engine/communicator.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <sstream>
#include <thread>

#include "engine/call_runner.h"
#include "engine/comm_store.h"
#include "engine/elastic.h"
#include "engine/plan_inputs.h"
#include "support/device/device.h"
#include "support/env.h"
#include "support/log.h"
#include "support/probe.h"

namespace kolo {

// The bootstrap store (a unique id's maker's, kolorun's, a parent's) gives only the address
// of the communicator's own store (comm_store.h); everything after uses that. The closing
// barrier, over the communicator's own connections, keeps every rank here until all have
// done their last store call of the init: a rank that returns and exits (its process
// hosting a store, the unique id's maker) breaks no one.
Result<std::unique_ptr<Communicator>> Communicator::create(std::shared_ptr<StoreSession> bootstrap, CommIdentity id,
                                                           const Deadline* within, const Inherited* from) {
  const Deadline deadline = within != nullptr ? *within : Deadline(env_timeout_seconds());
  double mark = now_seconds();
  auto lap = [&mark](double& into) {
    const double now = now_seconds();
    into = now - mark;
    mark = now;
  };
  auto own = own_store(*bootstrap, id.prefix, id.rank, deadline);
  if (!own.ok()) return own.status();
  StartupTimes times;
  lap(times.store);
  // `bootstrap` stays until the closing barrier: its server may be in this process (rank 0
  // under KOLO_ADDR), and the others may not have read the address yet. Dropped on return.
  // Alive while this rank's store connection is (elastic.h): a shrink sees a dead rank gone at once.
  std::shared_ptr<StoreSession> job = elastic_job_store();
  StoreClient& liveness = job ? *job->client : *own.value()->client;
  KOLO_TRY(liveness.set_owned(live_key(id.prefix, id.rank), "1", deadline));
  std::unique_ptr<Communicator> comm(new Communicator(own.take(), std::move(id)));
  comm->liveness_ = job ? job : comm->store_;
  for (int r = 0; r < comm->id_.size; ++r) comm->lineage_.members.push_back(std::to_string(r));
  KOLO_TRY(comm->read_environment());
  if (from != nullptr) {
    comm->inherit(*from);
    lap(times.hosts);
    KOLO_TRY(comm->connect(deadline, comm->transports_of_, false));
    lap(times.connect);
  } else {
    // The start-up exchange's tree: its links go when the exchanges are done.
    CommSite site{comm->store_->client.get(), comm->store_->secret, comm->id_.prefix, comm->id_.rank, comm->id_.size, {}, nullptr, {}};
    auto net = BootstrapNet::create(site, liveness, live_prefix(comm->id_.prefix), deadline);
    if (!net.ok()) return net.status();
    lap(times.tree);
    auto transports = comm->exchange_hosts(*net.value(), deadline);
    if (!transports.ok()) return transports.status();
    lap(times.hosts);
    KOLO_TRY(comm->exchange_topology(*net.value(), deadline));
    lap(times.topology);
    KOLO_TRY(comm->connect(deadline, transports.value(), true));
    lap(times.connect);
    KOLO_TRY(comm->calibrate_network(deadline));
    lap(times.calibrate);
  }
  KOLO_TRY(comm->barrier(&deadline).with_context("at the end of the communicator's init: "));
  lap(times.barrier);
  // Past the barrier every rank of the host is done with its host's store.
  comm->local_store_.reset();
  // Recorded and numbered from here: the init's own barrier is no call of the user's.
  comm->collectives_ = 0;
  comm->made_ = true;
  if (const size_t capacity = trace_capacity()) {
    comm->recorder_ = std::make_unique<FlightRecorder>(capacity, comm->id_.prefix, comm->id_.rank, comm->id_.size);
    arm_trace_signal();
  }
  comm->startup_ = times;
  log_info(Subsys::kInit, "communicator ", comm->id_.prefix, ": rank ", comm->rank(), " of ", comm->size(),
           ", local ", comm->local_rank_, "/", comm->local_size_, ", cross ", comm->cross_rank_, "/",
           comm->cross_size_, comm->plan_context_.shared_memory ? ", one-host collectives in shared memory" : "");
  log_info(Subsys::kInit, "communicator ", comm->id_.prefix, ": rank ", comm->rank(), " made in ", static_cast<int>((times.store + times.tree + times.hosts + times.topology + times.connect +
                                          times.calibrate + times.barrier) * 1e3),
           " ms (store ", static_cast<int>(times.store * 1e3), ", tree ", static_cast<int>(times.tree * 1e3),
           ", hosts ", static_cast<int>(times.hosts * 1e3),
           ", topology ", static_cast<int>(times.topology * 1e3), ", connect ", static_cast<int>(times.connect * 1e3),
           ", calibrate ", static_cast<int>(times.calibrate * 1e3), ", barrier ",
           static_cast<int>(times.barrier * 1e3), ")");
  return comm;
}

Status Communicator::read_environment() {
  Result<CommSettings> settings = read_comm_settings();
  if (!settings.ok()) return settings.status();
  settings_ = settings.take();
  timeout_seconds_ = settings_.timeout_seconds;
  dump_on_failure_ = env_is_set("KOLO_TRACE_DIR");
  return Status();
}

Communicator::~Communicator() {
  // Device calls still queued run (or fail at their deadline) before the links go.
  for (auto& executor : executors_) {
    if (executor) (void)executor->drain(Deadline(timeout_seconds_));
  }
  for (auto& executor : executors_) executor.reset();
  // The store may close with this process: the others finish naming the cause first (not
  // for a communicator that failed while being made: its caller's own error, a split's
  // among them, must not wait for that).
  if (made_ && !async_error().ok() && liveness_ == store_ && store_ && store_->server) {
    linger_for_failures(*store_->client, live_prefix(id_.prefix), id_.size, kNameGoneSeconds);
  }
  // Registered buffers left: unmapped with the peers (whose liveness the shared domain
  // tells, so before the connections go), unless a peer may be gone.
  if (!async_error().ok() || (connections_ && connections_->aborted())) {
    windows_.abandon();
  } else {
    Status s = windows_.clear();
    if (!s.ok()) log_warn(Subsys::kExec, "rank ", id_.rank, ": at destroy: ", s.message());
  }
  connections_.reset();
}

// The transports (engine/connect.h), then the planner's view of the communicator (what
// plan_inputs.h builds from the settings, the machines and the rows' declarations), then
// one executor per row that declared it runs here.
Status Communicator::connect(const Deadline& deadline, const std::vector<std::string>& transports,
                             bool all_joined) {
  ConnectRequest request{store_->client.get(), store_->secret, id_.prefix, id_.rank, id_.size, host_of_rank_,
                         local_store_ ? local_store_->client.get() : nullptr, {}};
  if (all_joined && liveness_) {
    request.left = [this](const std::vector<int>& ranks) -> Status {
      Result<std::vector<int>> gone =
          liveness_->client->absent(live_prefix(id_.prefix), id_.size, 0, Deadline(kNameGoneSeconds));
      if (!gone.ok()) return Status();  // no answer: the wait goes on to its deadline
      std::vector<int> left_ranks;
      for (int r : ranks) {
        if (std::binary_search(gone.value().begin(), gone.value().end(), r)) left_ranks.push_back(r);
      }
      if (left_ranks.empty()) return Status();
      const bool one = left_ranks.size() == 1;
      return error(Code::kRemote, one ? "rank " : "ranks ", rank_list(left_ranks), " left the job during start-up (",
                   one ? "its connection" : "their connections", " to the store closed: ", one ? "it" : "they",
                   " failed or ", one ? "was" : "were", " killed)");
    };
  }
  auto connections = Connections::create(request, deadline, transports);
  if (!connections.ok()) return connections.status();
  connections_ = connections.take();
  ExecutorEnv env;
  env.rank = id_.rank;
  env.size = id_.size;
  env.fabric = &connections_->fabric();
  env.shared = connections_->shared();
  // The planner and the executors (the table is filled below); device staging runs the
  // host plan of each call through it from its own thread, in call order.
  CallRunner::Env runner;
  runner.rank = id_.rank;
  runner.size = id_.size;
  runner.plan_context = &plan_context_;
  runner.executors = executors_;
  runner.timeout_seconds = timeout_seconds_;
  runner.usable = [this] { return usable(); };
  runner.fail = [this](Status status) { return fail(std::move(status)); };
  runner_ = std::make_unique<CallRunner>(std::move(runner));
  env.host = runner_.get();
  env.from_rank0 = [this](const std::string& name, const std::string& value) -> Result<std::string> {
    const std::string key = str_cat(id_.prefix, "/executor/", name);
    const Deadline deadline(timeout_seconds_);
    if (id_.rank == 0) KOLO_TRY(store_->client->set(key, value, deadline));
    return store_->client->get(key, deadline);
  };
  env.fail = [this](Status status) { (void)fail(std::move(status)); };
  env.settings = &settings_;
  env.timeout_seconds = &timeout_seconds_;
  env.plan_context = &plan_context_;
  env.store = store_->client.get();
  env.store_prefix = id_.prefix;
  env.windows = &windows_;
  env.host_of_rank = &host_of_rank_;
  PlannerFacts facts;
  facts.rank = id_.rank;
  facts.size = id_.size;
  facts.topology = &topology_;
  facts.host_of_rank = &host_of_rank_;
  if (SharedDomain* shared = connections_->shared()) {
    facts.shared_memory = true;
    facts.slot_bytes = shared->slot_bytes();
    facts.agreed_cores = shared->agreed_cores();
    facts.copy_gbs = shared->agreed_copy_gbs();
    facts.cache_bytes = shared->agreed_cache_bytes();
  }
  facts.device_maps_peers = device::runtime().kind.maps_peers;
  const ExecutorRows runs = make_plan_context(settings_, facts, &plan_context_, &local_params_);
  for (int k = 0; k < kExecutorCount; ++k) {
    if (!runs[k]) continue;
    MadeExecutor made = executor_row(static_cast<ExecutorKind>(k)).create(env);
    if (!made.ok()) return made.status().with_context(str_cat("rank ", id_.rank, ": "));
    executors_[k] = made.take();
    if (executors_[k]->queues_device_work()) queueing_.push_back(executors_[k].get());
  }
  return Status();
}

Status Communicator::fail(Status status) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(failed_mutex_);
    if (failed_.ok()) failed_ = status, first = true;
  }
  // The store hears that this rank failed (so that it is not named as the cause when it
  // exits), then the peers (links closed, the host's peers stopped), then the store is asked
  // which ranks are gone: what this rank saw is often only a survivor's echo.
  // Only a rank in a call says so: one that fails from a background thread while it makes
  // no call (its device executor saw a peer fail) may be the one the others wait for.
  const bool marks = (status.code() == Code::kRemote || status.code() == Code::kTimeout) &&
                     in_call_.load(std::memory_order_relaxed);
  // A store this rank cannot reach to say so cannot tell it who is gone either: then the
  // naming is skipped (a host cut off from the others fails within its deadline as it is).
  bool reached = false;
  if (first && marks && liveness_) {
    reached = mark_rank_failed(*liveness_->client, live_prefix(id_.prefix), id_.rank, status.message(),
                               status.code() == Code::kTimeout)
                  .ok();
  }
  connections_->fail(status.message());
  if (reached) {
    status = name_ranks_gone(status, *liveness_->client, live_prefix(id_.prefix), id_.size, id_.rank, kNameGoneSeconds,
                             liveness_ == store_ && id_.rank != 0);
    std::lock_guard<std::mutex> lock(failed_mutex_);
    failed_ = status;
  }
  if (first) failure_settled_.store(true, std::memory_order_release);
  log_warn(Subsys::kExec, status.message());
  return status;
}

Status Communicator::async_error() const {
  std::lock_guard<std::mutex> lock(failed_mutex_);
  return failed_;
}

Status Communicator::unusable() {
  if (!failed_.ok()) {
    return error(Code::kAborted, "communicator failed earlier and cannot be used (", failed_.message(), ")");
  }
  if (connections_->aborted()) return fail(error(Code::kAborted, "communicator was aborted"));
  return Status();
}

// A blocking (host) call first lets the device calls queued before it finish, so that
// every rank runs its calls in the order it made them.
Status Communicator::drain_device(bool* waited) {
  for (Executor* executor : queueing_) {
    if (!executor->busy()) continue;
    if (waited != nullptr) *waited = true;
    Status drained = executor->drain(Deadline(timeout_seconds_));
    if (drained.ok()) continue;
    // The queued calls have deadlines of their own, about as far as this wait's: their
    // failure (naming whom they waited for) is the cause, this timeout only its echo.
    const Deadline grace(kNameGoneSeconds);
    while (!failure_settled_.load(std::memory_order_acquire) && !grace.expired()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return async_error().ok() ? fail(std::move(drained)) : usable();
  }
  return Status();
}

Status Communicator::room_for_device(const CollCall* calls, size_t n) {
  for (Executor* executor : queueing_) {
    Status room = executor->make_room(calls, n, Deadline(timeout_seconds_));
    if (!room.ok()) return fail(std::move(room));  // queued calls that never ran: broken
  }
  return Status();
}

Status Communicator::run(const CollCall& call) { return run_calls(&call, 1); }

Status Communicator::run_group(const std::vector<CollCall>& calls) {
  bool device = false, host = false;
  for (const CollCall& c : calls) (c.spec.device ? device : host) = true;
  if (device && host) {
    return error(Code::kInvalidArgument, "a group mixes host and device buffers on rank ", id_.rank,
                 "; put them in separate groups");
  }
  return run_calls(calls.data(), calls.size());
}

// Every call of the user's: marked as in a call (fail() says so in the store only then), run
// under the flight recorder, and its communicator's first failure dumped.
Status Communicator::run_calls(const CollCall* calls, size_t n) {
  in_call_.store(true, std::memory_order_relaxed);  // a store, no read-modify-write: one caller at a time is the rule
  Status status = run_recorded(calls, n);
  in_call_.store(false, std::memory_order_relaxed);
  dump_first_failure(status);
  return status;
}

// The first failure is dumped where KOLO_TRACE_DIR asks for it (a refusal is no failure).
void Communicator::dump_first_failure(const Status& status) {
  if (!status.ok() && dump_on_failure_ && !async_error().ok() && !dumped_failure_.exchange(true)) {
    Result<std::string> path = dump_trace("", "failure");
    if (!path.ok()) log_warn(Subsys::kExec, path.status().message(), " (the call's own error follows)");
  }
}

// run_calls and run_recorded for one host call that a lane holds, in the same order: the
// device work before it, the call lock, the count and the flight record, then the call.
bool Communicator::run_on_lane(const LaneKey& key, const void* send, void* recv, Status* status) {
  KOLO_PROBE(kApiChecked);
  const uint64_t entered = recorder_ ? trace_ticks() : 0;
  in_call_.store(true, std::memory_order_relaxed);  // as run_calls: a failure from here on is said in the store
  auto finish = [&](Status s) {
    in_call_.store(false, std::memory_order_relaxed);
    dump_first_failure(s);
    *status = std::move(s);
    return true;
  };
  bool waited = false;
  Status ready = device::assert_may_block("a collective call");
  if (ready.ok()) ready = drain_device(&waited);
  if (!ready.ok()) return finish(std::move(ready));
  std::unique_lock<CallLock> lock(runner_->lock(), std::try_to_lock);
  if (!lock.owns_lock()) waited = true, lock.lock();
  const int lane = runner_->lane_of(key);
  if (lane < 0) {
    in_call_.store(false, std::memory_order_relaxed);
    return false;
  }
  ++collectives_;
  size_t slot = 0;
  if (recorder_) {
    slot = recorder_->entered(runner_->lane_spec(lane), collectives_, 0, 1, entered);
    if (waited) recorder_->started(slot, trace_ticks());
  }
  KOLO_PROBE(kCommLocked);
  Status s = usable();
  if (s.ok()) s = runner_->run_lane(lane, send, recv, collectives_);
  if (recorder_) {
    const bool timed = collectives_ % kLaneTimedEvery == 0 || !s.ok() || runner_->last_call_waited();
    recorder_->ended(slot, runner_->last_plan(), s.ok(), false, timed ? trace_ticks() : 0);
  }
  KOLO_PROBE(kCommDone);
  lock.unlock();
  return finish(std::move(s));
}

// The flight recorder sees each call enter, start (once this thread holds the call lock and
// the device work before it is done) and end; the ticks cost about 10 ns each, so an
// uncontended host call takes its start from its entry.
Status Communicator::run_recorded(const CollCall* calls, size_t n) {
  KOLO_PROBE(kApiChecked);
  const uint64_t entered = recorder_ ? trace_ticks() : 0;
  KOLO_TRY(device::assert_may_block(n == 1 ? "a collective call" : "a group of calls"));
  const bool on_device = n > 0 && calls[0].spec.device;
  bool waited = on_device;
  KOLO_TRY(on_device ? room_for_device(calls, n) : drain_device(&waited));
  std::unique_lock<CallLock> lock(runner_->lock(), std::try_to_lock);
  if (!lock.owns_lock()) waited = true, lock.lock();
  const uint64_t first_seq = collectives_ + 1;
  size_t slot = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool p2p = calls[i].spec.kind == CollKind::kSend || calls[i].spec.kind == CollKind::kRecv;
    if (!p2p) ++collectives_;
    if (!recorder_) continue;
    const size_t s = recorder_->entered(calls[i].spec, collectives_, static_cast<uint16_t>(std::min<size_t>(i, 0xffff)),
                                        static_cast<uint16_t>(std::min<size_t>(n, 0xffff)), entered);
    if (i == 0) slot = s;
  }
  if (recorder_ && waited) {
    const uint64_t started = trace_ticks();
    for (size_t i = 0; i < n; ++i) recorder_->started(slot + i, started);
  }
  KOLO_PROBE(kCommLocked);
  Status status = run_locked(calls, n, first_seq);
  if (recorder_) {
    const uint64_t ended = trace_ticks();
    for (size_t i = 0; i < n; ++i) recorder_->ended(slot + i, runner_->last_plan(), status.ok(), calls[i].spec.device, ended);
  }
  KOLO_PROBE(kCommDone);
  return status;
}

void Communicator::set_timeout(double seconds) {
  std::lock_guard<CallLock> lock(runner_->lock());
  timeout_seconds_ = seconds;
  runner_->set_timeout(seconds);
}

Result<std::string> Communicator::dump_trace(const std::string& folder, const std::string& reason) const {
  if (!recorder_) {
    return error(Code::kInvalidArgument, "rank ", id_.rank, ": the flight recorder is off (KOLO_TRACE_CALLS=0)");
  }
  return recorder_->dump(DumpRequest{folder, reason, async_error().message()});
}

Status Communicator::check_runnable(const CollCall& call) {
  std::lock_guard<CallLock> lock(runner_->lock());
  KOLO_TRY(usable());
  if (call.spec.empty()) return Status();
  PlannedCall planned{nullptr, runner_->lowered(call), 0};
  if (planned.call.spec.device) {
    mark_registered(planned.call);
    KOLO_TRY(set_up_device(planned.call));
  }
  planned.plan = &runner_->plan_for(planned.call.spec, false);
  return runner_->check_compression(planned);
}

// The first device call that an executor sets up for (every rank makes the same first
// device call): what it learns goes into the PlanContext before that call is planned, and
// plans made before it are dropped.
Status Communicator::set_up_device(const CollCall& call) {
  // Without an executor that sets up device memory (kNone), device calls pay nothing here.
  if (plan_context_.device_setup != DeviceSetup::kNotYet) return Status();
  const Deadline deadline = call_deadline();
  for (auto& executor : executors_) {
    if (!executor) continue;
    Result<bool> changed = executor->set_up(call, deadline, plan_context_);
    if (!changed.ok()) return changed.status().code() == Code::kUnsupported ? changed.status() : fail(changed.status());
    if (changed.value()) runner_->drop_plans();
  }
  return Status();
}

// One call, or n as one group (n > 1). The caller holds the runner's lock. What a device
// call needs before it is planned (registered windows, the set-up, buffers shared), then
// the runner plans and runs it.
Status Communicator::run_locked(const CollCall* calls, size_t n, uint64_t first_seq) {
  KOLO_TRY(usable());
  runner_->begin();
  if (n == 1) {  // the common case, without the group's vector
    if (calls[0].spec.empty()) return Status();
    PlannedCall call{nullptr, runner_->lowered(calls[0]), 0};
    call.call.seq = first_seq;
    if (call.call.spec.device) {
      mark_registered(call.call);
      KOLO_TRY(set_up_device(call.call));
      KOLO_TRY(share_buffers(call.call));
    }
    Status status = runner_->run(&call, 1, false);
    if (status.ok()) runner_->arm_lane(calls[0], call);  // the lane takes it if it serves it
    return status;
  }
  for (size_t i = 0; i < n; ++i) {
    if (calls[i].spec.device && !calls[i].spec.empty()) {
      KOLO_TRY(set_up_device(calls[i]));
      break;
    }
  }
  // Planned as one program, or call by call (plan.h says when).
  const bool grouped = group_is_one_program(calls, n, plan_context_);
  group_.clear();
  uint64_t seq = first_seq;  // numbers the group's collectives, not its sends and receives
  for (size_t i = 0; i < n; ++i) {
    const bool p2p = calls[i].spec.kind == CollKind::kSend || calls[i].spec.kind == CollKind::kRecv;
    const uint64_t this_seq = p2p ? 0 : seq++;
    if (calls[i].spec.empty()) continue;
    PlannedCall call{nullptr, runner_->lowered(calls[i]), 0};
    call.call.seq = this_seq;
    if (call.call.spec.device) mark_registered(call.call);
    group_.push_back(std::move(call));
  }
  if (group_.empty()) return Status();
  return runner_->run(group_.data(), group_.size(), grouped);
}

void Communicator::mark_registered(CollCall& call) const {
  RegisteredBuffers where;
  call.spec.registered = !windows_.empty() && find_registered(call, windows_, id_.rank, id_.size, &where);
}

// A single device call whose buffers the peers would read in place if they could: the
// executor that can make them readable does (every rank asks for the same calls), and
// the call is planned as registered where it did, on every rank alike.
Status Communicator::share_buffers(CollCall& call) {
  if (!runner_->plan_for(call.spec, false).share_buffers) return Status();
  const Deadline deadline = call_deadline();
  for (auto& executor : executors_) {
    if (!executor) continue;
    Result<bool> shared = executor->share_buffers(call, deadline);
    if (!shared.ok()) return fail(shared.status());
    if (shared.value()) {
      call.spec.registered = true;
      break;
    }
  }
  return Status();
}

Result<int> Communicator::register_memory(void* ptr, size_t bytes) {
  KOLO_TRY(drain_device());
  std::lock_guard<CallLock> lock(runner_->lock());
  KOLO_TRY(usable());
  SharedDomain* shared = connections_->shared();
  const Deadline deadline(timeout_seconds_);
  // Windows are mapped by the peers only where an executor reads device memory in place.
  if (plan_context_.device_setup == DeviceSetup::kNone) return windows_.add(nullptr, ptr, bytes, deadline);
  device::ScopedDevice on_device(device::runtime().pointer_info(ptr).device);
  KOLO_TRY(on_device.status());
  // One rank has no shared-memory domain: a site of one.
  IpcSite site{store_->client.get(), str_cat(id_.prefix, "/windows"), shared ? shared->index() : 0,
               shared ? shared->size() : 1, [shared] { return shared ? shared->members_alive() : Status(); }};
  return windows_.add(&site, ptr, bytes, deadline);
}

Status Communicator::deregister_memory(int id) {
  // No queued call may still read the buffers: every executor's device work first.
  for (auto& executor : executors_) {
    if (executor) KOLO_TRY(executor->drain(Deadline(timeout_seconds_)));
  }
  std::lock_guard<CallLock> lock(runner_->lock());
  return windows_.remove(id);
}

Status Communicator::barrier(const Deadline* within) {
  CollCall call;
  call.spec.kind = CollKind::kBarrier;
  call.spec.dtype = DType::kUint8;
  runner_->set_call_deadline(within);  // the calling thread's collective: no other call runs meanwhile
  Status s = run(call);
  runner_->set_call_deadline(nullptr);
  return s;
}

void Communicator::abort() {
  if (connections_) connections_->abort();
  for (auto& executor : executors_) {
    if (executor) executor->abort();
  }
}

}  // namespace kolo
