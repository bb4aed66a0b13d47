#include "engine/call_runner.h"

#include <algorithm>
#include <sstream>

#include "support/log.h"
#include "support/probe.h"

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

}  // namespace

CallRunner::CallRunner(Env env) : env_(std::move(env)) {
  send_seq_.assign(env_.size, 0);
  recv_seq_.assign(env_.size, 0);
}

// Compression on the wire runs where the planned executor compresses (Executor::
// compresses: host buffers on one host and over the links; device allreduce on one host).
// A compressed call planned anywhere else is refused before it runs; the communicator
// stays usable. Planning is deterministic, so every rank refuses alike. One rank has no
// wire: its allreduce is a (scaled) copy on any path.
Status CallRunner::check_compression(const PlannedCall& c) const {
  const Executor* executor = executor_of(*c.plan);
  const PlanContext& ctx = *env_.plan_context;
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


CollCall CallRunner::lowered(const CollCall& original) const {
  CollCall call = original;
  if (call.spec.op == ReduceOp::kAvg) {
    call.spec.op = ReduceOp::kSum;
    call.postscale.divisor *= env_.size;
  }
  call.spec.prescaled = !call.prescale.identity();
  call.spec.postscaled = !call.postscale.identity();
  return call;
}

const Plan& CallRunner::plan_for(const CollSpec& spec, bool grouped) {
  const PlanContext& ctx = *env_.plan_context;
  if (last_plan_ != nullptr && grouped == last_grouped_ && same_plan_key(spec, last_spec_)) return *last_plan_;
  if (plan_runs_locally(spec, ctx, grouped)) {
    local_plan_ = plan(spec, ctx, grouped);
    if (log_enabled(LogLevel::kInfo, Subsys::kPlan) &&
        (local_plan_.algorithm != logged_local_ || spec.kind != logged_local_kind_ ||
         local_plan_.protocol != logged_local_protocol_)) {
      logged_local_ = local_plan_.algorithm;
      logged_local_kind_ = spec.kind;
      logged_local_protocol_ = local_plan_.protocol;
      log_info(Subsys::kPlan, plan_summary(spec, env_.size, local_plan_));
    }
    last_plan_ = &local_plan_;
  } else {
    std::string key = spec_key(spec, grouped);
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      Plan p = plan(spec, ctx, grouped);
      if (log_enabled(LogLevel::kInfo, Subsys::kPlan)) log_info(Subsys::kPlan, plan_summary(spec, env_.size, p));
      if (log_enabled(LogLevel::kTrace, Subsys::kPlan)) log_trace(Subsys::kPlan, schedule_to_string(p.schedule));
      it = plans_.emplace(std::move(key), std::move(p)).first;
    }
    last_plan_ = &it->second;
  }
  last_spec_ = spec;
  last_grouped_ = grouped;
  return *last_plan_;
}

void CallRunner::drop_plans() {
  plans_.clear();
  last_plan_ = nullptr;
  lanes_armed_ = 0;
  next_lane_ = 0;
}

namespace {

// The calls a lane may hold: the ones the C API asks it for (kolo_allreduce on host buffers),
// made without options (kolo_coll_options on a call leave the lane), on the fast boxes.
bool lane_serves(const CollCall& as_called, const Plan& plan) {
  const CollSpec& s = as_called.spec;
  return s.kind == CollKind::kAllreduce && !s.device && !s.compressed() && s.algorithm == Algorithm::kAuto &&
         as_called.prescale.identity() && as_called.postscale.identity() && plan.protocol == Protocol::kFastBox;
}

LaneKey lane_key(const CollSpec& s) { return LaneKey{s.kind, s.dtype, s.op, s.root, s.count, s.in_place}; }

}  // namespace

void CallRunner::arm_lane(const CollCall& as_called, const PlannedCall& ran) {
  if (!lane_serves(as_called, *ran.plan)) return;
  const LaneKey key = lane_key(as_called.spec);
  if (lane_of(key) >= 0) return;
  const int i = lanes_armed_ < kLanes ? lanes_armed_++ : next_lane_++ % kLanes;
  Lane& lane = lanes_[i];
  lane.key = key;
  lane.as_called = as_called.spec;
  lane.plan = *ran.plan;
  lane.call = ran;
  lane.call.plan = &lane.plan;
}

int CallRunner::lane_of(const LaneKey& key) const {
  for (int i = 0; i < lanes_armed_; ++i) {
    if (lanes_[i].key == key) return i;
  }
  return -1;
}

