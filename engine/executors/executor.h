// Executors run Plans. They are the rows of one table (executor_table.cc), indexed by the
// Plan's ExecutorKind: the schedule executor over the fabric's links, the one-host executor
// over staging slots in shared memory, compressed calls over the links, device staging
// through pinned host memory, kernels over peers' device memory on one host (device_ipc),
// and NCCL (KOLO_BACKEND=nccl). Each communicator holds one instance per row that can run
// on it (none where it cannot: the one-host executor needs the whole communicator in one
// shared-memory domain). The communicator never names a row; the Plan does.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/collective.h"
#include "engine/planner/plan.h"
#include "support/clock.h"
#include "support/status.h"
#include "transport/bootstrap/store.h"
#include "transport/fabric.h"
#include "transport/ipc/ipc_windows.h"
#include "transport/shared_domain.h"

namespace kolo {

// One call as the executor gets it: lowered (no AVG), with its plan and message tags.
struct PlannedCall {
  const Plan* plan = nullptr;
  CollCall call;
  uint64_t tag_base = 0;  // added to every step tag of this call (unique per call)
};

// What an executor that wraps host plans (device staging) runs them with: the planner and
// the host executors of its communicator (engine/call_runner.h), in call order, under the
// communicator's call lock. Host calls: one, or n as a group; plans[i], where given, is the
// Plan calls[i] runs with (the one its device call's Plan recorded), else it is planned.
class HostRunner {
 public:
  virtual Status run_host(const CollCall* calls, size_t n, const std::shared_ptr<const Plan>* plans) = 0;

