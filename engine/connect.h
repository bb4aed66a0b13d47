// How the ranks of a communicator reach each other: which transport joins each pair, the
// links over them, and the memory its ranks on one host share. Made once, when the
// communicator is created; the executors use what it holds.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "support/clock.h"
#include "support/status.h"
#include "transport/bootstrap/store.h"
#include "transport/fabric.h"
#include "transport/shared_domain.h"
#include "transport/transport.h"

namespace kolo {

using ConnectRequest = CommSite;

class Connections {
 public:
  // `transports`: every rank's entry of transports_entry(), in rank order (the start-up
  // exchange carries them); empty = exchanged through the store here.
  static Result<std::unique_ptr<Connections>> create(const ConnectRequest& request, const Deadline& deadline,
                                                     const std::vector<std::string>& transports = {});
  // This rank's transports as the others read them (KOLO_TRANSPORTS, checked).
  static Result<std::string> transports_entry();
  ~Connections();

  Fabric& fabric() const { return *fabric_; }
  // Memory shared by every rank of the communicator (all on this host, all allowing it),
  // for the one-host executor; null otherwise.
  SharedDomain* shared() const { return whole_ ? domain_.get() : nullptr; }
  // After a failure: close the links and make the peers' shared-memory waits return.
  void fail(const std::string& why);
  // From any thread: every wait returns kAborted.
  void abort();
  bool aborted() const { return fabric_->aborted(); }

 private:
  Connections() = default;
  Status connect(const ConnectRequest& request, const Deadline& deadline, const std::vector<std::string>& transports);

  std::unique_ptr<SharedDomain> domain_;  // declared before fabric_: its links point into it
  bool whole_ = false;
  std::unique_ptr<Fabric> fabric_;
};

// Whether ranks of one host share memory with the transports allowed (KOLO_TRANSPORTS as
// parse_transports gives it; empty: the table's order): every transport joins two ranks
// of one host, so the first allowed is theirs, and only shm shares memory.
bool shares_memory_on_one_host(const std::vector<std::string>& transports);

}  // namespace kolo
