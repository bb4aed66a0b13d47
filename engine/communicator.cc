#include "engine/communicator.h"

#include <algorithm>
#include <mutex>
#include <sstream>

#include "engine/comm_store.h"
#include "support/device/device.h"
#include "support/env.h"
#include "support/log.h"

namespace kolo {
namespace {

constexpr uint64_t kPointToPointTagBit = uint64_t{1} << 63;

// The plan cache key: everything of the spec a plan depends on (chunk size and KOLO_ALGO
// are fixed per communicator).
std::string spec_key(const CollSpec& spec, bool grouped) {
  std::ostringstream key;
  key << static_cast<int>(spec.kind) << '/' << spec.count << '/' << static_cast<int>(spec.dtype) << '/'
      << static_cast<int>(spec.op) << '/' << spec.root << '/' << spec.peer << '/' << spec.in_place << spec.prescaled
      << spec.postscaled << '/' << static_cast<int>(spec.algorithm) << (spec.device ? "/d" : "") << '/'
      << static_cast<int>(spec.wire) << (spec.registered ? "/r" : "");
  for (size_t c : spec.counts) key << ',' << c;
  key << '/';
  for (size_t d : spec.displs) key << ',' << d;
  key << (grouped ? "/g" : "");
  return key.str();
}

bool same_plan_key(const CollSpec& a, const CollSpec& b) {
  return a.kind == b.kind && a.count == b.count && a.dtype == b.dtype && a.op == b.op && a.root == b.root &&
         a.peer == b.peer && a.in_place == b.in_place && a.prescaled == b.prescaled && a.postscaled == b.postscaled &&
         a.algorithm == b.algorithm && a.device == b.device && a.wire == b.wire && a.registered == b.registered &&
         a.counts == b.counts &&
         a.displs == b.displs;
}

// Compression on the wire runs where the planned executor compresses (Executor::
// compresses: host buffers on one host and over the links; device allreduce on one host).
// A compressed call planned anywhere else is refused before it runs; the communicator
// stays usable. Planning is deterministic, so every rank refuses alike. One rank has no
// wire: its allreduce is a (scaled) copy on any path.
Status refuse_uncompressible(const PlannedCall& c, const Executor* executor, const PlanContext& ctx) {
  const CollSpec& spec = c.call.spec;
  const int rank = ctx.rank;
  if (!spec.compressed() || ctx.size == 1 || (executor != nullptr && executor->compresses(spec))) return Status();
  const std::string what = str_cat("rank ", rank, ": wire_dtype = ", dtype_name(spec.wire), ": compressed ",
                                   coll_name(spec.kind));
  if (!spec.device) return error(Code::kUnsupported, what, " does not run in a group of calls yet");
  if (ctx.device_setup == DeviceSetup::kUnmappable) {
    return error(Code::kUnsupported, what, ": compressed allreduce needs the device_ipc path, and these GPUs cannot map "
                 "each other's memory (device collectives are staged through host memory, which does not compress "
                 "yet)");
  }
  return error(Code::kUnsupported, what,
               ": compression runs on device_ipc for device buffers (allreduce, one host, GPUs with peer access); "
               "device buffers that must be staged (across hosts, or without peer access) and device "
               "reduce_scatter/allgather are not compressed yet: copy them to host memory");
}

}  // namespace

// The bootstrap store (a unique id's maker's, kolorun's, a parent's) gives only the address
// of the communicator's own store (comm_store.h); everything after uses that. The closing
// barrier, over the communicator's own connections, keeps every rank here until all have
// done their last store call of the init: a rank that returns and exits (its process
// hosting a store, the unique id's maker) breaks no one.
Result<std::unique_ptr<Communicator>> Communicator::create(std::shared_ptr<StoreSession> bootstrap, CommIdentity id,
                                                           const Deadline* within) {
  const Deadline deadline = within != nullptr ? *within : Deadline(env_timeout_seconds());
  auto own = own_store(*bootstrap, id.prefix, id.rank, deadline);
  if (!own.ok()) return own.status();
  // `bootstrap` stays until the closing barrier: its server may be in this process (rank 0
  // under KOLO_ADDR), and the others may not have read the address yet. Dropped on return.
  std::unique_ptr<Communicator> comm(new Communicator(own.take(), std::move(id)));
  KOLO_TRY(comm->read_environment());
  KOLO_TRY(comm->exchange_hosts(deadline));
  KOLO_TRY(comm->exchange_topology(deadline));
  KOLO_TRY(comm->connect(deadline));
  KOLO_TRY(comm->calibrate_network(deadline));
  comm->send_seq_.assign(comm->size(), 0);
  comm->recv_seq_.assign(comm->size(), 0);
  KOLO_TRY(comm->barrier(&deadline).with_context("at the end of the communicator's init: "));
  log_info(Subsys::kInit, "communicator ", comm->id_.prefix, ": rank ", comm->rank(), " of ", comm->size(),
           ", local ", comm->local_rank_, "/", comm->local_size_, ", cross ", comm->cross_rank_, "/",
           comm->cross_size_, comm->plan_context_.shared_memory ? ", one-host collectives in shared memory" : "");
  return comm;
}

Status Communicator::read_environment() {
  Result<long long> chunk = env_int("KOLO_CHUNK_BYTES");  // at least 1024 (the table's range)
  if (!chunk.ok()) return chunk.status();
  chunk_bytes_ = static_cast<size_t>(chunk.value());
  Result<Algorithm> algorithm = parse_algorithm_name(env_string("KOLO_ALGO"));
  if (!algorithm.ok()) return algorithm.status();
  forced_algorithm_ = algorithm.value();
  timeout_seconds_ = env_timeout_seconds();
  const std::string backend = env_string("KOLO_BACKEND");
  if (backend != "kolo" && backend != "nccl" && !backend.empty()) {
    return error(Code::kInvalidArgument, "KOLO_BACKEND='", backend, "' is not kolo or nccl");
  }
  nccl_backend_ = backend == "nccl";
  return Status();
}

Communicator::~Communicator() {
  // Device calls still queued run (or fail at their deadline) before the links go.
  for (auto& executor : executors_) {
    if (executor) (void)executor->drain(Deadline(timeout_seconds_));
  }
  for (auto& executor : executors_) executor.reset();
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

// The transports (engine/connect.h), then one executor per row of the table that can run
// here, then the planner's view of the communicator.
Status Communicator::connect(const Deadline& deadline) {
  ConnectRequest request{store_->client.get(), store_->secret, id_.prefix, id_.rank, id_.size, host_of_rank_};
  auto connections = Connections::create(request, deadline);
  if (!connections.ok()) return connections.status();
  connections_ = connections.take();
  ExecutorEnv env;
  env.rank = id_.rank;
  env.size = id_.size;
  env.fabric = &connections_->fabric();
  env.shared = connections_->shared();
  // Device staging runs the host plan of each call from its own thread, in call order.
  env.run_host = [this](const CollCall* calls, size_t n) {
    std::lock_guard<std::mutex> lock(run_mutex_);
    return run_locked(calls, n);
  };
  env.from_rank0 = [this](const std::string& name, const std::string& value) -> Result<std::string> {
    const std::string key = str_cat(id_.prefix, "/executor/", name);
    const Deadline deadline(timeout_seconds_);
    if (id_.rank == 0) KOLO_TRY(store_->client->set(key, value, deadline));
    return store_->client->get(key, deadline);
  };
  env.fail = [this](Status status) { (void)fail(std::move(status)); };
  env.nccl_backend = nccl_backend_;
  env.store = store_->client.get();
  env.store_prefix = id_.prefix;
  env.windows = &windows_;
  env.host_of_rank = &host_of_rank_;
  plan_context_ = PlanContext{id_.rank, id_.size, chunk_bytes_, forced_algorithm_, &topology_, &host_of_rank_};
  plan_context_.nccl_backend = nccl_backend_;
  for (int k = 0; k < kExecutorCount; ++k) {
    MadeExecutor made = executor_row(static_cast<ExecutorKind>(k)).create(env);
    if (!made.ok()) return made.status().with_context(str_cat("rank ", id_.rank, ": "));
    executors_[k] = made.take();
    if (!executors_[k]) continue;
    executors_[k]->describe(plan_context_);
    if (executors_[k]->queues_device_work()) queueing_.push_back(executors_[k].get());
  }
  if (SharedDomain* shared = connections_->shared()) {
    plan_context_.slot_bytes = shared->slot_bytes();
    plan_context_.agreed_cores = shared->agreed_cores();
    local_params_ = scaled_for_host(shared->agreed_copy_gbs(), shared->agreed_cache_bytes());
    plan_context_.local_params = &local_params_;
  }
  return Status();
}

// AVG is a sum divided by the communicator size on the way out, for every executor.
CollCall Communicator::lowered(const CollCall& original) const {
  CollCall call = original;
  if (call.spec.op == ReduceOp::kAvg) {
    call.spec.op = ReduceOp::kSum;
    call.postscale.divisor *= id_.size;
  }
  call.spec.prescaled = !call.prescale.identity();
  call.spec.postscaled = !call.postscale.identity();
  return call;
}

const Plan& Communicator::plan_for(const CollSpec& spec, bool grouped) {
  if (last_plan_ != nullptr && grouped == last_grouped_ && same_plan_key(spec, last_spec_)) return *last_plan_;
  if (plan_runs_locally(spec, plan_context_, grouped)) {
    local_plan_ = plan(spec, plan_context_, grouped);
    if (log_enabled(LogLevel::kInfo, Subsys::kPlan) &&
        (local_plan_.algorithm != logged_local_ || spec.kind != logged_local_kind_ ||
         local_plan_.protocol != logged_local_protocol_)) {
      logged_local_ = local_plan_.algorithm;
      logged_local_kind_ = spec.kind;
      logged_local_protocol_ = local_plan_.protocol;
      log_info(Subsys::kPlan, plan_summary(spec, id_.size, local_plan_));
    }
    last_plan_ = &local_plan_;
  } else {
    std::string key = spec_key(spec, grouped);
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      Plan p = plan(spec, plan_context_, grouped);
      if (log_enabled(LogLevel::kInfo, Subsys::kPlan)) log_info(Subsys::kPlan, plan_summary(spec, id_.size, p));
      if (log_enabled(LogLevel::kTrace, Subsys::kPlan)) log_trace(Subsys::kPlan, schedule_to_string(p.schedule));
      it = plans_.emplace(std::move(key), std::move(p)).first;
    }
    last_plan_ = &it->second;
  }
  last_spec_ = spec;
  last_grouped_ = grouped;
  return *last_plan_;
}

// Bounds the cache for varying sizes. Only between calls: a group holds pointers into it.
void Communicator::bound_plan_cache() {
  if (plans_.size() <= 4096) return;
  plans_.clear();
  last_plan_ = nullptr;
}

uint64_t Communicator::next_tag_base(const CollSpec& spec) {
  if (spec.kind == CollKind::kSend) return kPointToPointTagBit | uint64_t{send_seq_[spec.peer]++} << 32;
  if (spec.kind == CollKind::kRecv) return kPointToPointTagBit | uint64_t{recv_seq_[spec.peer]++} << 32;
  return uint64_t{collective_seq_++} << 32;
}

Status Communicator::fail(Status status) {
  {
    std::lock_guard<std::mutex> lock(failed_mutex_);
    if (failed_.ok()) failed_ = status;
  }
  log_warn(Subsys::kExec, status.message());
  connections_->fail();
  return status;
}

Status Communicator::async_error() const {
  std::lock_guard<std::mutex> lock(failed_mutex_);
  return failed_;
}

Status Communicator::usable() {
  if (!failed_.ok()) {
    return error(Code::kAborted, "communicator failed earlier and cannot be used (", failed_.message(), ")");
  }
  if (connections_->aborted()) return fail(error(Code::kAborted, "communicator was aborted"));
  return Status();
}

// The Plan names the executor; the communicator only hands the calls over.
Status Communicator::execute(const PlannedCall* calls, size_t n) {
  const Plan& p = *calls[0].plan;
  Executor* executor = executors_[static_cast<int>(p.executor)].get();
  if (executor == nullptr) {
    return fail(error(Code::kInternal, "rank ", id_.rank, ": the ", executor_name(p.executor),
                      " executor cannot run on this communicator"));
  }
  Status status = executor->run(calls, n, call_deadline_ != nullptr ? *call_deadline_ : Deadline(timeout_seconds_));
  if (status.code() == Code::kUnsupported) return status;  // refused before it ran (executor.h)
  return status.ok() ? Status() : fail(status);
}

// A blocking (host) call first lets the device calls queued before it finish, so that
// every rank runs its calls in the order it made them.
Status Communicator::drain_device() {
  for (Executor* executor : queueing_) {
    if (executor->busy()) KOLO_TRY(executor->drain(Deadline(timeout_seconds_)));
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

Status Communicator::run(const CollCall& call) {
  KOLO_TRY(device::assert_may_block("a collective call"));
  KOLO_TRY(call.spec.device ? room_for_device(&call, 1) : drain_device());
  std::lock_guard<std::mutex> lock(run_mutex_);
  return run_locked(&call, 1);
}

Status Communicator::run_group(const std::vector<CollCall>& calls) {
  KOLO_TRY(device::assert_may_block("a group of calls"));
  bool device = false, host = false;
  for (const CollCall& c : calls) (c.spec.device ? device : host) = true;
  if (device && host) {
    return error(Code::kInvalidArgument, "a group mixes host and device buffers on rank ", id_.rank,
                 "; put them in separate groups");
  }
  KOLO_TRY(host ? drain_device() : room_for_device(calls.data(), calls.size()));
  std::lock_guard<std::mutex> lock(run_mutex_);
  return run_locked(calls.data(), calls.size());
}

Status Communicator::check_runnable(const CollCall& call) {
  std::lock_guard<std::mutex> lock(run_mutex_);
  KOLO_TRY(usable());
  if (call.spec.empty()) return Status();
  PlannedCall planned{nullptr, lowered(call), 0};
  if (planned.call.spec.device) {
    mark_registered(planned.call);
    KOLO_TRY(set_up_device(planned.call));
  }
  planned.plan = &plan_for(planned.call.spec, false);
  return refuse_uncompressible(planned, executor_of(*planned.plan), plan_context_);
}

Executor* Communicator::executor_of(const Plan& p) const { return executors_[static_cast<int>(p.executor)].get(); }

// The first device call that an executor sets up for (every rank makes the same first
// device call): what it learns goes into the PlanContext before that call is planned, and
// plans made before it are dropped.
Status Communicator::set_up_device(const CollCall& call) {
  // Only device_ipc learns anything at set-up: without it, device calls pay nothing here.
  if (plan_context_.device_setup != DeviceSetup::kNotYet || !plan_context_.device_ipc) return Status();
  const Deadline deadline = call_deadline_ != nullptr ? *call_deadline_ : Deadline(timeout_seconds_);
  for (auto& executor : executors_) {
    if (!executor) continue;
    Result<bool> changed = executor->set_up(call, deadline, plan_context_);
    if (!changed.ok()) return changed.status().code() == Code::kUnsupported ? changed.status() : fail(changed.status());
    if (changed.value()) {
      plans_.clear();
      last_plan_ = nullptr;
    }
  }
  return Status();
}

// One call, or n as one group (n > 1). The caller holds run_mutex_.
Status Communicator::run_locked(const CollCall* calls, size_t n) {
  KOLO_TRY(usable());
  ran_plan_ = nullptr;
  bound_plan_cache();
  if (n == 1) {  // the common case, without the group's vector
    if (calls[0].spec.empty()) return Status();
    PlannedCall call{nullptr, lowered(calls[0]), 0};
    if (call.call.spec.device) {
      mark_registered(call.call);
      KOLO_TRY(set_up_device(call.call));
      KOLO_TRY(share_buffers(call.call));
    }
    call.plan = &plan_for(call.call.spec, false);
    KOLO_TRY(refuse_uncompressible(call, executor_of(*call.plan), plan_context_));
    if (!call.call.spec.device) call.tag_base = next_tag_base(call.call.spec);
    ran_plan_ = call.plan;
    return execute(&call, 1);
  }
  for (size_t i = 0; i < n; ++i) {
    if (calls[i].spec.device && !calls[i].spec.empty()) {
      KOLO_TRY(set_up_device(calls[i]));
      break;
    }
  }
  // A group that device_ipc runs is its calls one after another, each planned alone.
  const bool grouped = n > 1 && !group_runs_on_device_ipc(calls, n, plan_context_);
  group_.clear();
  for (size_t i = 0; i < n; ++i) {
    if (calls[i].spec.empty()) continue;
    PlannedCall call{nullptr, lowered(calls[i]), 0};
    if (call.call.spec.device) mark_registered(call.call);
    call.plan = &plan_for(call.call.spec, grouped);
    KOLO_TRY(refuse_uncompressible(call, executor_of(*call.plan), plan_context_));
    // Device calls take their tags when their host plan runs (device staging calls back
    // in), so that tags follow the order in which the ranks run host plans.
    if (!call.call.spec.device) call.tag_base = next_tag_base(call.call.spec);
    group_.push_back(std::move(call));
  }
  if (group_.empty()) return Status();
  ran_plan_ = group_.back().plan;
  return execute(group_.data(), group_.size());
}

void Communicator::mark_registered(CollCall& call) const {
  RegisteredBuffers where;
  call.spec.registered = !windows_.empty() && find_registered(call, windows_, id_.rank, id_.size, &where);
}

// A single device call whose buffers the peers would read in place if they could: the
// executor that can make them readable does (every rank asks for the same calls), and
// the call is planned as registered where it did, on every rank alike.
Status Communicator::share_buffers(CollCall& call) {
  if (!device_ipc_worth_sharing(call.spec, plan_context_)) return Status();
  const Deadline deadline = call_deadline_ != nullptr ? *call_deadline_ : Deadline(timeout_seconds_);
  for (auto& executor : executors_) {
    if (!executor) continue;
    Result<bool> shared = executor->share_buffers(call, deadline);
    if (!shared.ok()) return fail(shared.status());
    if (shared.value()) call.spec.registered = true;
  }
  return Status();
}

Result<int> Communicator::register_memory(void* ptr, size_t bytes) {
  KOLO_TRY(drain_device());
  std::lock_guard<std::mutex> lock(run_mutex_);
  KOLO_TRY(usable());
  SharedDomain* shared = connections_->shared();
  const Deadline deadline(timeout_seconds_);
  if (!plan_context_.device_ipc) return windows_.add(nullptr, ptr, bytes, deadline);
  device::ScopedDevice on_device(device::runtime().pointer_info(ptr).device);
  KOLO_TRY(on_device.status());
  // One rank has no shared-memory domain: a site of one.
  IpcSite site{store_->client.get(), str_cat(id_.prefix, "/device_ipc"), shared ? shared->index() : 0,
               shared ? shared->size() : 1, [shared] { return shared ? shared->members_alive() : Status(); }};
  return windows_.add(&site, ptr, bytes, deadline);
}

Status Communicator::deregister_memory(int id) {
  // No queued call may still read the buffers: every executor's device work first.
  for (auto& executor : executors_) {
    if (executor) KOLO_TRY(executor->drain(Deadline(timeout_seconds_)));
  }
  std::lock_guard<std::mutex> lock(run_mutex_);
  return windows_.remove(id);
}

// One deadline for the whole split (the colours, the new communicator, the closing
// barrier): a failure costs KOLO_TIMEOUT once, not once per step.
Result<std::unique_ptr<Communicator>> Communicator::split(int color, int key) {
  const Deadline deadline(timeout_seconds_);
  std::vector<int32_t> mine = {color, key};
  std::vector<int32_t> all(2 * static_cast<size_t>(id_.size));
  CollCall gather;
  gather.spec.kind = CollKind::kAllgather;
  gather.spec.count = 2;
  gather.spec.dtype = DType::kInt32;
  gather.send = mine.data();
  gather.recv = all.data();
  KOLO_TRY(run(gather));
  const uint32_t seq = split_seq_++;
  if (color < 0) return made_with_all(std::unique_ptr<Communicator>(), deadline);  // waits for the others
  std::vector<std::pair<int32_t, int>> members;  // (key, old rank)
  for (int r = 0; r < id_.size; ++r) {
    if (all[2 * r] == color) members.emplace_back(all[2 * r + 1], r);
  }
  std::sort(members.begin(), members.end());
  int new_rank = 0;
  while (members[new_rank].second != id_.rank) ++new_rank;
  CommIdentity child{str_cat(id_.prefix, "/split", seq, "/", color), new_rank, static_cast<int>(members.size())};
  return made_with_all(create(store_, child, &deadline), deadline);
}

Result<std::unique_ptr<Communicator>> Communicator::duplicate(const std::string& name) {
  const Deadline deadline(timeout_seconds_);
  return made_with_all(create(store_, CommIdentity{str_cat(id_.prefix, "/dup/", name), id_.rank, id_.size}, &deadline),
                       deadline);
}

// The new communicators were bootstrapped from this one's store, in its rank 0's process:
// every rank of this one (those in no new communicator too) waits here until every new one
// is made, so that rank 0 returns, and may exit, only when no one needs its store for them.
// This rank's own result stands either way; a failed barrier fails only a call that
// succeeded.
Result<std::unique_ptr<Communicator>> Communicator::made_with_all(Result<std::unique_ptr<Communicator>> made,
                                                                 const Deadline& deadline) {
  Status all = barrier(&deadline);
  if (!made.ok()) return made;
  if (!all.ok()) return all.with_context(str_cat("rank ", id_.rank, ": after the new communicator was made: "));
  return made;
}

Status Communicator::barrier(const Deadline* within) {
  CollCall call;
  call.spec.kind = CollKind::kBarrier;
  call.spec.dtype = DType::kUint8;
  call_deadline_ = within;  // the calling thread's collective: no other call runs meanwhile
  Status s = run(call);
  call_deadline_ = nullptr;
  return s;
}

void Communicator::abort() {
  if (connections_) connections_->abort();
  for (auto& executor : executors_) {
    if (executor) executor->abort();
  }
}

}  // namespace kolo
