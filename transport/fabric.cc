#include "transport/fabric.h"

#include <poll.h>

#include <algorithm>

namespace kolo {

Fabric::Fabric(int rank, int size, std::vector<std::unique_ptr<Link>> links)
    : rank_(rank), size_(size), links_(std::move(links)) {}

Fabric::~Fabric() { shutdown(); }

Status Fabric::progress() {
  if (domain_ != nullptr) inbox_seen_ = domain_->inbox_word();
  for (auto& link : links_) {
    if (!link) continue;
    Status s = link->progress();
    if (!s.ok()) return s;
  }
  return Status();
}

void Fabric::wait_for_activity(int timeout_ms) {
  std::vector<pollfd> fds;
  fds.reserve(links_.size());
  for (auto& link : links_) {
    if (!link || link->poll_fd() < 0) continue;
    fds.push_back(pollfd{link->poll_fd(), link->poll_events(), 0});
  }
  if (domain_ != nullptr) {
    // Shared-memory peers ring the inbox; sockets (other hosts) are polled in between.
    if (fds.empty()) {
      domain_->sleep_on_inbox(inbox_seen_, timeout_ms);
      return;
    }
    timeout_ms = std::min(timeout_ms, 1);
  }
  if (fds.empty()) return;
  ::poll(fds.data(), fds.size(), timeout_ms);
}

void Fabric::shutdown() {
  for (auto& link : links_) {
    if (link) link->close();
  }
}

void Fabric::abort() {
  aborted_.store(true, std::memory_order_relaxed);
  if (domain_ != nullptr) domain_->abort();
  for (auto& link : links_) {
    if (link) link->interrupt();
  }
}

}  // namespace kolo
