// The staged executor's chunks: how a device call (or a group) is cut into chunks of
// pinned host staging, where each piece of each buffer goes in a chunk's staging, and the
// host calls that run on it. Pure layout over staged_layout.h; the executor
// (staged_device_executor.cc) owns the staging and the streams.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/collective.h"
#include "engine/planner/plan.h"
#include "engine/executors/device_staged/staged_layout.h"
#include "support/status.h"

namespace kolo::staged {

constexpr size_t kNowhere = ~size_t{0};

// A piece to copy: device memory and where it lies in its chunk's staging.
struct Copy {
  char* device;
  size_t offset;
  size_t bytes;
};

// One chunk, or one group: the host calls on its staging, the copies in and out.
struct Chunk {
  std::vector<CollCall> host_calls;  // send/recv: set from the offsets once staged
  // The Plan each host call runs with, where the call's Plan recorded it (null: planned
  // when it runs, a shorter last chunk).
  std::vector<std::shared_ptr<const Plan>> host_plans;
  std::vector<size_t> send_at, recv_at;  // offsets into the staging (kNowhere: none)
  std::vector<Copy> ins, outs;
  size_t bytes = 0;          // the staging it needs
  char* staging = nullptr;   // a slot, or the large buffer
  void* in_done = nullptr;   // recorded after its copies in
  uint32_t seq = 0;          // the word value that releases the stream after it
};

inline size_t largest(const std::vector<Chunk>& chunks) {
  size_t most = 0;
  for (const Chunk& c : chunks) most = std::max(most, c.bytes);
  return most;
}

// The chunks of calls[0..n): a single call cut in chunks of `per` elements (its Plan's
// chunk_elems; 0: whole), a group as one chunk.
Status chunks_of(const CollCall* calls, size_t n, size_t per, int ranks, int rank, std::vector<Chunk>* chunks);

}  // namespace kolo::staged
