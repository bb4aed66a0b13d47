// Executors run Plans. They are the rows of one table (executor_table.cc), indexed by the
// Plan's ExecutorKind: the schedule executor over the fabric's links, and the one-host
// executor over staging slots in shared memory; device staging, device IPC kernels and
// NCCL come as further rows. Each communicator holds one instance per row that can run
// on it (none where it cannot: the one-host executor needs the whole communicator in one
// shared-memory domain). The communicator never names a row; the Plan does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "engine/collective.h"
#include "engine/planner/plan.h"
#include "support/clock.h"
#include "support/status.h"
#include "transport/fabric.h"
#include "transport/shared_domain.h"

namespace kolo {

// One call as the executor gets it: lowered (no AVG), with its plan and message tags.
struct PlannedCall {
  const Plan* plan = nullptr;
  CollCall call;
  uint64_t tag_base = 0;  // added to every step tag of this call (unique per call)
};

// What a communicator lends its executors.
struct ExecutorEnv {
  int rank = 0;
  int size = 1;
  Fabric* fabric = nullptr;
  SharedDomain* shared = nullptr;  // null unless every rank shares memory with this one
  // Runs host calls (one, or n as a group) on the communicator now, in its call order;
  // for executors that wrap a host plan (device staging).
  std::function<Status(const CollCall* calls, size_t n)> run_host;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs calls[0..n) as one program (n > 1 only for executors that concatenate, which
  // plan() guarantees for groups); blocks until done or failed.
  virtual Status run(const PlannedCall* calls, size_t n, const Deadline& deadline) = 0;
  // Executors that finish work after run() returns (stream-ordered device calls): wait
  // until all of it is done, so that a blocking call that follows keeps the call order.
  virtual Status drain(const Deadline& deadline) { return Status(); }
  // Whether drain() has anything to wait for (cheap: asked before every blocking call).
  virtual bool busy() const { return false; }
};

struct ExecutorRow {
  ExecutorKind kind;
  const char* name;
  // Null when this executor cannot run on the communicator env describes.
  std::unique_ptr<Executor> (*create)(const ExecutorEnv& env);
};

const ExecutorRow& executor_row(ExecutorKind kind);

// The rows (each defined beside its executor).
std::unique_ptr<Executor> create_schedule_executor(const ExecutorEnv& env);
std::unique_ptr<Executor> create_local_executor(const ExecutorEnv& env);
std::unique_ptr<Executor> create_staged_device_executor(const ExecutorEnv& env);

}  // namespace kolo
