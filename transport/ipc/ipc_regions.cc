#include "transport/ipc/ipc_regions.h"

#include <chrono>
#include <cstring>
#include <unistd.h>
#include <thread>

#include "support/env.h"
#include "support/log.h"

namespace kolo {
namespace {

// What a rank publishes: its handle and its region's size (checked by every peer: all must
// have made the same call).
struct Published {
  device::IpcHandle handle;  // of the allocation that holds the region
  uint64_t bytes;
  uint64_t offset;   // of the region in that allocation (0 for regions kolo allocates)
  int64_t pid;       // ranks of one process (threads) use the address as it is: a process
  uint64_t address;  // cannot open its own IPC handle (CUDA refuses it)
  uint32_t any_size; // a shared user buffer: peers' sizes may differ
};

// Waits until local rank p has announced `name` (added to `name`/p), and returns what it
// added; polling, so that site.alive can end the wait when a peer dies (a blocking store
// get could not be interrupted).
Result<int64_t> wait_for_rank(const IpcSite& site, const std::string& name, int p, const Deadline& deadline) {
  const std::string key = str_cat(site.prefix, "/ipc/", name, "/", p);
  for (int polls = 0;; ++polls) {
    // A poll is one round trip to a live store: its own short deadline, so that the
    // wait's deadline ends the wait, not a store call (which would close the connection).
    Result<int64_t> count = site.store->add(key, 0, Deadline(10));
    if (!count.ok()) return count.status();
    if (count.value() > 0) return count.value();
    if (site.alive) KOLO_TRY(site.alive());
    if (deadline.expired()) {
      return error(Code::kTimeout, "IPC regions: waiting for local rank ", p, " (", name, "): not there by the deadline");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(polls < 100 ? 200 : 2000));
  }
}

constexpr int64_t kAnnouncedOk = 1;
constexpr int64_t kAnnouncedFailed = 2;

Status announce(const IpcSite& site, const std::string& name, const Deadline& deadline, int64_t value = kAnnouncedOk) {
  return site.store->add(str_cat(site.prefix, "/ipc/", name, "/", site.index), value, deadline).status();
}

// One peer's published region, mapped into this process (or its address, for a thread of
// this process): *mapping is what ipc_import returned (null if nothing was opened).
Status map_peer(const IpcSite& site, int p, const Published& mine, const device::DeviceOps& dev,
                const Deadline& deadline, void** region, void** mapping, size_t* bytes) {
  Result<std::string> value = site.store->get(str_cat(site.prefix, "/ipc/", p), deadline);  // there already
  if (!value.ok()) return value.status().with_context(str_cat("IPC regions: local rank ", p, ": "));
  Published in{};
  if (value.value().empty()) {
    return error(Code::kInvalidArgument, "IPC regions: local rank ", p, " could not export its region (see its error)");
  }
  if (value.value().size() != sizeof in) {
    return error(Code::kRemote, "IPC regions: local rank ", p, " published ", value.value().size(), " bytes, not ",
                 sizeof in);
  }
  std::memcpy(&in, value.value().data(), sizeof in);
  if (in.any_size != mine.any_size || (!mine.any_size && in.bytes != mine.bytes)) {
    return error(Code::kMismatch, "IPC regions: local rank ", p, " has a region of ", in.bytes, " bytes and rank ",
                 site.index, " of ", mine.bytes);
  }
  *bytes = in.bytes;
  *mapping = nullptr;
  if (in.pid == mine.pid) {  // a thread of this process: the same address space
    *region = reinterpret_cast<void*>(static_cast<uintptr_t>(in.address));
    return Status();
  }
  Status s = dev.ipc_import(in.handle, mapping);
  if (!s.ok()) return error(Code::kUnsupported, "IPC regions: mapping local rank ", p, "'s region: ", s.message());
  *region = static_cast<char*>(*mapping) + in.offset;
  return Status();
}

Status check_site(const IpcSite& site, size_t bytes) {
  if (site.store == nullptr || site.size < 1 || site.index < 0 || site.index >= site.size || bytes == 0) {
    return error(Code::kInvalidArgument, "IPC regions: bad site (index ", site.index, " of ", site.size, ", ", bytes,
                 " bytes)");
  }
  return Status();
}

}  // namespace

Result<std::vector<std::string>> exchange_on_host(const IpcSite& site, const std::string& name,
                                                  const std::string& mine, const Deadline& deadline) {
  const std::string key = str_cat(site.prefix, "/exchange/", name);
  KOLO_TRY(site.store->set(str_cat(key, "/", site.index), mine, deadline));
  KOLO_TRY(announce(site, str_cat("exchange/", name), deadline));
  std::vector<std::string> all(static_cast<size_t>(site.size));
  for (int p = 0; p < site.size; ++p) {
    KOLO_TRY(wait_for_rank(site, str_cat("exchange/", name), p, deadline).status());
    Result<std::string> value = site.store->get(str_cat(key, "/", p), deadline);  // there already
    if (!value.ok()) return value.status().with_context(str_cat("exchange on the host (", name, "): local rank ", p, ": "));
    all[static_cast<size_t>(p)] = value.take();
  }
  return all;
}

Result<std::unique_ptr<IpcRegions>> IpcRegions::create(const IpcSite& site, size_t bytes, const Deadline& deadline,
                                                       const device::DeviceOps& dev) {
  KOLO_TRY(check_site(site, bytes));
  std::unique_ptr<IpcRegions> r(new IpcRegions(dev));
  r->index_ = site.index;
  r->bytes_ = bytes;
  r->regions_.assign(site.size, nullptr);
  void* mine = nullptr;
  KOLO_TRY(dev.malloc(&mine, bytes));
  r->regions_[site.index] = mine;  // freed by the destructor from here on
  {
    // Zeroed on a stream of its own: the legacy default stream would also wait for work
    // the caller has queued on its blocking streams.
    void* stream = nullptr;
    KOLO_TRY(dev.stream_create(&stream));
    Status zeroed = dev.memset_async(mine, 0, bytes, stream);
    if (zeroed.ok()) zeroed = dev.stream_synchronize(stream, deadline);
    (void)dev.stream_destroy(stream);
    KOLO_TRY(zeroed);
  }
  return publish(std::move(r), site, mine, deadline);
}

Result<std::unique_ptr<IpcRegions>> IpcRegions::share(const IpcSite& site, void* ptr, size_t bytes,
                                                      const Deadline& deadline, const device::DeviceOps& dev) {
  KOLO_TRY(check_site(site, bytes));
  device::DeviceAllocation held{ptr, bytes, 0};
  // Alone on the host, nothing is exported: any device memory will do.
  Status usable = site.size == 1 ? Status() : dev.allocation_of(ptr, &held);
  void* base = held.base;
  const size_t allocation = held.bytes;
  const size_t offset = static_cast<size_t>(static_cast<char*>(ptr) - static_cast<char*>(base));
  if (usable.ok() && offset + bytes > allocation) {
    usable = error(Code::kInvalidArgument, "IPC regions: ", bytes, " bytes at ", ptr,
                   " run past the end of its allocation (", allocation - offset, " bytes left)");
  }
  std::unique_ptr<IpcRegions> r(new IpcRegions(dev));
  r->owned_ = false;
  r->index_ = site.index;
  r->bytes_ = bytes;
  r->regions_.assign(site.size, nullptr);
  r->regions_[site.index] = ptr;
  return publish(std::move(r), site, base, deadline, usable);
}

Result<std::unique_ptr<IpcRegions>> IpcRegions::publish(std::unique_ptr<IpcRegions> r, const IpcSite& site, void* base,
                                                        const Deadline& deadline, const Status& refused) {
  const device::DeviceOps& dev = r->dev_;
  char* mine = static_cast<char*>(r->regions_[site.index]);
  r->mappings_.assign(site.size, nullptr);
  r->sizes_.assign(site.size, 0);
  r->sizes_[site.index] = r->bytes_;
  if (site.size == 1) return r;  // no peer: nothing to export (memory CUDA IPC refuses works alone)
  Published out{};
  out.bytes = r->bytes_;
  out.offset = static_cast<uint64_t>(mine - static_cast<char*>(base));
  out.pid = static_cast<int64_t>(::getpid());
  out.address = reinterpret_cast<uintptr_t>(mine);
  out.any_size = r->owned_ ? 0 : 1;
  const Status exported = refused.ok() ? dev.ipc_export(base, &out.handle) : refused;
  // From here a peer may map the region: on an error it is kept, not freed (CUDA makes
  // freeing memory another process still has open undefined).
  r->site_ = site;
  r->keep_own_ = true;
  // What cannot be exported is published empty, so that the peers fail at once too
  // instead of waiting for it until the deadline.
  KOLO_TRY(site.store->set(str_cat(site.prefix, "/ipc/", site.index),
                           exported.ok() ? std::string(reinterpret_cast<const char*>(&out), sizeof out) : std::string(),
                           deadline));
  KOLO_TRY(announce(site, "published", deadline));
  if (!exported.ok()) {
    (void)announce(site, "mapped", deadline, kAnnouncedFailed);
    return exported.with_context(str_cat("IPC regions: local rank ", site.index, " cannot share its region: "));
  }
  // Map every peer; a rank that cannot says so to all (every rank then fails alike, and
  // at once: the caller may fall back to another path on every rank).
  Status mapped;
  for (int p = 0; p < site.size && mapped.ok(); ++p) {
    if (p == site.index) continue;
    Result<int64_t> published = wait_for_rank(site, "published", p, deadline);
    if (!published.ok()) return published.status();
    mapped = map_peer(site, p, out, dev, deadline, &r->regions_[p], &r->mappings_[p], &r->sizes_[p]);
    if (r->mappings_[p] != nullptr) r->open_order_.push_back(p);
  }
  KOLO_TRY(announce(site, "mapped", deadline, mapped.ok() ? kAnnouncedOk : kAnnouncedFailed));
  for (int p = 0; p < site.size; ++p) {
    if (p == site.index) continue;
    Result<int64_t> peer = wait_for_rank(site, "mapped", p, deadline);
    if (!peer.ok()) return peer.status();
    if (peer.value() != kAnnouncedOk && mapped.ok()) {
      mapped = error(Code::kUnsupported, "IPC regions: local rank ", p, " could not map its peers' regions");
    }
  }
  KOLO_TRY(mapped);
  r->keep_own_ = false;
  log_info(Subsys::kTransport, "IPC regions: local rank ", site.index, " of ", site.size, " maps ", site.size - 1,
           " peers' ", r->owned_ ? "" : "shared ", r->bytes_, " B regions (", dev.name, ")");
  return r;
}

IpcRegions::~IpcRegions() { (void)close(); }

Status IpcRegions::close() {
  if (closed_) return Status();
  closed_ = true;
  for (auto p = open_order_.rbegin(); p != open_order_.rend(); ++p) {
    Status s = dev_.ipc_close(mappings_[*p]);
    if (!s.ok()) log_warn(Subsys::kTransport, "IPC regions: closing local rank ", *p, "'s mapping: ", s.message());
  }
  // Free the own region only once every peer has closed its mapping of it (announced
  // through the store, waited for with a deadline); otherwise keep it.
  Status closed;
  if (!keep_own_ && site_.store != nullptr && site_.size > 1) {
    const Deadline deadline(env_timeout_seconds());
    closed = announce(site_, "closed", deadline);
    for (int p = 0; p < site_.size && closed.ok(); ++p) {
      if (p != index_) closed = wait_for_rank(site_, "closed", p, deadline).status();
    }
    if (!closed.ok()) {
      log_warn(Subsys::kTransport, "IPC regions: a peer did not close its mapping (", closed.message(),
               "); the region is kept");
      keep_own_ = true;
    } else if (announce(site_, "done", deadline).ok() && index_ == 0) {
      // The store may live in this process (the communicator's rank 0): leave only after
      // every peer has stopped reading it, or one still waiting for this rank's "closed"
      // would lose its connection and keep its region.
      for (int p = 1; p < site_.size; ++p) {
        if (!wait_for_rank(site_, "done", p, deadline).ok()) break;
      }
    }
  }
  if (owned_ && !keep_own_ && regions_.size() > static_cast<size_t>(index_) && regions_[index_] != nullptr) {
    Status s = dev_.free(regions_[index_]);
    if (!s.ok()) log_warn(Subsys::kTransport, "IPC regions: freeing the own region: ", s.message());
  }
  return closed;
}

}  // namespace kolo
