// The one-host collectives, written once over an ops policy (local_ops.h): every rank
// copies its input into its own staging slots and reads its peers' slots directly.
//   one-shot  (allreduce, reduce; small): each rank reduces the whole chunk from every slot;
//   two-shot  (large): each rank reduces 1/n of the chunk from every slot into its own
//             slot, then every rank copies all reduced slices out;
//   broadcast: the root posts, the others copy out of its slot; allgather(v), reduce_scatter,
//             alltoall: every rank posts its blocks and takes what is its own from the others;
//   barrier:  one empty chunk through the same counters.
// Each chunk follows ChunkPipeline (chunk_pipeline.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/collective.h"
#include "engine/local/chunk_pipeline.h"
#include "engine/schedules/schedule.h"
#include "kernels/compress.h"
#include "kernels/host_kernels.h"
#include "support/status.h"

namespace kolo {
namespace local_detail {

inline uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Slice `index` of `elems` elements split `parts` ways, on 64-byte boundaries so the
// reduction's vector loads stay aligned.
inline std::pair<size_t, size_t> slice_of(size_t elems, int parts, int index, size_t elem_bytes) {
  const size_t unit = std::max<size_t>(1, 64 / elem_bytes);
  const size_t units = ceil_div(elems, unit);
  const size_t base = units / parts, extra = units % parts;
  const size_t first = index * base + std::min<size_t>(index, extra);
  const size_t offset = std::min(elems, first * unit);
  const size_t end = std::min(elems, (first + base + (static_cast<size_t>(index) < extra ? 1 : 0)) * unit);
  return {offset, end - offset};
}

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

inline Status no_second(uint64_t) { return Status(); }

}  // namespace local_detail

template <class Ops>
class LocalPrograms {
 public:
  using Pipeline = ChunkPipeline<Ops>;
  using Shape = typename Pipeline::Shape;

  // next_chunk: the domain's chunk counter, advanced by every program (all ranks alike).
  LocalPrograms(Ops& ops, uint64_t& next_chunk) : ops_(ops), next_chunk_(next_chunk) {}

  // call.spec.op is not kAvg (the communicator turns it into a divisor); algorithm is
  // kOneShot or kTwoShot for allreduce and reduce, ignored otherwise.
  Status run(const CollCall& call, Algorithm algorithm) {
    const bool one_shot = algorithm != Algorithm::kTwoShot;
    switch (call.spec.kind) {
      case CollKind::kAllreduce: return reduction(call, one_shot, -1);
      case CollKind::kReduce: return reduction(call, one_shot, ops_.index_of(call.spec.root));
      case CollKind::kBroadcast: return broadcast(call);
      case CollKind::kAllgather:
      case CollKind::kAllgatherv: return allgather(call);
      case CollKind::kReduceScatter: return reduce_scatter(call);
      case CollKind::kAlltoall: return alltoall(call);
      case CollKind::kBarrier: return barrier();
      default: return error(Code::kInternal, coll_name(call.spec.kind), " has no one-host algorithm");
    }
  }

 private:
  Pipeline pipeline(uint64_t chunks) {
    Pipeline p(ops_, next_chunk_);
    next_chunk_ += chunks;
    return p;
  }

  // dst = scale(op over every rank's slot at [offset, offset + count) of chunk i), summed in
  // rank order on every rank so that all ranks get the same bits. dst may be one of the slots,
  // or (to_output) the call's output, which the call does not read again.
  Status reduce_slots(const Pipeline& p, uint64_t i, size_t offset, size_t count, const CollSpec& s, ScaleUse scale,
                      void* dst, bool to_output = false) {
    if (count == 0) return Status();
    const int ranks = ops_.size();
    const size_t esize = dtype_size(s.dtype);
    const void* srcs[kMaxReduceInputs];
    if (ranks <= kMaxReduceInputs) {
      for (int k = 0; k < ranks; ++k) srcs[k] = p.slot(k, i) + offset * esize;
      if (to_output) return ops_.reduce_out(dst, srcs, ranks, count, s.dtype, s.op, scale);
      return ops_.reduce(dst, srcs, ranks, count, s.dtype, s.op, scale);
    }
    // More ranks than one pass takes: accumulate in private memory (dst may be a slot that a
    // later batch still has to read).
    char* sum = ops_.scratch(count * esize);
    int k = 0;
    while (k < ranks) {
      int n = 0;
      if (k > 0) srcs[n++] = sum;
      while (n < kMaxReduceInputs && k < ranks) srcs[n++] = p.slot(k++, i) + offset * esize;
      KOLO_TRY(ops_.reduce(sum, srcs, n, count, s.dtype, s.op, k == ranks ? scale : ScaleUse::kNone));
    }
    return to_output ? ops_.copy_out(dst, sum, count * esize) : ops_.copy(dst, sum, count * esize);
  }

