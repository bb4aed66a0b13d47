#include "engine/executors/schedule/schedule_executor.h"

#include <sched.h>

#include <cstring>

#include "kernels/host_kernels.h"
#include "engine/executors/executor.h"
#include "support/log.h"

namespace kolo {
namespace {

enum class State : uint8_t { kWaiting, kInFlight, kDone };
constexpr int kSpinsBeforeSleep = 200;

class Run {
 public:
  Run(const Schedule& s, Fabric& f, const std::vector<CallBinding>& calls, char* scratch, const Deadline& d)
      : s_(s), fabric_(f), calls_(calls), scratch_(scratch), deadline_(d),
        state_(s.steps.size(), State::kWaiting), requests_(s.steps.size()) {}

  Status run() {
    size_t first_open = 0;  // steps before it are all done
    int idle_spins = 0;
    while (true) {
      bool changed = false;
      for (size_t i = first_open; i < s_.steps.size(); ++i) {
        if (state_[i] == State::kWaiting && ready(i)) {
          KOLO_TRY(start(i));
          changed = true;
        }
        if (state_[i] == State::kInFlight && requests_[i].done) {
          if (!requests_[i].status.ok()) return step_error(i, requests_[i].status);
          state_[i] = State::kDone;
          changed = true;
        }
      }
      while (first_open < s_.steps.size() && state_[first_open] == State::kDone) ++first_open;
      if (first_open == s_.steps.size()) return Status();
      if (fabric_.aborted()) return error(Code::kAborted, "communicator aborted by kolo_comm_abort");
      Status progressed = fabric_.progress();
      if (!progressed.ok()) {
        return progressed.with_context(str_cat("rank ", fabric_.rank(), ", ", schedule_algorithm_name(s_), " step ", first_open, ": "));
      }
      if (changed) continue;
      if (deadline_.expired()) return step_error(first_open, error(Code::kTimeout, "timed out (KOLO_TIMEOUT)"));
      if (any_completed(first_open)) continue;
      // Spin briefly before sleeping in poll(): a reply usually comes within microseconds,
      // and a poll() wake-up costs more than that.
      // sched_yield lets other ranks on the same cores run (oversubscribed hosts).
      if (++idle_spins < kSpinsBeforeSleep) {
        sched_yield();
        continue;
      }
      idle_spins = 0;
      fabric_.wait_for_activity(deadline_.remaining_ms(100));
    }
  }

 private:
  bool ready(size_t i) const {
    for (int dep : s_.steps[i].deps) {
      if (state_[dep] != State::kDone) return false;
    }
    return true;
  }

  bool any_completed(size_t from) const {
    for (size_t i = from; i < s_.steps.size(); ++i) {
      if (state_[i] == State::kInFlight && requests_[i].done) return true;
    }
    return false;
  }

  char* address(const Slice& slice, int call) const {
    const CallBinding& c = calls_[call];
    char* base = slice.buffer == kBufInput ? const_cast<char*>(static_cast<const char*>(c.input))
                 : slice.buffer == kBufOutput ? static_cast<char*>(c.output)
                                               : scratch_;
    return base == nullptr ? nullptr : base + slice.offset;
  }

