#include "transport/fabric.h"

#include <poll.h>

#include <algorithm>

namespace kolo {

Fabric::Fabric(int rank, int size, std::vector<std::unique_ptr<Link>> links)
    : rank_(rank), size_(size), links_(std::move(links)), maker_of_(size, nullptr) {
  links_.resize(size);
  for (auto& link : links_) {
    if (link) active_.push_back(link.get());
  }
}

Fabric::~Fabric() { shutdown(); }

void Fabric::add_maker(std::unique_ptr<LinkMaker> maker, const std::vector<int>& peers) {
  for (int peer : peers) maker_of_[peer] = maker.get();
  makers_.push_back(std::move(maker));
}

Status Fabric::make_link(int peer, const Deadline& deadline) {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    return error(Code::kInternal, "rank ", rank_, " asked for a link to rank ", peer, " of ", size_);
  }
  if (aborted()) return error(Code::kAborted, "communicator aborted by kolo_comm_abort");
  if (maker_of_[peer] == nullptr) {
    return error(Code::kInternal, "rank ", rank_, " has no link to rank ", peer, " and no transport to make one");
  }
  Result<std::unique_ptr<Link>> made = maker_of_[peer]->make(peer, deadline);
  if (!made.ok()) return made.status();
  std::lock_guard<std::mutex> lock(links_mutex_);
  links_[peer] = made.take();
  active_.push_back(links_[peer].get());
  if (aborted()) links_[peer]->interrupt();
  return Status();
}

Status Fabric::progress() {
  for (auto& source : wake_sources_) source->arm();
  for (Link* link : active_) {
    Status s = link->progress();
    if (!s.ok()) return s;
  }
  return Status();
}

void Fabric::wait_for_activity(int timeout_ms) {
  std::vector<pollfd> fds;
  fds.reserve(active_.size());
  for (Link* link : active_) {
    if (link->poll_fd() < 0) continue;
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
  for (auto& maker : makers_) maker->stop();
  for (Link* link : active_) {
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
  std::lock_guard<std::mutex> lock(links_mutex_);
  for (Link* link : active_) link->interrupt();
}

}  // namespace kolo
