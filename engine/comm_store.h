// Each communicator's own rendezvous store, hosted by the process of its rank 0.
//
// A communicator is bootstrapped from a store that may live in a process outside it: the
// maker of a unique id (which may exit once every rank has joined), kolorun, or the parent
// of a split. Its first act is to move to a store of its own, in the process of its own
// rank 0 (a member, which the communicator needs anyway), so that nothing it does later
// (its init's exchanges, device setup, registration, splits) depends on another process.
// Only one key is read from the bootstrap store: the own store's address.
#pragma once

#include <memory>
#include <string>

#include "engine/communicator.h"
#include "support/clock.h"
#include "support/status.h"

namespace kolo {

// Rank 0 hosts (one server per process, address and secret, shared by the communicators
// hosted there and stopped with the last of them) and publishes its address under
// `prefix`/store; every rank reads it and connects. The session's secret is the bootstrap's.
Result<std::shared_ptr<StoreSession>> own_store(StoreSession& bootstrap, const std::string& prefix, int rank,
                                                const Deadline& deadline);

// The store of one host's ranks: its first rank hosts it (the same server as its process's
// own store, if it hosts one) and says where (`*address`, published in the topology
// exchange); every rank of the host connects (connect_local_store). The host's shared-memory
// set-up (7 requests per rank) then queues at its own host, not at the communicator's one
// store, which sees only each rank's address, live key and exchange (docs/scale.md).
Result<std::shared_ptr<StoreServer>> host_local_store(const StoreSession& own, std::string* address);
Result<std::shared_ptr<StoreSession>> connect_local_store(const std::string& address, const std::string& secret,
                                                          int rank, const Deadline& deadline);

}  // namespace kolo
