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

#include "engine/collective.h"
#include "engine/local/local_collectives.h"
#include "engine/schedule.h"
#include "support/status.h"
#include "topology/graph.h"
#include "transport/bootstrap/store.h"
#include "transport/fabric.h"
#include "transport/shm/shm_domain.h"

namespace kolo {

// The rendezvous store as the communicators of one job share it: the client, and the
// server when this process hosts it (it must outlive every communicator that uses it).
struct StoreSession {
  std::unique_ptr<StoreServer> server;  // null unless this process hosts the store
  std::unique_ptr<StoreClient> client;
  std::string secret;  // raw bytes; empty = unauthenticated
};

struct CommIdentity {
  std::string prefix;  // store key prefix, unique per communicator
  int rank = 0;
  int size = 1;
};

class Communicator {
 public:
  static Result<std::unique_ptr<Communicator>> create(std::shared_ptr<StoreSession> store, CommIdentity id);
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

  // Runs one call, or several together (a group); blocks until done.
  Status run(const CollCall& call);
  Status run_group(const std::vector<CollCall>& calls);
  // Ranks with the same color (>= 0) form a new communicator; color < 0 gets null.
  Result<std::unique_ptr<Communicator>> split(int color, int key);
  // A new communicator over the same ranks, made through the store only (no collective on
  // this one, so it may run while other calls do). Every rank must call it with the same
  // name, once per name (the Horovod runtime's private communicator, for example).
  Result<std::unique_ptr<Communicator>> duplicate(const std::string& name);
  // From any thread: makes the running call and all later ones fail with kAborted.
  void abort();

 private:
  Communicator(std::shared_ptr<StoreSession> store, CommIdentity id) : store_(std::move(store)), id_(std::move(id)) {}
  Status read_environment();
  Status connect(const Deadline& deadline);
  Status connect_shared_memory(const std::vector<int>& members, const Deadline& deadline);
  // The one-host path: the whole communicator shares memory and the call has an algorithm there.
  bool runs_locally(const CollCall& call) const;
  Algorithm forced_for(const CollSpec& spec) const;  // the call's algorithm, else KOLO_ALGO
  CollCall lowered(const CollCall& call) const;       // AVG as SUM and a divisor
  Status run_local(const CollCall& call);
  Status usable();  // the first error again once the communicator has failed
  Status exchange_hosts(const Deadline& deadline);
  Status exchange_topology(const Deadline& deadline);
  const Schedule& schedule_for(const CollSpec& spec);
  uint64_t next_tag_base(const CollSpec& spec);
  Status fail(Status status);

  std::shared_ptr<StoreSession> store_;
  CommIdentity id_;
  int local_rank_ = 0, local_size_ = 1, cross_rank_ = 0, cross_size_ = 1;
  std::vector<int> host_of_rank_;  // rank -> index into topology_.hosts
  std::vector<bool> shm_allowed_;  // per rank: its KOLO_TRANSPORTS allows shm
  ClusterTopology topology_;
  std::unique_ptr<shm::Domain> domain_;  // declared before fabric_: its links point into it
  std::unique_ptr<LocalCollectives> local_;  // set when every rank is in domain_
  std::unique_ptr<Fabric> fabric_;
  std::mutex run_mutex_;  // one call at a time per communicator
  Status failed_;
  uint32_t collective_seq_ = 0;
  std::vector<uint32_t> send_seq_, recv_seq_;  // point-to-point, per peer
  uint32_t split_seq_ = 0;
  std::map<std::string, Schedule> schedules_;  // plan cache
  std::vector<char> scratch_;
  // From the environment, read once at creation (not on every call).
  size_t chunk_bytes_ = 1 << 20;
  Algorithm forced_algorithm_ = Algorithm::kAuto;
  double timeout_seconds_ = 300;
  bool allow_shm_ = true, allow_tcp_ = true;  // KOLO_TRANSPORTS
  size_t shm_chunk_bytes_ = 1 << 20;
  bool shm_single_copy_ = true;
};

}  // namespace kolo
