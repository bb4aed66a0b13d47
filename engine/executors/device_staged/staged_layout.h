// How the device_staged executor (staged_device_executor.cc) cuts a device call and lays
// it out in pinned host staging: the bytes a call reads and writes, the slots of pinned
// memory, the chunk rule, and the views (sets of equal pieces on the device) that become
// the copies in and out. Separate from the executor's threads and queues so that each
// reads on its own; only that executor includes it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "engine/collective.h"
#include "engine/planner/staged_chunking.h"
#include "support/device/device.h"
#include "support/status.h"

namespace kolo::staged {

// Bytes of the input and output buffers of a call on `ranks` ranks (what the API checks).
struct CallBytes {
  size_t in = 0, out = 0;
};

inline CallBytes bytes_of(const CollSpec& s, int ranks, int rank) {
  const size_t n = s.bytes(), all = n * static_cast<size_t>(ranks);
  switch (s.kind) {
    case CollKind::kAllreduce:
    case CollKind::kBroadcast:
    case CollKind::kReduce: return {n, n};
    case CollKind::kAllgather: return {n, all};
    case CollKind::kAllgatherv: {
      size_t end = 0;
      for (size_t q = 0; q < s.counts.size() && q < s.displs.size(); ++q) end = std::max(end, s.displs[q] + s.counts[q]);
      return {s.counts.size() > static_cast<size_t>(rank) ? s.counts[rank] * dtype_size(s.dtype) : n,
              end * dtype_size(s.dtype)};
    }
    case CollKind::kReduceScatter: return {all, n};
    case CollKind::kAlltoall: return {all, all};
    case CollKind::kSend: return {n, 0};
    case CollKind::kRecv: return {0, n};
    case CollKind::kBarrier: return {0, 0};
  }
  return {0, 0};
}

// Staging slots of pinned host memory per communicator, each holding one chunk's regions:
// three are what the pipeline needs (copy in of chunk i+1, host collective on chunk i,
// copy out of chunk i-1), one more lets the copies run ahead of a slow collective.
constexpr int kStagedSlots = 4;
// Regions in a slot start on this boundary (copy engines prefer aligned addresses).
constexpr size_t kStagedAlign = 256;
inline size_t staged_aligned(size_t bytes) { return (bytes + kStagedAlign - 1) / kStagedAlign * kStagedAlign; }
// The bytes of one slot: the largest chunk chunk_elems makes on `ranks` ranks, both sides
// (an elementwise call's send and recv; a rank-major call's `ranks` pieces and its own one).
inline size_t staged_slot_bytes(int ranks) {
  const size_t n = static_cast<size_t>(std::max(ranks, 1));
  const size_t piece = std::max(kStagedChunkBytes / n, kStagedMinPieceBytes);
  const size_t rank_major = staged_aligned(n * piece) + staged_aligned(piece);
  return std::max(2 * kStagedChunkBytes, rank_major);
}

// Where one buffer of a host call lies on the device: `blocks` pieces of `bytes`, `stride`
// apart. The staging holds the pieces end to end. A whole buffer is one piece.
struct View {
  const char* device = nullptr;  // the first piece; null: the buffer is not used
  size_t blocks = 1, stride = 0, bytes = 0;
  size_t total() const { return blocks * bytes; }
  bool used() const { return device != nullptr && total() > 0; }
  const char* end() const { return device + (blocks - 1) * stride + bytes; }  // of the last piece
  // Adjacent pieces are one piece.
  View normal() const {
    if (blocks > 1 && stride == bytes) return View{device, 1, 0, total()};
    return *this;
  }
  // Where [d, d + n) lies in this view's staging; npos when it is not inside one piece.
  static constexpr size_t npos = ~size_t{0};
  size_t locate(const char* d, size_t n) const {
    if (d < device) return npos;
    const size_t rel = static_cast<size_t>(d - device);
    const size_t q = blocks == 1 ? 0 : rel / stride;
    if (q >= blocks) return npos;
    const size_t in_piece = rel - q * stride;
    if (in_piece + n > bytes) return npos;
    return q * bytes + in_piece;
  }
  // Whether every piece of `inner` lies inside one piece of this view.
  bool holds(const View& inner) const {
    for (size_t q = 0; q < inner.blocks; ++q) {
      if (locate(inner.device + q * inner.stride, inner.bytes) == npos) return false;
    }
    return true;
  }
};

inline bool overlap(const View& a, const View& b) {
  return a.used() && b.used() && a.device < b.end() && b.device < a.end();
}

// One host call of an operation: the call (device pointers, the chunk's count) and where
// its send and recv buffers lie on the device.
struct Part {
  CollCall call;
  View send, recv;
};

// Where a part's buffers go: one or two regions, each one host buffer holding the pieces of
// its view end to end.
struct Layout {
  View region[2];
  int regions = 0;
  int send_in = -1, recv_in = -1;  // the region that holds each buffer; -1: not used
  bool whole_in = false;           // copy the whole region in (a span), not only the send pieces
};

// Aliasing is kept: buffers that overlap on the device overlap alike in the staging, so
// the host plan runs in place exactly when the device call does.
inline Status layout_of(const Part& p, int rank, Layout* out) {
  Layout l;
  const View& s = p.send;
  const View& r = p.recv;
  if (overlap(s, r)) {
    if (s.blocks == 1 && r.blocks == 1) {
      // One span covers both, copied in whole: the host plan may read any of it (and an
      // allgatherv's gaps must come back as they were).
      const char* lo = std::min(s.device, r.device);
      const char* hi = std::max(s.end(), r.end());
      l.region[0] = View{lo, 1, 0, static_cast<size_t>(hi - lo)};
      l.whole_in = true;
    } else {
      // A chunk in place: the one-piece side is a piece of the strided side (allgather's
      // own block in recv, reduce_scatter's in send), or both are the same (alltoall).
      const View& outer = s.total() >= r.total() ? s : r;
      const View& inner = s.total() >= r.total() ? r : s;
      if (!outer.holds(inner)) {
        return error(Code::kInternal, "rank ", rank, ": device ", coll_name(p.call.spec.kind),
                     " chunk with send and recv overlapping in a way staging cannot reproduce");
      }
      l.region[0] = outer;
    }
    l.regions = 1;
    l.send_in = l.recv_in = 0;
  } else {
    if (s.used()) {
      l.region[l.regions] = s;
      l.send_in = l.regions++;
    }
    if (r.used()) {
      l.region[l.regions] = r;
      l.recv_in = l.regions++;
    }
  }
  *out = l;
  return Status();
}

// Elements [first, first + c) of every block of `call` (the whole call: 0, count).
inline Part part_of(const CollCall& call, size_t first, size_t c, int ranks, int rank) {
  Part p;
  p.call = call;
  CollSpec& s = p.call.spec;
  // A broadcast's send buffer is read at the root only; elsewhere it may be anything.
  if (s.kind == CollKind::kBroadcast && s.root != rank && !s.in_place) p.call.send = nullptr;
  const char* send = static_cast<const char*>(p.call.send);
  const char* recv = static_cast<const char*>(p.call.recv);
  if (elementwise(s.kind) || rank_major(s.kind)) {
    const size_t es = dtype_size(s.dtype), block = s.count * es, piece = c * es, off = first * es;
    const size_t n = static_cast<size_t>(ranks);
    if (send != nullptr) p.send = View{send + off, strided_send(s.kind) ? n : 1, block, piece}.normal();
    if (recv != nullptr) p.recv = View{recv + off, strided_recv(s.kind) ? n : 1, block, piece}.normal();
    s.count = c;
  } else {  // whole calls only
    const CallBytes b = bytes_of(s, ranks, rank);
    if (send != nullptr) p.send = View{send, 1, 0, b.in};
    if (recv != nullptr) p.recv = View{recv, 1, 0, b.out};
  }
  return p;
}

// Whether a single call can be cut in chunks: not where its send and recv overlap other
// than in place (the API refuses such calls; the executor refuses a Plan that cuts one).
inline bool cuttable(const CollCall& call, int ranks, int rank) {
  const Part whole = part_of(call, 0, call.spec.count, ranks, rank);
  return !overlap(whole.send, whole.recv) || call.spec.in_place;
}

// The stream items a staged run of calls[0..n) enqueues, cut in chunks of `per` elements
// (0: whole; a group always is): per chunk a copy in or out per piece, and
// kStagedChunkItems more.
inline size_t stream_items(const CollCall* calls, size_t n, size_t per, int ranks, int rank) {
  auto pieces = [](const Part& p) { return (p.send.used() ? p.send.blocks : 0) + (p.recv.used() ? p.recv.blocks : 0); };
  if (n != 1) per = 0;
  if (per == 0) {
    size_t items = kStagedChunkItems;
    for (size_t i = 0; i < n; ++i) items += pieces(part_of(calls[i], 0, calls[i].spec.count, ranks, rank));
    return items;
  }
  const size_t chunks = (calls[0].spec.count + per - 1) / per;
  return chunks * (pieces(part_of(calls[0], 0, per, ranks, rank)) + kStagedChunkItems);
}

}  // namespace kolo::staged
