// How a device call staged through pinned host memory (the device_staged executor) is cut
// into chunks: the planner records the chunk size and the host Plan of a chunk in the
// call's Plan, and the executor cuts the call as recorded (and sizes its staging by the
// same rule, engine/executors/device_staged/staged_layout.h).
#pragma once

#include <algorithm>
#include <cstddef>

#include "engine/collective.h"

namespace kolo {

// The staging one chunk aims at (for a rank-major call: its strided side, all ranks'
// pieces together).
constexpr size_t kStagedChunkBytes = size_t{4} << 20;
// The smallest piece of a rank-major chunk: with many ranks, kStagedChunkBytes / ranks
// would make each of the chunk's `ranks` copies too small to pay for its own launch (a
// few microseconds each on a GPU; 512 KB take about 20 us at PCIe speed).
constexpr size_t kStagedMinPieceBytes = size_t{512} << 10;
// Stream items (copies, events, waits) a single call may add (chunks are made larger to
// keep within it), and those a call and the calls queued before it may hold together
// (make_room waits for that, or for an empty queue): under what a CUDA stream holds before
// an enqueue blocks (about 1000; the emulated device's kEmulatedStreamDepth), with room for
// the caller's own work.
constexpr size_t kStagedCallItems = 384;
constexpr size_t kStagedStreamItems = 768;
// Besides its copies, a chunk puts on the stream: `in_done`, the wait for its release,
// `out_done`, and a wait for the slot's last user on another stream.
constexpr size_t kStagedChunkItems = 4;

// Collectives whose buffers hold one block per rank (the staged chunk takes a piece of each).
inline bool rank_major(CollKind kind) {
  return kind == CollKind::kAllgather || kind == CollKind::kReduceScatter || kind == CollKind::kAlltoall;
}
// The sides of a rank-major call that hold `ranks` blocks.
inline bool strided_send(CollKind kind) { return kind == CollKind::kReduceScatter || kind == CollKind::kAlltoall; }
inline bool strided_recv(CollKind kind) { return kind == CollKind::kAllgather || kind == CollKind::kAlltoall; }
inline bool elementwise(CollKind kind) {
  return kind == CollKind::kAllreduce || kind == CollKind::kReduce || kind == CollKind::kBroadcast;
}

// The elements per chunk of a single call, or 0: run it whole. A chunk stages about
// kStagedChunkBytes on its larger side: an elementwise call's buffer, or all `ranks` pieces
// of a rank-major call's strided buffer (each piece at least kStagedMinPieceBytes), so it
// fits a staging slot; more where so many chunks would put more than kStagedCallItems on
// the stream (then a chunk may not fit a slot: it is staged in the executor's large
// buffer). A call is cut when it stages more than one such chunk, so that a call not cut
// fits a slot. The chunks are evened out (the same count each but the last, which is at
// most as large), so that no tiny chunk comes last. Every rank computes the same from the
// count, the dtype and the communicator size. Send, recv and allgatherv (a count per rank)
// run whole.
inline size_t staged_chunk_elems(const CollSpec& s, int ranks) {
  if (!elementwise(s.kind) && !rank_major(s.kind)) return 0;
  const size_t blocks = rank_major(s.kind) ? static_cast<size_t>(ranks) : 1;
  const size_t es = dtype_size(s.dtype);
  const size_t piece = std::max(kStagedChunkBytes / blocks, kStagedMinPieceBytes);
  const size_t most = std::max<size_t>(piece / es, 1);
  if (s.count <= most) return 0;
  const size_t items = (strided_send(s.kind) ? blocks : 1) + (strided_recv(s.kind) ? blocks : 1) + kStagedChunkItems;
  if (kStagedCallItems / items < 2) return 0;  // so many ranks that two chunks would be too many
  const size_t chunks = std::min((s.count + most - 1) / most, kStagedCallItems / items);
  return (s.count + chunks - 1) / chunks;  // even chunks: no small one at the end
}

}  // namespace kolo
