// Device memory that every rank of one host addresses directly: each rank allocates one
// region on its device, exports it (CUDA IPC; on the emulated device, its memfd) and maps
// every peer's, through the rendezvous store. This is the memory the one-host device
// collectives (kernels that read and write peer GPUs over NVLink or PCIe) work in: staging
// slots and the flags that order their steps. A user's buffer is shared the same way
// (kolo_mem_register): exported as the allocation that holds it, mapped with its offset.
//
// Mapping is all or nothing: a peer that never publishes its handle, or publishes one that
// cannot be mapped, is an error naming it (at the deadline, or as soon as site.alive says
// a peer died: the waits poll the store rather than block in it). Peers' mappings are closed in
// the reverse order of opening, then the own region is freed, after every rank has mapped
// (a rank never frees memory another is still importing), and the own region is freed
// only once every peer has closed its mapping (kept, never freed, when that is not known).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "support/clock.h"
#include "support/device/device.h"
#include "support/status.h"
#include "transport/bootstrap/store.h"

namespace kolo {

struct IpcSite {
  StoreClient* store = nullptr;
  std::string prefix;  // unique per communicator and use
  int index = 0;       // this rank among the ranks of the host
  int size = 1;        // ranks of the host
  // Asked between polls while waiting for peers: an error (a peer on this host died)
  // ends the wait at once instead of at the deadline. Optional.
  std::function<Status()> alive;
};

// Every local rank's `mine` for `name` (unique within the site's prefix), in local order:
// an all-gather through the store whose waits poll, so that site.alive ends them when a
// peer dies. Collective over the site's ranks.
Result<std::vector<std::string>> exchange_on_host(const IpcSite& site, const std::string& name,
                                                  const std::string& mine, const Deadline& deadline);

class IpcRegions {
 public:
  // Collective over the site's ranks: every one calls it with the same bytes. `dev` is the
  // device runtime (the process's own unless a test gives another); the region is memory
  // of the device current on the calling thread, zeroed.
  static Result<std::unique_ptr<IpcRegions>> create(const IpcSite& site, size_t bytes, const Deadline& deadline,
                                                    const device::DeviceOps& dev = device::runtime());
  // Collective likewise, over a buffer of the caller's (device memory of this process):
  // every rank shares one, of any size. Never freed here; destroying the object returns
  // once every peer has closed its mapping, so that the owner may free it then.
  static Result<std::unique_ptr<IpcRegions>> share(const IpcSite& site, void* ptr, size_t bytes,
                                                   const Deadline& deadline,
                                                   const device::DeviceOps& dev = device::runtime());
  ~IpcRegions();
  // Closes the peers' mappings, then waits for every peer to close its mapping of this
  // region (the destructor does it too); an error where a peer did not in time.
  Status close();
  IpcRegions(const IpcRegions&) = delete;
  IpcRegions& operator=(const IpcRegions&) = delete;

  // After a failure: the destructor neither waits for the peers to close their mappings
  // nor frees the own region (a peer may be dead, or still reading).
  void keep_own() { keep_own_ = true; }

  int size() const { return static_cast<int>(regions_.size()); }
  int index() const { return index_; }
  size_t bytes() const { return bytes_; }
  size_t bytes(int index) const { return sizes_[index]; }  // rank `index`'s region
  // Rank `index`'s region as this process addresses it (its own allocation, or a mapping).
  char* region(int index) const { return static_cast<char*>(regions_[index]); }

 private:
  IpcRegions(const device::DeviceOps& dev) : dev_(dev) {}
  // Publishes this rank's region (`mine`, inside the allocation `base` that is exported)
  // and maps every peer's; all or nothing. `refused`: why this rank cannot share it (the
  // peers then learn it from an empty record at once, instead of at the deadline).
  static Result<std::unique_ptr<IpcRegions>> publish(std::unique_ptr<IpcRegions> r, const IpcSite& site, void* base,
                                                     const Deadline& deadline, const Status& refused = Status());

  const device::DeviceOps& dev_;
  IpcSite site_;           // for the close handshake at destroy
  bool owned_ = true;      // allocated here (create), not a user's buffer (share)
  bool keep_own_ = false;  // the own region may still be mapped by a peer: never freed
  bool closed_ = false;
  int index_ = 0;
  size_t bytes_ = 0;
  std::vector<void*> regions_;   // by rank index; null where not (yet) mapped
  std::vector<void*> mappings_;  // by rank index: what ipc_import returned (the peer's allocation)
  std::vector<size_t> sizes_;    // by rank index
  std::vector<int> open_order_;  // peers in the order their mappings were opened
};

}  // namespace kolo
