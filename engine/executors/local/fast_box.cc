#include "engine/executors/local/fast_box.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "kernels/host_kernels.h"
#include "kernels/reduce_small.h"
#include "support/probe.h"

namespace kolo {

// The first line: the flag (1 + the fast call number, written last, with release), the
// call's op number and signature, then the payload, which runs on into the box's other
// lines. The op number catches a peer whose fast call of the same shape is another op (it
// ran a staging-slot call in between that this rank did not).
struct alignas(64) FastBoxes::Box {
  std::atomic<uint64_t> tag;
  uint64_t op;  // 1 + the op number (OpSignatures::sequence)
  uint64_t shape;
  uint64_t count;
  char payload[kPayloadBytes];
};
// A rank runs at most kBoxes - 1 fast calls, or the staging slots (64 at most) chunks, ahead
// of a peer that may still read its op signatures.
static_assert(FastBoxes::kBoxes - 1 + 64 < kSignatureRing);

FastBoxes::FastBoxes(SharedDomain& domain, OpSignatures& signatures)
    : d_(domain), signatures_(signatures), n_(domain.size()), me_(domain.index()), seen_(domain.size(), 0) {
  for (int i = 0; i < domain.size(); ++i) areas_.push_back(domain.fast_area(i));
}

FastBoxes::Box& FastBoxes::box(int index, uint64_t call) const {
  static_assert(sizeof(Box) == kBoxBytes && kBoxBytes % 64 == 0 && offsetof(Box, payload) == kHeaderBytes);
  return reinterpret_cast<Box*>(areas_[index])[call % kBoxes];
}

Status FastBoxes::wait_posted(int index, uint64_t tag, const Deadline& deadline, const char* what) {
  if (seen_[index] >= tag) return Status();
  const std::atomic<uint64_t>& word = box(index, tag - 1).tag;
  // Posted already (a peer ahead of us): no call into the domain's wait.
  if (word.load(std::memory_order_relaxed) < tag) KOLO_TRY(d_.wait_word(index, word, tag, deadline, what, signatures_));
  // Acquire: a later wait_box may skip its wait on what this load saw and read that box.
  seen_[index] = std::max(tag, word.load(std::memory_order_acquire));
  return Status();
}

// Member `index`'s box of call f, once posted, holding the same call as this rank's.
Status FastBoxes::wait_box(int index, uint64_t f, const Deadline& deadline, const char* what) {
  const Box& b = box(index, f);
  // Posted already (a peer ahead of us, or seen before): no call into the wait.
  uint64_t posted = seen_[index];
  if (posted <= f && (posted = b.tag.load(std::memory_order_acquire)) > f) seen_[index] = posted;
  if (posted <= f) KOLO_TRY(wait_posted(index, f + 1, deadline, what));
  if (b.op != signatures_.sequence() + 1) {
    return error(Code::kMismatch, "rank ", d_.global_rank(index), " ran this small collective as its collective #",
                 b.op, " while rank ", d_.global_rank(d_.index()), " is at #", signatures_.sequence() + 1,
                 " (the ranks ran different calls before it)");
  }
  if (b.shape != signatures_.shape() || b.count != signatures_.count()) {
    return signatures_.mismatch(index, b.shape, b.count);
  }
  return Status();
}

// dst = postscale(op over every rank's box of call f, from `offset` bytes into each), in
// rank order on every rank so that all get the same bits (the staging slots sum alike).
Status FastBoxes::reduce_boxes(const CollCall& call, uint64_t f, void* dst, size_t offset) {
  const CollSpec& s = call.spec;
  const int n = n_;
  const void* srcs[kMaxReduceInputs];
  if (n <= kMaxReduceInputs) {
    for (int k = 0; k < n; ++k) srcs[k] = box(k, f).payload + offset;
    // A few elements (the common small call): inline, the same bits (kernels/reduce_small.h).
    if (call.postscale.identity() && reduce_small(dst, srcs, n, s.count, s.dtype, s.op)) return Status();
    return reduce_into(dst, srcs, n, s.count, s.dtype, s.op, call.postscale);
  }
  if (scratch_.size() < s.bytes()) scratch_.resize(s.bytes());
  void* sum = scratch_.data();
  int k = 0;
  while (k < n) {
    int m = 0;
    if (k > 0) srcs[m++] = sum;
    while (m < kMaxReduceInputs && k < n) srcs[m++] = box(k++, f).payload + offset;
    KOLO_TRY(reduce_into(sum, srcs, m, s.count, s.dtype, s.op, k == n ? call.postscale : Scale{}));
  }
  std::memcpy(dst, sum, s.bytes());
  return Status();
}

Status FastBoxes::run(const CollCall& call, const Deadline& deadline) {
  const CollSpec& s = call.spec;
  const int n = n_, me = me_;
  const uint64_t f = calls_++;
  // My box of call f - kBoxes is free once every peer has posted call f - kBoxes + 1.
  if (f >= kBoxes) {
    for (int q = 0; q < n; ++q) {
      if (q != me && seen_[q] < f - kBoxes + 2) {
        KOLO_TRY(wait_posted(q, f - kBoxes + 2, deadline, "waiting for the peers to finish with a small message"));
      }
    }
  }
  const char* in = static_cast<const char*>(call.send);
  char* out = static_cast<char*>(call.recv);
  const int root = s.kind == CollKind::kBroadcast || s.kind == CollKind::kReduce ? d_.index_of(s.root) : -1;
  const size_t esize = dtype_size(s.dtype);

  // Post: my contribution (prescaled for reductions), then the signature and the flag.
  Box& mine = box(me, f);
  switch (s.kind) {
    case CollKind::kAllreduce:
    case CollKind::kReduce:
      if (call.prescale.identity()) {
        std::memcpy(mine.payload, in, s.bytes());
      } else {
        KOLO_TRY(scale_copy(mine.payload, in, s.count, s.dtype, call.prescale));
      }
      break;
    case CollKind::kBroadcast:
      if (me == root) {
        std::memcpy(mine.payload, in, s.bytes());
        if (out != in) std::memcpy(out, in, s.bytes());
      }
      break;
    case CollKind::kAllgather:
    case CollKind::kAllgatherv: {
      const int rank = d_.global_rank(me);
      const size_t count = s.kind == CollKind::kAllgather ? s.count : s.counts[rank];
      const size_t displ = s.kind == CollKind::kAllgather ? rank * s.count : s.displs[rank];
      std::memcpy(mine.payload, in, count * esize);
      if (out + displ * esize != in) std::memcpy(out + displ * esize, in, count * esize);
      break;
    }
    case CollKind::kReduceScatter: KOLO_TRY(scale_copy(mine.payload, in, s.count * n, s.dtype, call.prescale)); break;
    case CollKind::kAlltoall: std::memcpy(mine.payload, in, s.bytes() * n); break;
    default: break;  // barrier: the flag alone
  }
  mine.op = signatures_.sequence() + 1;
  mine.shape = signatures_.shape();
  mine.count = signatures_.count();
  d_.publish_word(mine.tag, f + 1);
  signatures_.publish();  // for a peer in another protocol's wait; our peers read the box's header
  KOLO_PROBE(kPublished);

  // Take: what this rank reads of its peers' boxes.
  switch (s.kind) {
    case CollKind::kAllreduce:
    case CollKind::kReduce:
      if (root >= 0 && me != root) return Status();  // the root reads; we only lend our box
      for (int q = 0; q < n; ++q) {
        if (q != me) KOLO_TRY(wait_box(q, f, deadline, "waiting for the peers' data"));
      }
      KOLO_PROBE(kPeerSeen);
      KOLO_TRY(reduce_boxes(call, f, out, 0));
      KOLO_PROBE(kReduced);
      return Status();
    case CollKind::kBroadcast:
      if (me == root) return Status();
      KOLO_TRY(wait_box(root, f, deadline, "waiting for the root's data"));
      std::memcpy(out, box(root, f).payload, s.bytes());
      return Status();
    case CollKind::kAllgather:
    case CollKind::kAllgatherv:
      for (int q = 0; q < n; ++q) {
        if (q == me) continue;
        KOLO_TRY(wait_box(q, f, deadline, "waiting for the peers' data"));
        const int rank = d_.global_rank(q);
        const size_t count = s.kind == CollKind::kAllgather ? s.count : s.counts[rank];
        const size_t displ = s.kind == CollKind::kAllgather ? rank * s.count : s.displs[rank];
        std::memcpy(out + displ * esize, box(q, f).payload, count * esize);
      }
      return Status();
    case CollKind::kReduceScatter:
      for (int q = 0; q < n; ++q) {
        if (q != me) KOLO_TRY(wait_box(q, f, deadline, "waiting for the peers' data"));
      }
      return reduce_boxes(call, f, out, me * s.bytes());
    case CollKind::kAlltoall:
      // My block of every rank's box, my own from my box too (in place, out is in).
      for (int q = 0; q < n; ++q) {
        if (q != me) KOLO_TRY(wait_box(q, f, deadline, "waiting for the peers' data"));
      }
      for (int q = 0; q < n; ++q) std::memcpy(out + q * s.bytes(), box(q, f).payload + me * s.bytes(), s.bytes());
      return Status();
    case CollKind::kBarrier:
      for (int q = 0; q < n; ++q) {
        if (q != me) KOLO_TRY(wait_box(q, f, deadline, "waiting for the peers"));
      }
      return Status();
    default: return error(Code::kInternal, coll_name(s.kind), " has no fast-box form");
  }
}

}  // namespace kolo