// As run() for one planned call: the next tags, then the executor the Plan names.
Status CallRunner::run_lane(int i, const void* send, void* recv, uint64_t seq) {
  PlannedCall& call = lanes_[i].call;
  call.call.send = send;
  call.call.recv = recv;
  call.call.seq = seq;
  call.tag_base = next_tag_base(call.call.spec);
  ran_plan_ = call.plan;
  // The planner's INFO log hears once that the lane ran, so that a test sees the path taken
  // (tests/multiproc/shm_tests.cmake, shm_small_lane_np2).
  if (!lane_ran_) {
    lane_ran_ = true;
    if (log_enabled(LogLevel::kInfo, Subsys::kPlan)) {
      log_info(Subsys::kPlan, "ran: small-call lane, ", coll_name(call.call.spec.kind), " of ", call.call.spec.count,
               " x ", dtype_name(call.call.spec.dtype), " (rank ", env_.rank, ")");
    }
  }
  KOLO_PROBE(kPlanned);
  return execute(&call, 1);
}

// Bounds the cache for varying sizes. Only between calls: a group holds pointers into it.
void CallRunner::bound_plan_cache() {
  if (plans_.size() > 4096) drop_plans();
}

void CallRunner::begin() {
  ran_plan_ = nullptr;
  bound_plan_cache();
}

uint64_t CallRunner::next_tag_base(const CollSpec& spec) {
  if (spec.kind == CollKind::kSend) return kPointToPointTagBit | uint64_t{send_seq_[spec.peer]++} << 32;
  if (spec.kind == CollKind::kRecv) return kPointToPointTagBit | uint64_t{recv_seq_[spec.peer]++} << 32;
  return uint64_t{collective_seq_++} << 32;
}

Status CallRunner::run(PlannedCall* calls, size_t n, bool grouped) {
  for (size_t i = 0; i < n; ++i) {
    PlannedCall& call = calls[i];
    if (call.plan == nullptr) call.plan = &plan_for(call.call.spec, grouped);
    KOLO_TRY(check_compression(call));
    // Device calls take their tags when their host plan runs (device staging runs it
    // through run_host), so that tags follow the order in which the ranks run host plans.
    if (!call.call.spec.device) call.tag_base = next_tag_base(call.call.spec);
  }
  ran_plan_ = calls[n - 1].plan;
  KOLO_PROBE(kPlanned);
  return execute(calls, n);
}

Status CallRunner::run_host(const CollCall* calls, size_t n, const std::shared_ptr<const Plan>* plans) {
  std::lock_guard<CallLock> lock(lock_);
  KOLO_TRY(env_.usable());
  begin();
  host_calls_.clear();
  for (size_t i = 0; i < n; ++i) {
    const Plan* given = plans != nullptr ? plans[i].get() : nullptr;
    if (!calls[i].spec.empty()) host_calls_.push_back(PlannedCall{given, lowered(calls[i]), 0});
  }
  if (host_calls_.empty()) return Status();
  return run(host_calls_.data(), host_calls_.size(), n > 1);
}

// The Plan names the executor; the runner only hands the calls over.
Status CallRunner::execute(const PlannedCall* calls, size_t n) {
  const Plan& p = *calls[0].plan;
  Executor* executor = executor_of(p);
  if (executor == nullptr) {
    return env_.fail(error(Code::kInternal, "rank ", env_.rank, ": the ", executor_name(p.executor),
                           " executor cannot run on this communicator"));
  }
  const double timeout = env_.timeout_seconds;
  // A one-host call through the fast boxes reads the clock only if it has to wait (Deadline::
  // from_first_question): the clock cost an 8-byte allreduce about 20 ns, a twentieth of it.
  const bool fast = p.protocol == Protocol::kFastBox;
  const Deadline deadline = call_deadline_ != nullptr ? *call_deadline_
                            : fast ? Deadline::from_first_question(timeout) : Deadline(timeout);
  KOLO_PROBE(kExecutorEntered);
  Status status = executor->run(calls, n, deadline);
  last_waited_ = deadline.asked();
  KOLO_PROBE(kExecutorDone);
  if (status.code() == Code::kUnsupported) return status;  // refused before it ran (executor.h)
  if (status.ok()) return Status();
  // Which call failed, as every rank numbers it (collectives run in the same order on all):
  // the communicator's collective count, the collective, its count and dtype, and how long
  // this rank waited in it.
  const CollSpec& spec = calls[0].call.spec;
  const bool p2p = spec.kind == CollKind::kSend || spec.kind == CollKind::kRecv;
  const std::string waited =
      call_deadline_ != nullptr ? std::string()
                                : str_cat(", failed after ", fixed_decimals(std::max(0.0, timeout - deadline.remaining_seconds()), 2), " s");
  return env_.fail(status.with_context(
      p2p ? str_cat(coll_name(spec.kind), " of ", spec.count, " x ", dtype_name(spec.dtype), " with rank ", spec.peer,
                    waited, ": ")
          : str_cat("collective call ", calls[0].call.seq, " (",
                    coll_name(spec.kind), " of ", spec.count, " x ", dtype_name(spec.dtype),
                    n > 1 ? str_cat(", first of a group of ", n) : std::string(), waited, "): ")));
}

}  // namespace kolo