  // Allreduce (root < 0) and reduce (to root): the same chunks, slots and slices; reduce
  // only differs in who reduces the whole chunk (one-shot) or copies the slices out (two-shot).
  Status reduction(const CollCall& call, bool one_shot, int root) {
    using local_detail::slice_of;
    const CollSpec& s = call.spec;
    const size_t esize = dtype_size(s.dtype), chunk_elems = ops_.slot_bytes() / esize;
    const uint64_t chunks = local_detail::ceil_div(s.count, chunk_elems);
    const int n = ops_.size(), me = ops_.index();
    const bool mine = root < 0 || root == me;  // this rank's output gets the result
    const char* in = static_cast<const char*>(call.send);
    char* out = static_cast<char*>(call.recv);
    Pipeline p = pipeline(chunks);
    auto elems = [&](uint64_t i) { return std::min<size_t>(chunk_elems, s.count - i * chunk_elems); };
    // Step 1 of every chunk: my input, prescaled, into my slot.
    auto fill = [&](uint64_t i, char* slot) {
      return ops_.scale_copy(slot, in + i * chunk_elems * esize, elems(i), s.dtype, ScaleUse::kPre);
    };
    if (one_shot) {
      // Step 2: the whole chunk reduced from every rank's slot into my output, postscaled.
      auto first = [&](uint64_t i) -> Status {
        if (!mine) return Status();
        if (i == 0) KOLO_TRY(ops_.check_peers(-1));
        return reduce_slots(p, i, 0, elems(i), s, ScaleUse::kPost, out + i * chunk_elems * esize, true);
      };
      // Ranks that get no result only lend their slots: they wait for nobody.
      return p.run(Shape{chunks, false, true, mine ? -1 : me}, fill, first, local_detail::no_second);
    }
    // Step 2: my 1/n slice of the chunk reduced from every slot back into my own slot.
    auto first = [&](uint64_t i) -> Status {
      if (i == 0) KOLO_TRY(ops_.check_peers(-1));
      auto [offset, count] = slice_of(elems(i), n, me, esize);
      return reduce_slots(p, i, offset, count, s, ScaleUse::kPost, p.my_slot(i) + offset * esize);
    };
    // Step 3, once every rank has reduced its slice: all reduced slices into my output.
    auto second = [&](uint64_t i) -> Status {
      for (int q = 0; q < n; ++q) {
        auto [offset, count] = slice_of(elems(i), n, q, esize);
        KOLO_TRY(ops_.copy_out(out + (i * chunk_elems + offset) * esize, p.slot(q, i) + offset * esize, count * esize));
      }
      return Status();
    };
    return p.run(Shape{chunks, true, mine, -1}, fill, first, second);
  }


