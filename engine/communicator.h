// A communicator: a set of ranks, their links, and the collectives that run over them.
// Host-memory calls block until complete. After a failure the communicator is unusable:
// every later call returns the first error (as KOLO_ERR_ABORTED), never a hang.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/call_runner.h"
#include "engine/collective.h"
#include "engine/bootstrap_net.h"
#include "engine/connect.h"
#include "engine/executors/executor.h"
#include "engine/flight_recorder.h"
#include "engine/planner/comm_settings.h"
#include "engine/planner/plan.h"
#include "support/status.h"
#include "topology/graph.h"
#include "transport/bootstrap/store.h"

namespace kolo {

// The rendezvous store as the communicators of one job share it: the client, and the
// server when this process hosts it (it must outlive every communicator that uses it).
struct StoreSession {
  // Null unless this process hosts the store; shared by the communicators of this process
  // that rank 0 hosts there (comm_store.h), stopped when the last of them goes.
  std::shared_ptr<StoreServer> server;
  std::unique_ptr<StoreClient> client;
  std::string secret;  // raw bytes; empty = unauthenticated
};

struct MembershipRequest;  // engine/elastic.h

// Where a communicator stands among the rebuilds of an elastic job (engine/elastic.h).
struct Lineage {
  int epoch = 0;                     // 0 at init, +1 per shrink or rebuild
  std::vector<std::string> members;  // each rank's worker id, stable across epochs
  int64_t joined = 0;                // joiner tickets let in up to this epoch
  bool elastic_world = false;        // the world of an elastic job (or a rebuild of it): may rebuild
};

struct CommIdentity {
  std::string prefix;  // store key prefix, unique per communicator
  int rank = 0;
  int size = 1;
};

class Communicator;
// A communicator made from another (split, dup): what it takes from it instead of
// exchanging again (Communicator::inherit).
struct Inherited {
  const Communicator* parent = nullptr;
  std::vector<int> parent_rank;  // new rank -> the parent's rank
};

class Communicator {
 public:
  // Collective over id's ranks; `bootstrap` gives only the address of the communicator's own
  // store (comm_store.h). `within`: the deadline of the whole creation (a split's), else
  // KOLO_TIMEOUT from now.
  static Result<std::unique_ptr<Communicator>> create(std::shared_ptr<StoreSession> bootstrap, CommIdentity id,
                                                      const Deadline* within = nullptr,
                                                      const Inherited* from = nullptr);
  ~Communicator();

