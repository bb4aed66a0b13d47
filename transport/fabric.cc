#include "transport/fabric.h"

#include <poll.h>

#include <algorithm>

namespace kolo {

Fabric::Fabric(int rank, int size, std::vector<std::unique_ptr<Link>> links)
    : rank_(rank), size_(size), links_(std::move(links)) {}

Fabric::~Fabric() { shutdown(); }

Status Fabric::progress() {
  for (auto& source : wake_sources_) source->arm();
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
  if (!wake_sources_.empty()) {
    // Peers without a descriptor wake us through their source; sockets are polled in between.
    if (fds.empty() && wake_sources_.size() == 1) {
      wake_sources_.front()->sleep(timeout_ms);
      return;
    }
    timeout_ms = std::min(timeout_ms, 1);
    if (fds.empty()) {
      for (auto& source : wake_sources_) source->sleep(0);
      ::poll(nullptr, 0, timeout_ms);
      return;
    }
  }
  if (fds.empty()) return;
  ::poll(fds.data(), fds.size(), timeout_ms);
}

void Fabric::shutdown(bool after_failure) {
  for (auto& link : links_) {
    if (!link) continue;
    if (after_failure) {
      link->close_after_failure();
    } else {
      link->close();
    }
  }
}

void Fabric::abort() {
  aborted_.store(true, std::memory_order_relaxed);
  for (auto& source : wake_sources_) source->abort();
  for (auto& link : links_) {
    if (link) link->interrupt();
  }
}

}  // namespace kolo