  Status start(size_t i) {
    const Step& step = s_.steps[i];
    const CallBinding& call = calls_[step.call];
    // A link is made when a step first needs it (lazy links: Fabric::connect).
    if (step.peer >= 0) {
      Status linked = fabric_.connect(step.peer, deadline_);
      if (!linked.ok()) return step_error(i, linked);
    }
    switch (step.kind) {
      case StepKind::kSend: {
        state_[i] = State::kInFlight;
        Status s = fabric_.link(step.peer)->post_send(call.tag_base + step.tag, address(step.srcs[0], step.call),
                                                       step.srcs[0].bytes, &requests_[i]);
        return s.ok() ? s : step_error(i, s);
      }
      case StepKind::kRecv: {
        state_[i] = State::kInFlight;
        Status s = fabric_.link(step.peer)->post_recv(call.tag_base + step.tag, address(step.dst, step.call),
                                                       step.dst.bytes, &requests_[i]);
        return s.ok() ? s : step_error(i, s);
      }
      case StepKind::kCopy: {
        state_[i] = State::kDone;
        Scale scale = scale_for(step.scale, call);
        char* dst = address(step.dst, step.call);
        const char* src = address(step.srcs[0], step.call);
        if (step.count == 0 || (dst == src && scale.identity())) return Status();
        Status s = scale_copy(dst, src, step.count, step.dtype, scale);
        return s.ok() ? s : step_error(i, s);
      }
      case StepKind::kReduce: {
        state_[i] = State::kDone;
        if (step.count == 0) return Status();
        const void* srcs[kMaxReduceInputs];
        for (size_t k = 0; k < step.srcs.size(); ++k) srcs[k] = address(step.srcs[k], step.call);
        Status s = reduce_into(address(step.dst, step.call), srcs, static_cast<int>(step.srcs.size()), step.count,
                               step.dtype, step.op, scale_for(step.scale, call));
        return s.ok() ? s : step_error(i, s);
      }
      case StepKind::kSignal:
      case StepKind::kWait:
        // Shared-memory progress belongs to recorded one-host programs, which the
        // one-host executor runs; a schedule never holds it.
        return step_error(i, error(Code::kInternal, "a schedule holds a one-host signal or wait step"));
    }
    return Status();
  }

  Status step_error(size_t i, const Status& cause) const {
    const Step& step = s_.steps[i];
    const char* kind = step.kind == StepKind::kSend   ? "send to"
                       : step.kind == StepKind::kRecv ? "recv from"
                       : step.kind == StepKind::kReduce ? "reduce" : "copy";
    std::string where = str_cat("rank ", fabric_.rank(), ", ", schedule_algorithm_name(s_), " step ", i, " (", kind);
    if (step.peer >= 0) where += str_cat(" rank ", step.peer);
    return cause.with_context(where + "): ");
  }

  const Schedule& s_;
  Fabric& fabric_;
  const std::vector<CallBinding>& calls_;
  char* scratch_;
  const Deadline& deadline_;
  std::vector<State> state_;
  std::vector<TransferRequest> requests_;
};

}  // namespace

Status execute_schedule(const Schedule& schedule, Fabric& fabric, const std::vector<CallBinding>& calls,
                        char* scratch, const Deadline& deadline) {
  Run run(schedule, fabric, calls, scratch, deadline);
  Status status = run.run();
  if (!status.ok() && fabric.aborted()) {
    // Our own abort shut the sockets; what the links saw after that is not the cause.
    status = error(Code::kAborted, "communicator aborted by kolo_comm_abort");
  }
  // On failure, links may still hold this run's requests and buffers: close them while the
  // run is alive, so nothing writes into freed memory later. (The communicator is dead now.)
  if (!status.ok()) fabric.shutdown(/*after_failure=*/true);
  return status;
}

}  // namespace kolo

namespace kolo {
namespace {

// The executor row: concatenates the calls' schedules into one program (a group runs as
// one), binds their buffers and runs it.
class ScheduleExecutor final : public Executor {
 public:
  explicit ScheduleExecutor(Fabric& fabric) : fabric_(fabric) {}

  Status run(const PlannedCall* calls, size_t n, const Deadline& deadline) override {
    const Schedule* program = &calls[0].plan->schedule;
    Schedule combined;
    if (n > 1) {
      combined.algorithms.clear();
      for (size_t i = 0; i < n; ++i) append_schedule(combined, calls[i].plan->schedule);
      program = &combined;
    }
    bindings_.clear();
    for (size_t i = 0; i < n; ++i) {
      const CollCall& c = calls[i].call;
      bindings_.push_back(CallBinding{c.send, c.recv, c.prescale, c.postscale, calls[i].tag_base});
    }
    if (scratch_.size() < program->scratch_bytes) scratch_.resize(program->scratch_bytes);
    return execute_schedule(*program, fabric_, bindings_, scratch_.data(), deadline);
  }

 private:
  Fabric& fabric_;
  std::vector<CallBinding> bindings_;
  std::vector<char> scratch_;
};

}  // namespace

// Every communicator has links (or none to make, alone): the schedules always run.
bool declare_schedule_executor(const PlannerInputs&, PlanContext&) { return true; }

MadeExecutor create_schedule_executor(const ExecutorEnv& env) {
  return MadeExecutor(std::make_unique<ScheduleExecutor>(*env.fabric));
}

}  // namespace kolo
