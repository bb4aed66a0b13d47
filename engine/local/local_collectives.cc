#include "engine/local/local_collectives.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/local/chunk_pipeline.h"
#include "kernels/host_kernels.h"

namespace kolo {
namespace {

using Shape = ChunkPipeline::Shape;

Status no_second(uint64_t) { return Status(); }

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Slice `index` of `elems` elements split `parts` ways, on 64-byte boundaries so the
// reduction's vector loads stay aligned.
std::pair<size_t, size_t> slice_of(size_t elems, int parts, int index, size_t elem_bytes) {
  const size_t unit = std::max<size_t>(1, 64 / elem_bytes);
  const size_t units = ceil_div(elems, unit);
  const size_t base = units / parts, extra = units % parts;
  const size_t first = index * base + std::min<size_t>(index, extra);
  const size_t offset = std::min(elems, first * unit);
  const size_t end = std::min(elems, (first + base + (static_cast<size_t>(index) < extra ? 1 : 0)) * unit);
  return {offset, end - offset};
}

std::string describe(uint64_t shape, uint64_t count) {
  const CollKind kind = static_cast<CollKind>(shape & 0xff);
  const DType dtype = static_cast<DType>((shape >> 8) & 0xff);
  std::string text = str_cat(coll_name(kind), " of ", count, " x ", dtype_name(dtype));
  if (kind == CollKind::kAllreduce || kind == CollKind::kReduce || kind == CollKind::kReduceScatter) {
    text += str_cat(" (", op_name(static_cast<ReduceOp>((shape >> 16) & 0xff)), ")");
  }
  if (kind == CollKind::kBroadcast || kind == CollKind::kReduce) text += str_cat(" root ", (shape >> 24) & 0xffff);
  if (kind == CollKind::kAllreduce || kind == CollKind::kReduce) text += (shape >> 40) & 1 ? " two-shot" : " one-shot";
  return text;
}

struct SignatureView {
  uint64_t sequence, shape, count;
};

// False when the owner was rewriting it (the peer ran on to its next op meanwhile).
bool read_signature(const shm::OpSignature& sig, SignatureView* view) {
  view->sequence = sig.sequence.load(std::memory_order_acquire);
  view->shape = sig.shape.load(std::memory_order_relaxed);
  view->count = sig.count.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return view->sequence != 0 && sig.sequence.load(std::memory_order_relaxed) == view->sequence;
}

// dst = scale(op over every rank's slot at [offset, offset + count) of chunk i), summed in
// rank order on every rank so that all ranks get the same bits. dst may be one of the slots.
Status reduce_slots(const ChunkPipeline& p, int ranks, uint64_t i, size_t offset, size_t count, DType dtype,
                           ReduceOp op, Scale scale, void* dst) {
  if (count == 0) return Status();
  const size_t esize = dtype_size(dtype);
  const void* srcs[kMaxReduceInputs];
  if (ranks <= kMaxReduceInputs) {
    for (int k = 0; k < ranks; ++k) srcs[k] = p.slot(k, i) + offset * esize;
    return reduce_into(dst, srcs, ranks, count, dtype, op, scale);
  }
  // More ranks than one pass takes: accumulate in private memory (dst may be a slot that a
  // later batch still has to read).
  std::vector<char> sum(count * esize);
  int k = 0;
  while (k < ranks) {
    int n = 0;
    if (k > 0) srcs[n++] = sum.data();
    while (n < kMaxReduceInputs && k < ranks) srcs[n++] = p.slot(k++, i) + offset * esize;
    KOLO_TRY(reduce_into(sum.data(), srcs, n, count, dtype, op, k == ranks ? scale : Scale{}));
  }
  std::memcpy(dst, sum.data(), count * esize);
  return Status();
}

}  // namespace

void LocalCollectives::announce(const CollSpec& spec, bool two_shot) {
  my_shape_ = static_cast<uint64_t>(spec.kind) | static_cast<uint64_t>(spec.dtype) << 8 |
              static_cast<uint64_t>(spec.op) << 16 | static_cast<uint64_t>(spec.root & 0xffff) << 24 |
              static_cast<uint64_t>(two_shot) << 40;
  my_count_ = spec.count;
  if (spec.kind == CollKind::kAllgatherv) {
    my_count_ = 1469598103934665603ull;  // FNV-1a over counts and displacements
    for (size_t v : spec.counts) my_count_ = (my_count_ ^ v) * 1099511628211ull;
    for (size_t v : spec.displs) my_count_ = (my_count_ ^ v) * 1099511628211ull;
  }
  shm::RankControl& me = d_.control(d_.index());
  // `current` is rewritten while peers may read it: a seqlock (sequence 0 while it changes).
  me.current.sequence.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (shm::OpSignature* sig : {&me.signatures[op_sequence_ % shm::kSignatureRing], &me.current}) {
    sig->shape.store(my_shape_, std::memory_order_relaxed);
    sig->count.store(my_count_, std::memory_order_relaxed);
    sig->sequence.store(op_sequence_ + 1, std::memory_order_release);
  }
}


Status LocalCollectives::check_peer(int index) const {
  // The peer's current op is ours unless it has run ahead; then its ring has ours (a peer
  // is never 16 ops ahead: the slots hold it back).
  const shm::RankControl& peer = d_.control(index);
  SignatureView view{};
  if (!read_signature(peer.current, &view) || view.sequence != op_sequence_ + 1) {
    read_signature(peer.signatures[op_sequence_ % shm::kSignatureRing], &view);
  }
  const uint64_t sequence = view.sequence, shape = view.shape, count = view.count;
  if (sequence == op_sequence_ + 1 && shape == my_shape_ && count == my_count_) return Status();
  if (sequence != op_sequence_ + 1) {
    return error(Code::kMismatch, "rank ", d_.global_rank(index), " is at collective #", sequence, " while rank ",
                 d_.global_rank(d_.index()), " is at #", op_sequence_ + 1, " (", describe(my_shape_, my_count_), ")");
  }
  return error(Code::kMismatch, "rank ", d_.global_rank(index), " called ", describe(shape, count), " but rank ",
               d_.global_rank(d_.index()), " called ", describe(my_shape_, my_count_));
}

Status LocalCollectives::check_peers(int only_index) const {
  if (only_index >= 0) return only_index == d_.index() ? Status() : check_peer(only_index);
  for (int k = 0; k < d_.size(); ++k) {
    if (k != d_.index()) KOLO_TRY(check_peer(k));
  }
  return Status();
}

Status LocalCollectives::run(const CollCall& call, Algorithm algorithm, const Deadline& deadline) {
  const bool one_shot = algorithm == Algorithm::kOneShot;
  // The algorithm is part of what peers must agree on: a one-shot rank would read the
  // slots that two-shot ranks overwrite with their reduced slices.
  const bool reduces = call.spec.kind == CollKind::kAllreduce || call.spec.kind == CollKind::kReduce;
  announce(call.spec, reduces && !one_shot);
  Status status;
  switch (call.spec.kind) {
    case CollKind::kAllreduce: status = reduction(call, one_shot, -1, deadline); break;
    case CollKind::kReduce: status = reduction(call, one_shot, d_.index_of(call.spec.root), deadline); break;
    case CollKind::kBroadcast: status = broadcast(call, deadline); break;
    case CollKind::kAllgather:
    case CollKind::kAllgatherv: status = allgather(call, deadline); break;
    case CollKind::kReduceScatter: status = reduce_scatter(call, deadline); break;
    case CollKind::kAlltoall: status = alltoall(call, deadline); break;
    case CollKind::kBarrier: status = barrier(deadline); break;
    default: status = error(Code::kInternal, coll_name(call.spec.kind), " has no one-host algorithm");
  }
  ++op_sequence_;
  if (!status.ok()) d_.mark_failed();  // the peers must not wait for us until their deadline
  return status;
}

// Allreduce (root < 0) and reduce (to root): the same chunks, slots and slices; reduce
// only differs in who reduces the whole chunk (one-shot) or copies the slices out (two-shot).
Status LocalCollectives::reduction(const CollCall& call, bool one_shot, int root, const Deadline& deadline) {
  const CollSpec& s = call.spec;
  const size_t esize = dtype_size(s.dtype), chunk_elems = d_.slot_bytes() / esize;
  const uint64_t chunks = ceil_div(s.count, chunk_elems);
  const int n = d_.size(), me = d_.index();
  const bool mine = root < 0 || root == me;  // this rank's output gets the result
  const char* in = static_cast<const char*>(call.send);
  char* out = static_cast<char*>(call.recv);
  ChunkPipeline p(d_, next_chunk_, deadline);
  next_chunk_ += chunks;
  auto elems = [&](uint64_t i) { return std::min<size_t>(chunk_elems, s.count - i * chunk_elems); };
  auto fill = [&](uint64_t i, char* slot) {
    return scale_copy(slot, in + i * chunk_elems * esize, elems(i), s.dtype, call.prescale);
  };
  if (one_shot) {
    auto first = [&](uint64_t i) -> Status {
      if (!mine) return Status();
      if (i == 0) KOLO_TRY(check_peers(-1));
      return reduce_slots(p, n, i, 0, elems(i), s.dtype, s.op, call.postscale, out + i * chunk_elems * esize);
    };
    // Ranks that get no result only lend their slots: they wait for nobody.
    return p.run(Shape{chunks, false, true, mine ? -1 : me}, fill, first, no_second);
  }
  auto first = [&](uint64_t i) -> Status {
    if (i == 0) KOLO_TRY(check_peers(-1));
    auto [offset, count] = slice_of(elems(i), n, me, esize);
    return reduce_slots(p, n, i, offset, count, s.dtype, s.op, call.postscale, p.my_slot(i) + offset * esize);
  };
  auto second = [&](uint64_t i) -> Status {
    for (int q = 0; q < n; ++q) {
      auto [offset, count] = slice_of(elems(i), n, q, esize);
      std::memcpy(out + (i * chunk_elems + offset) * esize, p.slot(q, i) + offset * esize, count * esize);
    }
    return Status();
  };
  return p.run(Shape{chunks, true, mine, -1}, fill, first, second);
}

Status LocalCollectives::broadcast(const CollCall& call, const Deadline& deadline) {
  const CollSpec& s = call.spec;
  const size_t bytes = s.bytes(), chunk_bytes = d_.slot_bytes();
  const uint64_t chunks = ceil_div(bytes, chunk_bytes);
  const int me = d_.index(), root = d_.index_of(s.root);
  const char* in = static_cast<const char*>(call.send);
  char* out = static_cast<char*>(call.recv);
  ChunkPipeline p(d_, next_chunk_, deadline);
  next_chunk_ += chunks;
  auto piece = [&](uint64_t i) { return std::min<size_t>(chunk_bytes, bytes - i * chunk_bytes); };
  auto fill = [&](uint64_t i, char* slot) -> Status {
    if (me != root) return Status();
    std::memcpy(slot, in + i * chunk_bytes, piece(i));
    if (out != in) std::memcpy(out + i * chunk_bytes, slot, piece(i));
    return Status();
  };
  auto first = [&](uint64_t i) -> Status {
    if (me == root) return Status();
    if (i == 0) KOLO_TRY(check_peers(root));
    std::memcpy(out + i * chunk_bytes, p.slot(root, i), piece(i));
    return Status();
  };
  return p.run(Shape{chunks, false, true, root}, fill, first, no_second);
}

Status LocalCollectives::allgather(const CollCall& call, const Deadline& deadline) {
  const CollSpec& s = call.spec;
  const int n = d_.size(), me = d_.index();
  const size_t esize = dtype_size(s.dtype), chunk_elems = d_.slot_bytes() / esize;
  std::vector<size_t> counts(n, s.count), displs(n);
  for (int q = 0; q < n; ++q) displs[q] = static_cast<size_t>(q) * s.count;
  if (s.kind == CollKind::kAllgatherv) {
    for (int q = 0; q < n; ++q) {
      counts[q] = s.counts[d_.global_rank(q)];
      displs[q] = s.displs[d_.global_rank(q)];
    }
  }
  const uint64_t chunks = ceil_div(*std::max_element(counts.begin(), counts.end()), chunk_elems);
  const char* in = static_cast<const char*>(call.send);
  char* out = static_cast<char*>(call.recv);
  char* my_block = out + displs[me] * esize;
  ChunkPipeline p(d_, next_chunk_, deadline);
  next_chunk_ += chunks;
  auto piece = [&](int q, uint64_t i) {
    return i * chunk_elems >= counts[q] ? size_t{0} : std::min(chunk_elems, counts[q] - i * chunk_elems);
  };
  auto fill = [&](uint64_t i, char* slot) -> Status {
    const size_t bytes = piece(me, i) * esize, offset = i * chunk_elems * esize;
    std::memcpy(slot, in + offset, bytes);
    if (my_block != in) std::memcpy(my_block + offset, slot, bytes);
    return Status();
  };
  auto first = [&](uint64_t i) -> Status {
    if (i == 0) KOLO_TRY(check_peers(-1));
    for (int q = 0; q < n; ++q) {
      if (q != me) std::memcpy(out + (displs[q] + i * chunk_elems) * esize, p.slot(q, i), piece(q, i) * esize);
    }
    return Status();
  };
  return p.run(Shape{chunks, false, true, -1}, fill, first, no_second);
}

namespace {
// reduce_scatter and alltoall: the buffers hold one block of `count` elements per rank, and
// chunk i is elems(i) elements of every block; in the slot, block q's piece sits at
// in_slot(q, i).
struct BlockChunks {
  BlockChunks(size_t slot_bytes, int ranks, DType dtype, size_t block_count)
      : esize(dtype_size(dtype)), chunk_elems(slot_bytes / (esize * ranks)), count(block_count),
        chunks(ceil_div(block_count, chunk_elems)) {}
  size_t elems(uint64_t i) const { return std::min<size_t>(chunk_elems, count - i * chunk_elems); }
  size_t in_buffer(int block, uint64_t i) const { return (block * count + i * chunk_elems) * esize; }
  size_t in_slot(int block, uint64_t i) const { return block * elems(i) * esize; }
  size_t esize, chunk_elems, count;
  uint64_t chunks;
};
}  // namespace

Status LocalCollectives::reduce_scatter(const CollCall& call, const Deadline& deadline) {
  const CollSpec& s = call.spec;
  const int n = d_.size(), me = d_.index();
  const BlockChunks b(d_.slot_bytes(), n, s.dtype, s.count);
  const char* in = static_cast<const char*>(call.send);
  char* out = static_cast<char*>(call.recv);
  ChunkPipeline p(d_, next_chunk_, deadline);
  next_chunk_ += b.chunks;
  auto fill = [&](uint64_t i, char* slot) -> Status {
    for (int q = 0; q < n; ++q) {
      KOLO_TRY(scale_copy(slot + b.in_slot(q, i), in + b.in_buffer(q, i), b.elems(i), s.dtype, call.prescale));
    }
    return Status();
  };
  auto first = [&](uint64_t i) -> Status {
    if (i == 0) KOLO_TRY(check_peers(-1));
    return reduce_slots(p, n, i, me * b.elems(i), b.elems(i), s.dtype, s.op, call.postscale,
                        out + i * b.chunk_elems * b.esize);
  };
  return p.run(Shape{b.chunks, false, true, -1}, fill, first, no_second);
}

Status LocalCollectives::alltoall(const CollCall& call, const Deadline& deadline) {
  const CollSpec& s = call.spec;
  const int n = d_.size(), me = d_.index();
  const BlockChunks b(d_.slot_bytes(), n, s.dtype, s.count);
  const char* in = static_cast<const char*>(call.send);
  char* out = static_cast<char*>(call.recv);
  ChunkPipeline p(d_, next_chunk_, deadline);
  next_chunk_ += b.chunks;
  auto fill = [&](uint64_t i, char* slot) -> Status {
    for (int q = 0; q < n; ++q) {
      if (q != me) std::memcpy(slot + b.in_slot(q, i), in + b.in_buffer(q, i), b.elems(i) * b.esize);
    }
    if (out != in) std::memcpy(out + b.in_buffer(me, i), in + b.in_buffer(me, i), b.elems(i) * b.esize);
    return Status();
  };
  auto first = [&](uint64_t i) -> Status {
    if (i == 0) KOLO_TRY(check_peers(-1));
    for (int q = 0; q < n; ++q) {
      if (q != me) std::memcpy(out + b.in_buffer(q, i), p.slot(q, i) + b.in_slot(me, i), b.elems(i) * b.esize);
    }
    return Status();
  };
  return p.run(Shape{b.chunks, false, true, -1}, fill, first, no_second);
}

Status LocalCollectives::barrier(const Deadline& deadline) {
  ChunkPipeline p(d_, next_chunk_, deadline);
  next_chunk_ += 1;
  auto fill = [](uint64_t, char*) { return Status(); };
  auto first = [&](uint64_t) { return check_peers(-1); };
  return p.run(Shape{1, false, true, -1}, fill, first, no_second);
}

}  // namespace kolo