  int rank() const { return id_.rank; }
  int size() const { return id_.size; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  int cross_rank() const { return cross_rank_; }
  int cross_size() const { return cross_size_; }
  // Every host's topology, gathered at creation (hosts in the order of their first rank),
  // for the planner; host_of(rank) indexes topology().hosts.
  const ClusterTopology& topology() const { return topology_; }
  int host_of(int rank) const { return host_of_rank_[rank]; }

  // Runs one call, or several together (a group). Host buffers: blocks until done. Device
  // buffers: enqueued on the call's stream, in call order with every other call.
  Status run(const CollCall& call);
  Status run_group(const std::vector<CollCall>& calls);
  // The small-call lane (engine/call_runner.h): runs the host call known by `key` with
  // these buffers if a lane holds it (true; *status is its result), as run() would; false
  // if none does, having run nothing, and the caller makes the call the whole way. The
  // buffers must be host memory, and checked as the C API checks them.
  bool run_on_lane(const LaneKey& key, const void* send, void* recv, Status* status);
  // `within`: a deadline other than KOLO_TIMEOUT from now (a split's, an init's).
  Status barrier(const Deadline* within = nullptr);
  // The plan the last call ran with (a group: its last call's; null before any and after
  // an empty call), for the runtime's timeline. Only meaningful on the thread that ran it,
  // until the next call.
  const Plan* last_plan() const { return runner_ ? runner_->last_plan() : nullptr; }
  // The number of the last collective called (1, 2, ... in call order, alike on every rank;
  // the flight recorder's and the errors' "collective call N"; the timeline's seq).
  uint64_t last_call_seq() const { return collectives_; }
  // Every later call's waits last at most `seconds` (KOLO_TIMEOUT until then); any thread.
  void set_timeout(double seconds);
  // Writes the flight recorder's ring to `folder` ("" = KOLO_TRACE_DIR); the file's path.
  Result<std::string> dump_trace(const std::string& folder, const std::string& reason = "request") const;
  // Whether `call` can run here as planned, without running it: an error (the same on
  // every rank, plans being alike) for what the chosen executor refuses, such as a
  // compressed allreduce across hosts. For callers that must not lose the communicator
  // to a refusal (the runtime).
  Status check_runnable(const CollCall& call);
  // The planner's view of this communicator (for plan()).
  const PlanContext& plan_context() const { return plan_context_; }
  // Ranks with the same color (>= 0) form a new communicator; color < 0 gets null.
  Result<std::unique_ptr<Communicator>> split(int color, int key);
  // A new communicator over the same ranks, made through the store only (no collective on
  // this one, so it may run while other calls do). Every rank must call it with the same
  // name, once per name (the Horovod runtime's private communicator, for example).
  Result<std::unique_ptr<Communicator>> duplicate(const std::string& name);
  // Collective: every rank registers one device buffer of its own (kolo_mem_register); the
  // k-th registration of every rank forms window k (transport/ipc/ipc_windows.h). Returns the
  // window's id. Device calls whose buffers lie in a window at the same offset on every
  // rank read them in place on one host.
  Result<int> register_memory(void* ptr, size_t bytes);
  // Collective: waits for this communicator's device work, then unmaps the window on
  // every rank; the owner may free the buffer once it returns.
  Status deregister_memory(int id);
  // Elastic (engine/elastic.cc). Collective over the ranks that take part, on a failed
  // communicator too: a new one without the ranks in `exclude` (exclude_given: every caller
  // names the same) or without those that are gone or do not come within KOLO_TIMEOUT.
  Result<std::unique_ptr<Communicator>> shrink(const std::vector<int>& exclude, bool exclude_given);
  // An elastic world's next epoch: the ranks that take part and the workers waiting to join.
  Result<std::unique_ptr<Communicator>> rebuild();
  // Workers waiting to join an elastic world (0 for other communicators). Not collective.
  Result<int> pending_joiners();
  // Whether kolorun asks this rank to leave the elastic world (its host was removed). Not collective.
  Result<bool> leaving();
  // How long each step of this communicator's creation took, in seconds (bench/scale reads
  // them; the INIT log prints them): its own store, the start-up exchange's tree
  // (bootstrap_net.h), hosts and transports, topology, transports and links, the network
  // measurement, the closing barrier.
  struct StartupTimes {
    double store = 0, tree = 0, hosts = 0, topology = 0, connect = 0, calibrate = 0, barrier = 0;
  };
  const StartupTimes& startup_times() const { return startup_; }
  const Lineage& lineage() const { return lineage_; }
  int epoch() const { return lineage_.epoch; }
  void set_lineage(Lineage lineage) { lineage_ = std::move(lineage); }
  // From any thread: makes the running call and all later ones fail with kAborted.
  void abort();
  // From any thread: the first failure, including one that happened after a device call
  // returned (ok while the communicator works).
  Status async_error() const;

 private:
  Communicator(std::shared_ptr<StoreSession> store, CommIdentity id) : store_(std::move(store)), id_(std::move(id)) {}
  Status read_environment();
  Result<std::unique_ptr<Communicator>> made_with_all(Result<std::unique_ptr<Communicator>> made,
                                                      const Deadline& deadline);
  // `all_joined`: every rank has set its live key (the start-up exchange ran; each enters it
  // after setting it), so that a live key missing means that rank left: the set-up's waits
  // ask (CommSite::left) instead of waiting for it to their deadline.
  Status connect(const Deadline& deadline, const std::vector<std::string>& transports, bool all_joined);
  // The first error again once the communicator has failed (or was aborted); inline, as every
  // call asks before it runs.
  Status usable() { return failed_.ok() && !connections_->aborted() ? Status() : unusable(); }
  Status unusable();
  // Hosts and transports in one exchange; the transports' entries are returned for connect.
  Result<std::vector<std::string>> exchange_hosts(BootstrapNet& net, const Deadline& deadline);
  Status exchange_topology(BootstrapNet& net, const Deadline& deadline);
  void inherit(const Inherited& from);
  void place_on_hosts();
  Status calibrate_network(const Deadline& deadline);
  Status run_calls(const CollCall* calls, size_t n);     // run and run_group: run_recorded, and a failure's dump
  void dump_first_failure(const Status& status);  // after a call of the user's (KOLO_TRACE_DIR)
  Status run_recorded(const CollCall* calls, size_t n);  // the flight recorder around run_locked
  Status run_locked(const CollCall* calls, size_t n, uint64_t first_seq);
  Status drain_device(bool* waited = nullptr);  // *waited: device work was still running
  Status room_for_device(const CollCall* calls, size_t n);  // before a device call: make_room
  Status set_up_device(const CollCall& call);     // Executor::set_up, before planning
  // The running call's deadline: barrier(within)'s, else KOLO_TIMEOUT from now.
  Deadline call_deadline() const {
    return runner_->call_deadline() != nullptr ? *runner_->call_deadline() : Deadline(timeout_seconds_);
  }
  Status fail(Status status);
  // Sets spec.registered for a device call whose buffers lie in registered windows.
  void mark_registered(CollCall& call) const;
  Status share_buffers(CollCall& call);  // before planning a single device call
  Result<std::unique_ptr<Communicator>> next_epoch(MembershipRequest request, const std::string& prefix);

  std::shared_ptr<StoreSession> store_;
  // This host's ranks' store (comm_store.h), from the topology exchange to the end of the
  // init (a split's members use store_ instead).
  std::shared_ptr<StoreSession> local_store_;
  // Where this communicator's live keys are (the elastic job's store, else store_): a
  // failure names the ranks gone from there (fail).
  std::shared_ptr<StoreSession> liveness_;
  static constexpr double kNameGoneSeconds = 0.75;
  CommIdentity id_;
  int local_rank_ = 0, local_size_ = 1, cross_rank_ = 0, cross_size_ = 1;
  std::vector<int> host_of_rank_;  // rank -> index into topology_.hosts
  std::vector<std::string> host_ids_;       // rank -> its host's identity (topology/host_identity.h)
  std::vector<std::string> transports_of_;  // rank -> the transports it allows (Connections::transports_entry)
  ClusterTopology topology_;
  std::unique_ptr<Connections> connections_;  // before executors_: they use its links
  IpcWindows windows_;  // registered buffers; before executors_, which read them
  std::unique_ptr<Executor> executors_[kExecutorCount];  // null where a row cannot run here
  std::vector<Executor*> queueing_;  // those that may hold queued device work (drain_device)
  PlanContext plan_context_;
  PlannerParams local_params_;  // the one-host model scaled to this host (plan_context_ points here)
  // The planner and the executors: plans, tags, the call lock (engine/call_runner.h).
  std::unique_ptr<CallRunner> runner_;
  Status failed_;  // written under the call lock and failed_mutex_, read under either
  mutable std::mutex failed_mutex_;
  uint32_t split_seq_ = 0;
  uint32_t shrink_seq_ = 0;
  Lineage lineage_;  // members "0".."size-1" at creation
  StartupTimes startup_;
  std::vector<PlannedCall> group_;
  // From the environment, read once at creation (not on every call): the settings the
  // planner and the executors run by (engine/planner/comm_settings.h).
  CommSettings settings_;
  std::atomic<double> timeout_seconds_{300};  // KOLO_TIMEOUT, or set_timeout's
  bool dump_on_failure_ = false;  // KOLO_TRACE_DIR is set
  // The flight recorder (null: KOLO_TRACE_CALLS=0), from the end of the init on; the
  // collectives called so far, counted with or without it.
  std::unique_ptr<FlightRecorder> recorder_;
  uint64_t collectives_ = 0;
  std::atomic<bool> dumped_failure_{false};  // one failure dump, whichever thread fails first
  std::atomic<bool> failure_settled_{false};  // the first failure's cause is named (fail() returned)
  std::atomic<bool> in_call_{false};  // a call of the user's runs (run_calls, run_on_lane): its failure is said in the store
  bool made_ = false;  // create() finished: a failure later lingers for the others (~Communicator)
};

}  // namespace kolo