 public:
  // Allreduce of FLOAT32 with the contributions in the slots in a wire type (call.spec.wire:
  // fp16, bf16, block-scaled fp8), each encoded once and summed in fp32, in rank order, so
  // every rank gets the same bits. A chunk's values are split in p slices, each its own
  // wire buffer in the slot (so a rank can reduce its slice alone):
  //   one-shot  every rank decodes and sums every slice of every slot into its output: one
  //             rounding per contribution;
  //   two-shot  rank q sums slice q of every slot, encodes the sum into its own slot's
  //             slice q, and every rank decodes all those: one more rounding, of the result.
  // Called by the host executor only (the recording policy has no codec steps).
  Status compressed_allreduce(const CollCall& call, bool one_shot) {
    using local_detail::slice_of;
    const CollSpec& s = call.spec;
    const WireFormat fmt = wire_format(s.wire);
    const int n = ops_.size(), me = ops_.index();
    const size_t chunk_elems = compressed_chunk_elems(fmt, n);
    if (chunk_elems == 0) {
      return error(Code::kUnsupported, "wire_dtype ", dtype_name(s.wire), ": a staging slot of ", ops_.slot_bytes(),
                   " B cannot hold ", n, " ranks' slices (raise KOLO_SHM_CHUNK_BYTES)");
    }
    const uint64_t chunks = local_detail::ceil_div(s.count, chunk_elems);
    const float* in = static_cast<const float*>(call.send);
    float* out = static_cast<float*>(call.recv);
    Pipeline p = pipeline(chunks);
    auto elems = [&](uint64_t i) { return std::min<size_t>(chunk_elems, s.count - i * chunk_elems); };
    // Slice q of chunk i: its values [first, first + count) and its wire buffer's offset.
    struct Slice {
      size_t first, count, wire_offset;
    };
    auto slice = [&](uint64_t i, int q) {
      size_t offset = 0;
      for (int k = 0; k < q; ++k) offset += wire_slot_bytes(fmt, slice_of(elems(i), n, k, sizeof(float)).second);
      auto [first, count] = slice_of(elems(i), n, q, sizeof(float));
      return Slice{i * chunk_elems + first, count, offset};
    };
    auto fill = [&](uint64_t i, char* slot) -> Status {
      for (int q = 0; q < n; ++q) {
        const Slice sl = slice(i, q);
        KOLO_TRY(ops_.compress(slot + sl.wire_offset, in + sl.first, sl.count, fmt, ScaleUse::kPre));
      }
      return Status();
    };
    auto sum_slice = [&](uint64_t i, int q, float* dst) -> Status {
      const Slice sl = slice(i, q);
      std::vector<const void*> wires(n);
      for (int k = 0; k < n; ++k) wires[k] = p.slot(k, i) + sl.wire_offset;
      return ops_.sum_wires(dst, wires.data(), n, sl.count, fmt, ScaleUse::kPost);
    };
    if (one_shot) {
      auto first = [&](uint64_t i) -> Status {
        if (i == 0) KOLO_TRY(ops_.check_peers(-1));
        for (int q = 0; q < n; ++q) KOLO_TRY(sum_slice(i, q, out + slice(i, q).first));
        return Status();
      };
      return p.run(Shape{chunks, false, true, -1}, fill, first, local_detail::no_second);
    }
    auto first = [&](uint64_t i) -> Status {
      if (i == 0) KOLO_TRY(ops_.check_peers(-1));
      const Slice mine = slice(i, me);
      float* sum = reinterpret_cast<float*>(ops_.scratch(mine.count * sizeof(float)));
      KOLO_TRY(sum_slice(i, me, sum));
      return ops_.compress(p.my_slot(i) + mine.wire_offset, sum, mine.count, fmt, ScaleUse::kNone);
    };
    auto second = [&](uint64_t i) -> Status {
      for (int q = 0; q < n; ++q) {
        const Slice sl = slice(i, q);
        KOLO_TRY(ops_.decompress(out + sl.first, p.slot(q, i) + sl.wire_offset, sl.count, fmt));
      }
      return Status();
    };
    return p.run(Shape{chunks, true, true, -1}, fill, first, second);
  }

  // reduce_scatter and allgather of FLOAT32 with a wire type: the compressed two-shot's
  // phases alone, the same bound and the same bits on every rank.
  //   reduce_scatter  every rank encodes each of its n blocks once into its slot; rank q
  //                   sums block q of every slot in fp32, in rank order (postscaled): one
  //                   rounding per contribution;
  //   allgather       every rank encodes its input once into its slot, and every rank
  //                   decodes every slot, its own too: one rounding of each value.
  Status compressed_scatter_or_gather(const CollCall& call) {
    const CollSpec& s = call.spec;
    const WireFormat fmt = wire_format(s.wire);
    const int n = ops_.size(), me = ops_.index();
    const bool scatter = s.kind == CollKind::kReduceScatter;
    const size_t chunk_elems = wire_values_per_slot(fmt, scatter ? n : 1);
    if (chunk_elems == 0) {
      return error(Code::kUnsupported, "wire_dtype ", dtype_name(s.wire), ": a staging slot of ", ops_.slot_bytes(),
                   " B cannot hold ", n, " ranks' blocks (raise KOLO_SHM_CHUNK_BYTES)");
    }
    const uint64_t chunks = local_detail::ceil_div(s.count, chunk_elems);
    const size_t stride = wire_slot_bytes(fmt, chunk_elems);  // between a chunk's blocks in a slot
    const float* in = static_cast<const float*>(call.send);
    float* out = static_cast<float*>(call.recv);
    Pipeline p = pipeline(chunks);
    auto elems = [&](uint64_t i) { return std::min<size_t>(chunk_elems, s.count - i * chunk_elems); };
    // In place, the output block is read (encoded) by fill(i) before first(i) writes it.
    auto fill = [&](uint64_t i, char* slot) -> Status {
      if (!scatter) return ops_.compress(slot, in + i * chunk_elems, elems(i), fmt, ScaleUse::kPre);
      for (int q = 0; q < n; ++q) {
        KOLO_TRY(ops_.compress(slot + q * stride, in + q * s.count + i * chunk_elems, elems(i), fmt, ScaleUse::kPre));
      }
      return Status();
    };
    auto first = [&](uint64_t i) -> Status {
      if (i == 0) KOLO_TRY(ops_.check_peers(-1));
      if (scatter) {
        std::vector<const void*> wires(n);
        for (int k = 0; k < n; ++k) wires[k] = p.slot(k, i) + me * stride;
        return ops_.sum_wires(out + i * chunk_elems, wires.data(), n, elems(i), fmt, ScaleUse::kPost);
      }
      for (int q = 0; q < n; ++q) {
        KOLO_TRY(ops_.decompress(out + q * s.count + i * chunk_elems, p.slot(q, i), elems(i), fmt));
      }
      return Status();
    };
    return p.run(Shape{chunks, false, true, -1}, fill, first, local_detail::no_second);
  }

