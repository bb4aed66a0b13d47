// The planner and the executors of one communicator, for calls whose set-up is done: each
// call is lowered (AVG as SUM and a divisor), planned (cached), refused before it runs
// where its executor cannot compress it, given its message tags in call order (host
// calls), and run on the executor its Plan names. The communicator runs every call through
// it, after the device set-up and buffer sharing a device call needs; the device_staged
// executor runs the host calls of its chunks through it from its own thread (HostRunner,
// engine/executors/executor.h), under the same call lock, instead of calling back into the
// communicator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/collective.h"
#include "engine/executors/executor.h"
#include "engine/planner/plan.h"
#include "support/call_lock.h"
#include "support/clock.h"
#include "support/status.h"

namespace kolo {

class CallRunner final : public HostRunner {
 public:
  struct Env {
    int rank = 0;
    int size = 1;
    const PlanContext* plan_context = nullptr;
    const std::unique_ptr<Executor>* executors = nullptr;  // kExecutorCount rows, null where one cannot run
    double timeout_seconds = 300;
    // The communicator's failure state: usable() is its first error again (or an abort),
    // fail() records one and returns it.
    std::function<Status()> usable;
    std::function<Status(Status)> fail;
  };
  explicit CallRunner(Env env);

  // One call at a time per communicator: every caller of run() holds it.
  CallLock& lock() { return lock_; }

  // AVG is a sum divided by the communicator size on the way out, for every executor.
  CollCall lowered(const CollCall& call) const;
  // Plans (cached; a call whose plan is set keeps it) and runs calls[0..n), lowered and
  // prepared (a device call's set-up done and spec.registered set), n > 1 as one group;
  // `grouped`: planned as one program.
  // Before the first of a run: begin(). The caller holds lock().
  void begin();
  Status run(PlannedCall* calls, size_t n, bool grouped);
  // HostRunner: host calls of the device_staged executor, from its thread.
  Status run_host(const CollCall* calls, size_t n, const std::shared_ptr<const Plan>* plans) override;

  // The small-call lane. A host call without options that plan() sent to the fast boxes
  // (Protocol::kFastBox, the planner's choice for a small one-host call) is kept after it
  // ran, as called, lowered and planned, under its LaneKey; the same call again (the C API
  // asks with the key before it builds anything) runs from there: not built, checked,
  // lowered or planned again, with its tags, executor, op signatures and flight record as
  // on the whole path. kLanes keys at a time (a solver's dot product and norm alternate);
  // drop_plans() empties it. The caller holds lock().
  static constexpr int kLanes = 4;
  void arm_lane(const CollCall& as_called, const PlannedCall& ran);
  int lane_of(const LaneKey& key) const;  // -1: no lane holds it
  const CollSpec& lane_spec(int lane) const { return lanes_[lane].as_called; }
  Status run_lane(int lane, const void* send, void* recv, uint64_t seq);

  const Plan& plan_for(const CollSpec& spec, bool grouped);
  void drop_plans();  // the PlanContext changed: every cached plan is stale
  // Whether the planned executor runs a compressed call (else a refusal, alike on every rank).
  Status check_compression(const PlannedCall& call) const;
  // The plan the last call ran with (a group: its last call's; null after an empty call).
  const Plan* last_plan() const { return ran_plan_; }
  // Whether the last call waited past spinning (its deadline was asked, Deadline::asked): a
  // call that did not waited some hundred microseconds at most.
  bool last_call_waited() const { return last_waited_; }
  // A deadline for the one call the calling thread runs now (a split's, an init's barrier);
  // null: KOLO_TIMEOUT from when the call starts.
  void set_call_deadline(const Deadline* deadline) { call_deadline_ = deadline; }
  void set_timeout(double seconds) { env_.timeout_seconds = seconds; }  // the caller holds lock()
  const Deadline* call_deadline() const { return call_deadline_; }

 private:
  Executor* executor_of(const Plan& plan) const { return env_.executors[static_cast<int>(plan.executor)].get(); }
  uint64_t next_tag_base(const CollSpec& spec);
  Status execute(const PlannedCall* calls, size_t n);
  void bound_plan_cache();

  Env env_;
  CallLock lock_;
  const Deadline* call_deadline_ = nullptr;
  uint32_t collective_seq_ = 0;
  std::vector<uint32_t> send_seq_, recv_seq_;  // point-to-point, per peer
  // The plan cache; the last lookup is remembered so that a repeated call costs a
  // comparison, not a key (an 8-byte one-host allreduce takes about a microsecond).
  std::map<std::string, Plan> plans_;
  Plan local_plan_;  // the last one-host plan (not cached: it costs a comparison to make)
  Algorithm logged_local_ = Algorithm::kAuto;  // INFO logs a one-host plan when it changes
  CollKind logged_local_kind_ = CollKind::kBarrier;
  Protocol logged_local_protocol_ = Protocol::kSteps;
  CollSpec last_spec_;
  bool last_grouped_ = false;
  const Plan* last_plan_ = nullptr;  // the memo
  const Plan* ran_plan_ = nullptr;
  bool last_waited_ = true;
  std::vector<PlannedCall> host_calls_;  // run_host's
  struct Lane {
    LaneKey key;
    CollSpec as_called;  // the flight recorder's spec (AVG still AVG)
    Plan plan;           // a copy: local_plan_ is the last one-host plan, not this one's
    PlannedCall call;    // lowered; call.plan points at plan
  };
  Lane lanes_[kLanes];
  int lanes_armed_ = 0;
  int next_lane_ = 0;  // the one armed next once all are (round robin)
  bool lane_ran_ = false;  // INFO logs the first call the lane ran
};

}  // namespace kolo