 protected:
  ~HostRunner() = default;
};

// What a communicator lends its executors.
struct ExecutorEnv {
  int rank = 0;
  int size = 1;
  Fabric* fabric = nullptr;
  SharedDomain* shared = nullptr;  // null unless every rank shares memory with this one
  // For executors that wrap a host plan (device staging).
  HostRunner* host = nullptr;
  // Bytes that rank 0 gives and every rank gets, through the rendezvous store under this
  // communicator's name (other ranks pass anything); for NCCL's unique id.
  std::function<Result<std::string>(const std::string& name, const std::string& value)> from_rank0;
  // Fails the communicator from an executor's own thread: later calls and
  // kolo_comm_get_async_error report `status`.
  std::function<void(Status status)> fail;
  // The communicator's settings (read once: no executor reads the environment), its
  // timeout (kolo_comm_set_timeout changes it while executors run) and what its planner
  // knows (which rows run, what device_ipc's set-up found).
  const CommSettings* settings = nullptr;
  const std::atomic<double>* timeout_seconds = nullptr;
  const PlanContext* plan_context = nullptr;
  double timeout() const { return timeout_seconds->load(std::memory_order_relaxed); }
  // The rendezvous store and this communicator's key prefix in it (executors that set
  // up memory with their peers: device IPC regions).
  StoreClient* store = nullptr;
  std::string store_prefix;
  // The user buffers registered with every rank of the host (kolo_mem_register), which
  // device_ipc reads in place; owned by the communicator, outliving its executors.
  const IpcWindows* windows = nullptr;
  // Which host each rank is on (host indices, as PlanContext::host_of_rank).
  const std::vector<int>* host_of_rank = nullptr;
};

// What each executor declares, so that the communicator never names one: what it tells
// the planner (describe, set_up), whether its work outlives run() (queues_device_work),
// and which wire-typed calls it compresses (the others are refused before they run).
class Executor {
 public:
  virtual ~Executor() = default;
  // Before the communicator plans a device call while ctx.device_setup is kNotYet (every
  // rank makes the same first device call): sets up what this executor needs, if the call
  // is one it would run, and writes what it learned into ctx (device_setup, the facts
  // device_ipc_barrier decides from). Returns whether ctx changed, making earlier plans
  // stale.
  virtual Result<bool> set_up(const CollCall& call, const Deadline& deadline, PlanContext& ctx) { return false; }
  // Before a single device call is planned, where plan() would read its buffers in place
  // if the peers could (device_ipc_worth_sharing): makes them readable without
  // kolo_mem_register (device_ipc: transport/ipc/ipc_peer_buffers.h) and says whether
  // they are, alike on every rank. Collective over the host's ranks in call order; an
  // error fails the communicator.
  virtual Result<bool> share_buffers(const CollCall& call, const Deadline& deadline) { return false; }
  // Whether work it takes may still run after run() returns (calls on device streams):
  // the communicator drains such executors before a blocking call.
  virtual bool queues_device_work() const { return false; }
  // Whether it runs `spec` with the spec's wire type; a compressed call planned on an
  // executor that does not is refused before anything runs, alike on every rank.
  virtual bool compresses(const CollSpec& spec) const { return false; }
  // Runs calls[0..n) as one program (n > 1 only for executors that concatenate, which
  // plan() guarantees for groups); blocks until done or failed.
  // An error with code kUnsupported means the calls were refused before anything was
  // enqueued or sent, alike on every rank: the communicator stays usable. Any other error
  // fails the communicator.
  virtual Status run(const PlannedCall* calls, size_t n, const Deadline& deadline) = 0;
  // Executors that finish work after run() returns (stream-ordered device calls): wait
  // until all of it is done, so that a blocking call that follows keeps the call order.
  virtual Status drain(const Deadline& deadline) { return Status(); }
  // Whether drain() has anything to wait for (cheap: asked before every blocking call).
  virtual bool busy() const { return false; }
  // Asked before every device call (calls[0..n), as the user made them), without the
  // communicator's call lock: waits until the executor could take these calls without
  // overfilling a stream. For work on a stream that only this communicator's own calls can
  // release (device staging's holds wait for host plans, which need the call lock): run()
  // may not wait for it, since it holds the lock, yet CUDA blocks an enqueue into a full
  // stream.
  virtual Status make_room(const CollCall* calls, size_t n, const Deadline& deadline) { return Status(); }
  // From any thread (kolo_comm_abort): end what runs on the executor's own threads.
  virtual void abort() {}
};

// A group of device calls must share one stream and one device; an error names the rank.
Status check_device_group(const PlannedCall* calls, size_t n, int rank);
// kolo's own device executors order their steps with host threads and numbers fixed at
// enqueue, which a CUDA graph would replay wrongly: a call on a capturing stream is an
// error naming the executor (not a silently wrong graph).
Status refuse_graph_capture(const CollCall& call, int rank, const char* executor);

// Where the buffers of a device call that peers would read in place lie in registered
// windows (allreduce: input and output; broadcast: the output, the one buffer every rank
// passes; allgather(v): the output, since in place each rank's input is at its own
// offset; reduce and reduce_scatter: the input). False where one is not in a
// window, or the collective has no zero-copy form. The communicator asks it to set
// spec.registered; device_ipc, to find the peers' buffers.
struct RegisteredBuffers {
  IpcWindows::Found send, recv;
};
bool find_registered(const CollCall& call, const IpcWindows& windows, int rank, int size, RegisteredBuffers* where);
// The same buffers as pointer and extent: [0] the input, [1] the output; null where peers
// do not read it, or the collective has no zero-copy form.
struct PeerReadBuffers {
  const void* ptr[2] = {nullptr, nullptr};
  size_t bytes[2] = {0, 0};
};
PeerReadBuffers peer_read_buffers(const CollCall& call, int size);

// What a row makes where it declared that it runs: an error when it was asked for and
// cannot (KOLO_BACKEND=nccl without NCCL), which fails the communicator's creation.
using MadeExecutor = Result<std::unique_ptr<Executor>>;

// A row: whether the executor runs on the communicator `in` describes, and what plan()
// must know of it, written into ctx (declare; engine/plan_inputs.h calls it, for a
// communicator and for kolo-plan alike); and how to make it where it runs.
struct ExecutorRow {
  ExecutorKind kind;
  const char* name;
  bool (*declare)(const PlannerInputs& in, PlanContext& ctx);
  MadeExecutor (*create)(const ExecutorEnv& env);
};

const ExecutorRow& executor_row(ExecutorKind kind);

// The rows (each defined beside its executor).
bool declare_schedule_executor(const PlannerInputs& in, PlanContext& ctx);
MadeExecutor create_schedule_executor(const ExecutorEnv& env);
bool declare_local_executor(const PlannerInputs& in, PlanContext& ctx);
MadeExecutor create_local_executor(const ExecutorEnv& env);
bool declare_staged_device_executor(const PlannerInputs& in, PlanContext& ctx);
MadeExecutor create_staged_device_executor(const ExecutorEnv& env);
bool declare_nccl_executor(const PlannerInputs& in, PlanContext& ctx);
MadeExecutor create_nccl_executor(const ExecutorEnv& env);
bool declare_ipc_device_executor(const PlannerInputs& in, PlanContext& ctx);
MadeExecutor create_ipc_device_executor(const ExecutorEnv& env);
bool declare_compressed_link_executor(const PlannerInputs& in, PlanContext& ctx);
MadeExecutor create_compressed_link_executor(const ExecutorEnv& env);

}  // namespace kolo