  // The most values (a multiple of the fp8 scale block) of which `blocks` wire buffers fit
  // one slot; 0 when not even one block of kWireFp8Block values fits.
  size_t wire_values_per_slot(WireFormat fmt, int blocks) const {
    const size_t unit = kWireFp8Block;
    size_t elems = ops_.slot_bytes() / static_cast<size_t>(blocks) / (fmt.block != 0 ? 1 : 2) / unit * unit;
    while (elems >= unit && blocks * wire_slot_bytes(fmt, elems) > ops_.slot_bytes()) elems -= unit;
    return elems >= unit ? elems : 0;
  }

  // A slice's wire buffer in the slot, 64-byte aligned for the next one.
  static size_t wire_slot_bytes(WireFormat fmt, size_t count) { return (wire_bytes(fmt, count) + 63) & ~size_t{63}; }
  // The most values a chunk may have so that its p slices' wire buffers fill one slot (0:
  // not even 16 values per slice fit).
  size_t compressed_chunk_elems(WireFormat fmt, int n) const {
    const size_t unit = 16 * static_cast<size_t>(n);  // slice_of's 64-byte units, one per slice
    const double bytes_per_value = static_cast<double>(wire_bytes(fmt, size_t{1} << 20)) / (size_t{1} << 20);
    size_t elems = static_cast<size_t>(ops_.slot_bytes() / bytes_per_value) / unit * unit;
    auto fits = [&](size_t e) {
      size_t total = 0;
      for (int q = 0; q < n; ++q) total += wire_slot_bytes(fmt, local_detail::slice_of(e, n, q, sizeof(float)).second);
      return total <= ops_.slot_bytes();
    };
    while (elems > unit && !fits(elems)) elems -= unit;
    elems = std::max(elems, unit);
    return fits(elems) ? elems : 0;
  }

 private:

  // The root copies its input into its slot (and output); every other rank copies it out.
  Status broadcast(const CollCall& call) {
    const CollSpec& s = call.spec;
    const size_t bytes = s.bytes(), chunk_bytes = ops_.slot_bytes();
    const uint64_t chunks = local_detail::ceil_div(bytes, chunk_bytes);
    const int me = ops_.index(), root = ops_.index_of(s.root);
    const char* in = static_cast<const char*>(call.send);
    char* out = static_cast<char*>(call.recv);
    Pipeline p = pipeline(chunks);
    auto piece = [&](uint64_t i) { return std::min<size_t>(chunk_bytes, bytes - i * chunk_bytes); };
    auto fill = [&](uint64_t i, char* slot) -> Status {
      if (me != root) return Status();
      KOLO_TRY(ops_.copy(slot, in + i * chunk_bytes, piece(i)));
      if (out != in) KOLO_TRY(ops_.copy_out(out + i * chunk_bytes, slot, piece(i)));
      return Status();
    };
    auto first = [&](uint64_t i) -> Status {
      if (me == root) return Status();
      if (i == 0) KOLO_TRY(ops_.check_peers(root));
      return ops_.copy_out(out + i * chunk_bytes, p.slot(root, i), piece(i));
    };
    return p.run(Shape{chunks, false, true, root}, fill, first, local_detail::no_second);
  }

