// Elastic jobs: a communicator rebuilt from the ranks that are left, and from the workers
// that arrive, as a new membership epoch that every member agrees on through a store.
//
// The agreement (agree_membership) runs in a store that must outlive the ranks it drops:
// kolorun's (the job's store, kept open for the life of the process when KOLO_ELASTIC is
// set), else the communicator's own, which lives in its rank 0's process (a shrink that
// drops rank 0 then fails clearly). Each communicator marks each rank alive with a key
// owned by the rank's store connection (StoreClient::set_owned), so a process that dies
// is seen gone at once, not after a timeout. Protocol and guarantees: docs/elastic.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/communicator.h"
#include "support/clock.h"
#include "support/status.h"

namespace kolo {

// The job's store session kept for elastic rebuilds (null unless KOLO_ELASTIC is 1 or
// join and the world came from the environment).
std::shared_ptr<StoreSession> elastic_job_store();
void keep_elastic_job_store(std::shared_ptr<StoreSession> session);

// Keys of the elastic world in the job's store (one elastic world per job).
std::string elastic_epoch_prefix(int epoch);   // "elastic/<epoch>": that epoch's agreement
std::string live_key(const std::string& comm_prefix, int rank);  // owned by the rank's connection
std::string live_prefix(const std::string& comm_prefix);  // live_key's without the rank

// `failure` with the ranks of the communicator that are gone named first: those of its
// `size` ranks whose live key (under `live_keys`) `liveness` lacks (exited, killed, never started), asked within
// `seconds`. What a rank sees of a failure is often a survivor's echo (its neighbour closed
// its links, a host peer gave up); the live keys say which rank went. `failure` unchanged
// when every rank is alive or the store cannot tell; when the store is gone and rank 0's
// process hosted it (`store_of_rank0`), rank 0 is named. With every rank alive (one stuck, a
// link cut), what the first rank to fail saw is quoted, unless that was `me`.
// Says in the store that `rank` failed (seeing `why`) before it exits: name_ranks_gone then
// takes it for an echo of the failure, not its cause. `cause`: what it saw is a cause (it
// waited for a peer in vain, or a mismatch), not another rank's failure: the first such is
// quoted in the others' errors.
Status mark_rank_failed(StoreClient& liveness, const std::string& live_keys, int rank, const std::string& why,
                        bool cause);
Status name_ranks_gone(const Status& failure, StoreClient& liveness, const std::string& live_keys, int size,
                       int me, double seconds, bool store_of_rank0);

// A failed communicator's store host, before its store may close: waits up to `seconds`
// for every rank to say it failed (mark_rank_failed), so that the others can still ask
// the store who is gone or silent (name_ranks_gone) when this process exits first.
void linger_for_failures(StoreClient& liveness, const std::string& live_keys, int size, double seconds);

// One membership agreement: who of the old members take part (and which joiners are let
// in), in which order. The first caller to arrive decides for all and writes the outcome.
struct MembershipRequest {
  StoreClient* store = nullptr;
  std::string prefix;        // the agreement's keys
  std::string old_prefix;    // the old communicator's (its ranks' live keys)
  std::vector<std::string> members;  // the old ranks' worker ids, in rank order
  int my_old_rank = -1;
  std::vector<int> exclude;  // old ranks named by the caller (exclude_given)
  bool exclude_given = false;
  bool admit_joiners = false;  // rebuild of the elastic world: joiners waiting are let in
  int64_t joined_before = 0;   // joiner tickets up to this one were let in earlier
  int epoch = 0;               // the new epoch's number (0: the old one's + 1)
};

struct Membership {
  int rank = -1;  // this caller's rank in the new epoch
  std::vector<std::string> members;  // worker ids in new rank order
  int64_t joined = 0;  // joiner tickets considered so far
};

Result<Membership> agree_membership(const MembershipRequest& request, const Deadline& deadline);

// kolo_init of a worker started into a running elastic job (KOLO_ELASTIC=join): takes a
// ticket, waits (KOLO_ELASTIC_JOIN_TIMEOUT) until a rebuild lets it in, and makes that
// epoch's communicator with the others.
Result<std::unique_ptr<Communicator>> join_elastic_world(std::shared_ptr<StoreSession> job);

// Workers waiting to be let in at the next rebuild of an elastic world whose epoch let in
// tickets up to `joined`.
Result<int> pending_joiners(StoreClient& job, int64_t joined, const Deadline& deadline);

// kolorun marks a host whose ranks should leave (its discovery script no longer lists it)
// with "1" under this key, and clears it ("0") if the host is listed again.
std::string leaving_host_key(const std::string& host);

}  // namespace kolo
