// User device buffers that the ranks of one host read in place without kolo_mem_register
// (KOLO_DEVICE_AUTO_REGISTER, on by default). The first time a rank passes a buffer of an
// allocation its peers have not seen, it exports the allocation (CUDA IPC) and every peer
// maps it; the mappings are kept, so later calls on the same allocation (a training loop's
// gradients, a caching allocator's segments) cost one exchange of a few hundred bytes
// through shared memory.
//
// Safety: an allocation is known by its id (DeviceAllocation::id, CUDA's buffer id), not its
// address. One freed and another made at the same address has a new id, so the peers map
// the new one; their mapping of the old one is closed then (the old one's last reader was a
// call that ended before its owner could free it: zero-copy calls end with a barrier after
// every read). Ranks that are threads of one process use each other's addresses as they are.
//
// Agreement: every rank posts its buffers (allocation id, offset, bytes, and a handle where
// the allocation is new) and reads every peer's, so all decide alike: the buffers are read
// in place on every rank or on none (one rank's buffer cannot be exported: it is not
// cudaMalloc memory; a mapping failed on one rank).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "support/clock.h"
#include "support/device/device.h"
#include "support/status.h"
#include "transport/shared_domain.h"

namespace kolo {

class PeerBuffers {
 public:
  static constexpr int kMaxBuffers = 2;  // a call's input and output

  struct Buffer {
    const void* ptr = nullptr;
    size_t bytes = 0;  // how far peers read from ptr (the same on every rank)
  };

  explicit PeerBuffers(SharedDomain& shared, const device::DeviceOps& dev = device::runtime())
      : shared_(shared), dev_(dev) {}
  ~PeerBuffers();  // closes every mapping (the owner drains its device work first)
  PeerBuffers(const PeerBuffers&) = delete;
  PeerBuffers& operator=(const PeerBuffers&) = delete;

  // Collective over the domain's ranks, in call order (each calls it for the same calls,
  // with the same count of buffers). On true, at[b][r] is rank r's buffer b as this process
  // addresses it; false on every rank alike where they cannot be read in place. A rank
  // whose buffers are registered (kolo_mem_register) takes part with `registered` and no
  // buffers: then none are shared, so that such calls stay as they were (read through the
  // windows where every rank registered them, else a mismatch every rank reports). An
  // error (a peer that never posts within the deadline, a dead peer) fails the
  // communicator.
  Result<bool> exchange(const Buffer* mine, int n, bool registered, const Deadline& deadline, std::vector<char*> at[]);

  // How many peer allocations are mapped now (tests).
  size_t mapped() const { return imports_.size(); }

 private:
  struct Import {
    char* mapped = nullptr;  // the allocation as this process addresses it
    uintptr_t base = 0;      // and as its owner does
    size_t bytes = 0;
    bool owned = true;  // a mapping to close; false: a thread-rank's own address
  };
  void close_overlapping(int peer, uint64_t id, uintptr_t base, size_t bytes);

  SharedDomain& shared_;
  const device::DeviceOps& dev_;
  uint64_t seq_ = 0;
  std::map<std::pair<int, uint64_t>, Import> imports_;  // (peer index, allocation id)
  // Own allocations every peer has mapped: id -> (base, bytes).
  std::map<uint64_t, std::pair<uintptr_t, size_t>> exported_;
};

}  // namespace kolo
