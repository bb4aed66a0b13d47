// A communicator's links to its peers, and the one place that waits on them. Links made at
// connect time are here from the start; the others are made by their backend's LinkMaker
// when a call first needs them (connect()).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "support/clock.h"
#include "support/status.h"
#include "transport/link.h"
#include "transport/wake_source.h"

namespace kolo {

class Fabric {
 public:
  Fabric(int rank, int size, std::vector<std::unique_ptr<Link>> links);
  ~Fabric();
  int rank() const { return rank_; }
  int size() const { return size_; }
  // The link to `peer` (never this rank itself); null until connect(peer) has made it.
  Link* link(int peer) const { return links_[peer].get(); }

  // The peers whose links `maker` makes when first needed.
  void add_maker(std::unique_ptr<LinkMaker> maker, const std::vector<int>& peers);
  // Makes the link to `peer` if it is not there yet (a call needs it). Cheap when it is.
  Status connect(int peer, const Deadline& deadline) {
    return links_[peer] ? Status() : make_link(peer, deadline);
  }

  // Progresses every link once; the first link error is returned (naming the peer).
  Status progress();
  // Links that have no descriptor to poll wake this rank through a source of their backend.
  void add_wake_source(std::unique_ptr<WakeSource> source) { wake_sources_.push_back(std::move(source)); }
  // Blocks until a link may make progress, at most timeout_ms.
  void wait_for_activity(int timeout_ms);
  // Closes all links (pending requests fail) and stops making new ones. Idempotent.
  // after_failure: a call failed or timed out, so links close without waiting on the
  // network (Link::close_after_failure).
  void shutdown(bool after_failure = false);
  // Makes every wait return and marks the fabric aborted; safe from another thread.
  void abort();
  bool aborted() const { return aborted_.load(std::memory_order_relaxed); }

 private:
  Status make_link(int peer, const Deadline& deadline);

  int rank_;
  int size_;
  std::vector<std::unique_ptr<Link>> links_;  // index = peer; null at rank_ and where not made yet
  std::vector<Link*> active_;                 // the links made, in the order made: what progress() visits
  std::vector<LinkMaker*> maker_of_;          // index = peer; null where the link was made at connect time
  std::vector<std::unique_ptr<LinkMaker>> makers_;
  std::mutex links_mutex_;                    // a link added against abort() from another thread
  std::atomic<bool> aborted_{false};
  std::vector<std::unique_ptr<WakeSource>> wake_sources_;  // armed before every progress()
};

}  // namespace kolo
