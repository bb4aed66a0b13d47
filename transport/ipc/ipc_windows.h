// User buffers registered with every rank of one host (kolo_mem_register), so that the
// one-host device collectives read and write them directly instead of copying through
// staging slots. Each registration is collective: every rank shares one buffer of its
// own (any size; transport/ipc/ipc_regions.h maps them), and the k-th registration of every
// rank forms window k. A call uses window k when its buffers lie in it on every rank at
// the same offsets (as NCCL's registered buffers and symmetric windows require); that
// each rank's lookup agrees with its peers' is checked by the collective itself
// (kernels/barrier_body.h), not assumed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "transport/ipc/ipc_regions.h"

namespace kolo {

class IpcWindows {
 public:
  struct Found {
    int window = -1;
    size_t offset = 0;  // of the buffer in the window, the same on every rank
  };

  // Collective over the site's ranks; returns the window's id. Where the host's GPUs
  // cannot map each other's memory, or there is no site (ranks on several hosts), the
  // window is recorded unmapped on every rank alike (find never returns it): handles stay
  // valid and calls take the other paths.
  Result<int> add(const IpcSite* site, void* ptr, size_t bytes, const Deadline& deadline);
  // Collective: returns once every peer has closed its mapping (the owner may free then).
  Status remove(int id);
  bool empty() const { return windows_.empty(); }
  // Every window removed, in the order they were added (collective; communicator destroy).
  Status clear();
  // After a failure: drop every window without waiting for the peers (closing this
  // process's mappings only).
  void abandon();

  // The mapped window that holds [ptr, ptr + bytes) on this rank and in which every peer's
  // buffer reaches at least as far, if any.
  bool find(const void* ptr, size_t bytes, Found* found) const;
  // Rank `index`'s buffer of window `id`, as this process addresses it.
  char* address(int id, int index) const { return windows_.at(id).regions->region(index); }

 private:
  struct Window {
    char* ptr = nullptr;
    size_t bytes = 0;
    size_t reach = 0;  // the smallest buffer of any rank: offsets beyond it are not shared
    std::unique_ptr<IpcRegions> regions;  // null: not mapped (registered where peers cannot map)
  };
  std::map<int, Window> windows_;
  int next_ = 0;
};

}  // namespace kolo