  // Every rank posts its block (and copies it to its own place in the output); every rank
  // copies the others' blocks out of their slots. Allgatherv: blocks of their own sizes.
  Status allgather(const CollCall& call) {
    const CollSpec& s = call.spec;
    const int n = ops_.size(), me = ops_.index();
    const size_t esize = dtype_size(s.dtype), chunk_elems = ops_.slot_bytes() / esize;
    std::vector<size_t> counts(n, s.count), displs(n);
    for (int q = 0; q < n; ++q) displs[q] = static_cast<size_t>(q) * s.count;
    if (s.kind == CollKind::kAllgatherv) {
      for (int q = 0; q < n; ++q) {
        counts[q] = s.counts[ops_.global_rank(q)];
        displs[q] = s.displs[ops_.global_rank(q)];
      }
    }
    const uint64_t chunks = local_detail::ceil_div(*std::max_element(counts.begin(), counts.end()), chunk_elems);
    const char* in = static_cast<const char*>(call.send);
    char* out = static_cast<char*>(call.recv);
    char* my_block = out + displs[me] * esize;
    Pipeline p = pipeline(chunks);
    auto piece = [&](int q, uint64_t i) {
      return i * chunk_elems >= counts[q] ? size_t{0} : std::min(chunk_elems, counts[q] - i * chunk_elems);
    };
    auto fill = [&](uint64_t i, char* slot) -> Status {
      const size_t bytes = piece(me, i) * esize, offset = i * chunk_elems * esize;
      if (bytes == 0) return Status();
      KOLO_TRY(ops_.copy(slot, in + offset, bytes));
      if (my_block != in) KOLO_TRY(ops_.copy_out(my_block + offset, slot, bytes));
      return Status();
    };
    auto first = [&](uint64_t i) -> Status {
      if (i == 0) KOLO_TRY(ops_.check_peers(-1));
      for (int q = 0; q < n; ++q) {
        if (q == me || piece(q, i) == 0) continue;
        KOLO_TRY(ops_.copy_out(out + (displs[q] + i * chunk_elems) * esize, p.slot(q, i), piece(q, i) * esize));
      }
      return Status();
    };
    return p.run(Shape{chunks, false, true, -1}, fill, first, local_detail::no_second);
  }

  // Every rank posts all its blocks, prescaled; each reduces block `me` from every slot.
  Status reduce_scatter(const CollCall& call) {
    const CollSpec& s = call.spec;
    const int n = ops_.size(), me = ops_.index();
    const local_detail::BlockChunks b(ops_.slot_bytes(), n, s.dtype, s.count);
    const char* in = static_cast<const char*>(call.send);
    char* out = static_cast<char*>(call.recv);
    Pipeline p = pipeline(b.chunks);
    auto fill = [&](uint64_t i, char* slot) -> Status {
      for (int q = 0; q < n; ++q) {
        KOLO_TRY(ops_.scale_copy(slot + b.in_slot(q, i), in + b.in_buffer(q, i), b.elems(i), s.dtype, ScaleUse::kPre));
      }
      return Status();
    };
    auto first = [&](uint64_t i) -> Status {
      if (i == 0) KOLO_TRY(ops_.check_peers(-1));
      return reduce_slots(p, i, me * b.elems(i), b.elems(i), s, ScaleUse::kPost, out + i * b.chunk_elems * b.esize,
                          true);
    };
    return p.run(Shape{b.chunks, false, true, -1}, fill, first, local_detail::no_second);
  }

  // Every rank posts the blocks meant for the others; each copies block `me` out of every slot.
  Status alltoall(const CollCall& call) {
    const CollSpec& s = call.spec;
    const int n = ops_.size(), me = ops_.index();
    const local_detail::BlockChunks b(ops_.slot_bytes(), n, s.dtype, s.count);
    const char* in = static_cast<const char*>(call.send);
    char* out = static_cast<char*>(call.recv);
    Pipeline p = pipeline(b.chunks);
    auto fill = [&](uint64_t i, char* slot) -> Status {
      for (int q = 0; q < n; ++q) {
        if (q != me) KOLO_TRY(ops_.copy(slot + b.in_slot(q, i), in + b.in_buffer(q, i), b.elems(i) * b.esize));
      }
      if (out != in) KOLO_TRY(ops_.copy_out(out + b.in_buffer(me, i), in + b.in_buffer(me, i), b.elems(i) * b.esize));
      return Status();
    };
    auto first = [&](uint64_t i) -> Status {
      if (i == 0) KOLO_TRY(ops_.check_peers(-1));
      for (int q = 0; q < n; ++q) {
        if (q != me) KOLO_TRY(ops_.copy_out(out + b.in_buffer(q, i), p.slot(q, i) + b.in_slot(me, i), b.elems(i) * b.esize));
      }
      return Status();
    };
    return p.run(Shape{b.chunks, false, true, -1}, fill, first, local_detail::no_second);
  }

  Status barrier() {
    Pipeline p = pipeline(1);
    auto fill = [](uint64_t, char*) { return Status(); };
    auto first = [&](uint64_t) { return ops_.check_peers(-1); };
    return p.run(Shape{1, false, true, -1}, fill, first, local_detail::no_second);
  }

  Ops& ops_;
  uint64_t& next_chunk_;
};

}  // namespace kolo
