// Transports as a table. Each backend is one row: its name, which peers it can reach, and
// how it connects to the peers chosen for it. The engine asks the table and never names a
// backend; transport/transports.cc, the one file that names them, registers the rows.
// KOLO_TRANSPORTS (default: every row, in table order) says which rows a rank allows, in
// the order it prefers them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "support/clock.h"
#include "support/status.h"
#include "transport/bootstrap/store.h"
#include "transport/link.h"
#include "transport/shared_domain.h"
#include "transport/wake_source.h"

namespace kolo {

// A rank of a communicator as the transports see it: its store, its place among the ranks,
// and which host each rank is on.
struct CommSite {
  StoreClient* store = nullptr;
  std::string secret;  // raw bytes; empty = unauthenticated
  std::string prefix;  // store key prefix, unique per communicator
  int rank = 0;
  int size = 1;
  std::vector<int> host_of_rank;  // rank -> host index (equal = same host)
  // The store of this host's ranks (hosted by its first rank, engine/comm_store.h), for the
  // set-up among them (shared memory), so that the communicator's store sees none of it;
  // null: `store` serves.
  StoreClient* local_store = nullptr;
  // Of `ranks` (communicator ranks a set-up wait still waits for), those that have left the
  // job (failed or were killed: the engine asks the store's live keys): an error naming them,
  // else Ok. Unset: nobody asks, and such a wait ends at its deadline. Asked between slices
  // of a long wait, so that a rank that failed its own start-up does not hold the others
  // there until KOLO_TIMEOUT.
  std::function<Status(const std::vector<int>& ranks)> left;
};

// What a backend knows of the communicator when it connects.
struct TransportEnv : CommSite {
  std::vector<std::vector<std::string>> allowed;  // rank -> the transports it allows, preferred first
  bool allows(int rank, const char* name) const;
};

// What a backend's connect produces.
struct TransportOutput {
  std::unique_ptr<SharedDomain> shared;      // memory its ranks on this host share, if it has any
                                             // (declared first: the links point into it)
  std::vector<std::unique_ptr<Link>> links;  // index = peer (sized to the communicator); set at the peers given
  std::unique_ptr<WakeSource> wake;          // for links with no descriptor to poll
  std::unique_ptr<LinkMaker> maker;          // makes the links to the peers given that `links` leaves null
};

struct TransportRow {
  const char* name;
  // Checks the backend's environment variables (at every rank, whether it is allowed or not).
  Status (*check_env)();
  // Whether `rank` can reach `peer` over the backend (both ends answer alike).
  bool (*reachable)(const TransportEnv& env, int rank, int peer);
  // Connects to `peers` (not empty; every one of them calls it with this rank too).
  Status (*connect)(const TransportEnv& env, const std::vector<int>& peers, const Deadline& deadline,
                    TransportOutput* out);
};

// The rows built in, in default order (transports.cc).
const std::vector<TransportRow>& transport_table();
// Links for a communicator's start-up exchange (engine/bootstrap_net.h), made on demand
// between any two of its ranks (site.prefix keys their addresses): TCP, which reaches
// every rank that reaches the store, whatever KOLO_TRANSPORTS allows for the data.
Result<std::unique_ptr<LinkMaker>> bootstrap_link_maker(const CommSite& site, const Deadline& deadline);
// Why no row reached some peers, and what to allow: appended to that error (transports.cc).
const char* transport_unreachable_hint();

const TransportRow* find_transport(const std::string& name);
// KOLO_TRANSPORTS: comma-separated names, preferred first; empty = the whole table.
Result<std::vector<std::string>> parse_transports(const std::string& text);

// The row that joins ranks a and b: the first in the lower rank's order that both allow
// and that reaches the other, so both ends (and every other rank) choose alike. Null when
// none does. `reachable` is asked as if from a: rows answer alike from either end.
const TransportRow* choose_transport(const TransportEnv& env, int a, int b);

}  // namespace kolo
