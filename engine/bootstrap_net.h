// A communicator's start-up exchange: every rank's entry (its host, its transports, its
// host's topology) reaches every rank over a binary tree of links of its own, gathered up
// to rank 0 and sent back down: 2 log2 N steps, O(N) bytes per rank, and O(1) store
// requests per rank (its address, its tree neighbours'), where reading every entry from
// the store cost N requests per rank through one server thread (N^2 in all). The store is
// for rendezvous only. The links go when the communicator's creation ends.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "support/clock.h"
#include "support/status.h"
#include "transport/link.h"
#include "transport/transport.h"

namespace kolo {

class BootstrapNet {
 public:
  // Posts this rank's address and links it to its tree neighbours ((r-1)/2, 2r+1, 2r+2).
  // `liveness` and `live_prefix`: where each rank's live key is (prefix + rank), which
  // names the ranks that never came or died when a step times out.
  static Result<std::unique_ptr<BootstrapNet>> create(const CommSite& site, StoreClient& liveness,
                                                      std::string live_prefix, const Deadline& deadline);
  ~BootstrapNet();

  // Every rank's `mine`, in rank order. Collective: every rank calls it, in the same order.
  Result<std::vector<std::string>> allgather(const std::string& mine, const Deadline& deadline);
  // The links and listener it holds (for the start-up benchmark's counts).
  int tree_degree() const;

 private:
  BootstrapNet() = default;
  Status link_tree(const Deadline& deadline);
  // Sends and receives one length-prefixed blob per peer, all at once, until done.
  struct Requests {
    uint64_t length_out = 0;
    std::vector<uint64_t> lengths;
    std::vector<TransferRequest> sends, length_reqs, data_reqs;
  };
  Status exchange(uint64_t tag, const std::vector<int>& send_to, const std::string& out,
                  const std::vector<int>& recv_from, std::vector<std::string>* in, const Deadline& deadline);
  Status step(uint64_t tag, const std::vector<int>& send_to, const std::string& out, const std::vector<int>& recv_from,
              std::vector<std::string>* in, const Deadline& deadline, Requests& r);
  // A step that failed: who is not alive, from the store, if anyone.
  Status explain(const Status& failure);
  // The steps' deadline: `deadline` less what explain() may take (explain_s_, set here).
  Deadline steps_within(const Deadline& deadline);

  CommSite site_;
  StoreClient* liveness_ = nullptr;
  std::string live_prefix_;
  std::unique_ptr<LinkMaker> maker_;
  std::vector<std::unique_ptr<Link>> links_;  // index = peer: the parent and children only
  int parent_ = -1;
  std::vector<int> children_;
  uint64_t round_ = 0;
  double explain_s_ = 0;  // what explain() has of the present step's deadline
};

// Entries as one blob ("u32 rank, u32 length, bytes" each) and back; the decoder checks
// every rank in [0, size) at most once and, when `complete`, every rank present.
void append_entry(std::string& blob, int rank, const std::string& entry);
Status decode_entries(const std::string& blob, int size, bool complete, std::vector<std::string>* entries,
                      std::vector<bool>* seen);

}  // namespace kolo
