#include "transport/ipc/ipc_windows.h"

#include <algorithm>

#include "support/log.h"

namespace kolo {

Result<int> IpcWindows::add(const IpcSite* site, void* ptr, size_t bytes, const Deadline& deadline) {
  const int id = next_++;  // the same on every rank: registrations are collective, in order
  Window w;
  w.ptr = static_cast<char*>(ptr);
  w.bytes = bytes;
  if (site == nullptr) {
    windows_.emplace(id, std::move(w));
    return id;
  }
  IpcSite mine = *site;
  mine.prefix = str_cat(site->prefix, "/window/", id);
  Result<std::unique_ptr<IpcRegions>> regions = IpcRegions::share(mine, ptr, bytes, deadline);
  if (!regions.ok()) {
    // Peers that cannot map each other's memory learn it together (all or nothing): the
    // window is kept unmapped, so calls in it are staged on every rank alike.
    if (regions.status().code() != Code::kUnsupported) return regions.status();
    log_warn(Subsys::kTransport, "registered buffer not shared with the peers: ", regions.status().message());
  } else {
    w.regions = regions.take();
    w.reach = bytes;
    for (int r = 0; r < w.regions->size(); ++r) w.reach = std::min(w.reach, w.regions->bytes(r));
  }
  windows_.emplace(id, std::move(w));
  return id;
}

Status IpcWindows::remove(int id) {
  auto it = windows_.find(id);
  if (it == windows_.end()) return error(Code::kInvalidArgument, "no registered buffer has handle ", id + 1);
  Status closed = it->second.regions ? it->second.regions->close() : Status();
  windows_.erase(it);
  if (!closed.ok()) {
    return closed.with_context("deregistering: a peer may still map the buffer, do not free it yet: ");
  }
  return Status();
}

Status IpcWindows::clear() {
  Status first;
  while (!windows_.empty()) {
    Status s = remove(windows_.begin()->first);
    if (first.ok()) first = s;
  }
  return first;
}

void IpcWindows::abandon() {
  for (auto& [id, w] : windows_) {
    if (w.regions != nullptr) w.regions->keep_own();
  }
  windows_.clear();
}

bool IpcWindows::find(const void* ptr, size_t bytes, Found* found) const {
  const char* p = static_cast<const char*>(ptr);
  for (const auto& [id, w] : windows_) {
    if (w.regions == nullptr || p < w.ptr || p >= w.ptr + w.bytes) continue;
    const size_t offset = static_cast<size_t>(p - w.ptr);
    if (offset + bytes > w.reach) continue;
    *found = Found{id, offset};
    return true;
  }
  return false;
}

}  // namespace kolo
