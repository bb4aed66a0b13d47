// Ring algorithms. Chunk c of the data is owned by rank c. In the reduce-scatter phase,
// at step s rank r sends chunk (r-s-1) and receives chunk (r-s-2), reducing it with its
// own contribution, so after p-1 steps it holds chunk r fully reduced; each chunk is
// reduced in one order (starting at rank c+1), so every rank gets bit-identical results.
// The allgather phase then passes the finished chunks around the ring. Every chunk is
// split into J pieces that travel independently, so sending, receiving and reducing
// overlap (pipelining); received pieces land in K rotating scratch slots.
#include <algorithm>
#include <functional>

#include "engine/algorithms.h"
#include "engine/schedule_builder.h"

namespace kolo {
namespace {

constexpr int kRingSlots = 4;

int mod(int a, int p) { return ((a % p) + p) % p; }

// Where the blocks of the ring live, in elements of the data type.
struct Blocks {
  std::vector<size_t> offset;
  std::vector<size_t> count;
  size_t max_count() const { return count.empty() ? 0 : *std::max_element(count.begin(), count.end()); }
};

Blocks partition(size_t total, int parts) {
  Blocks b;
  for (int c = 0; c < parts; ++c) {
    auto [off, cnt] = split_part(total, parts, c);
    b.offset.push_back(off);
    b.count.push_back(cnt);
  }
  return b;
}

Blocks uniform(size_t each, int parts) {
  Blocks b;
  for (int c = 0; c < parts; ++c) {
    b.offset.push_back(each * c);
    b.count.push_back(each);
  }
  return b;
}

int pieces_for(size_t max_count, size_t elem, size_t chunk_bytes) {
  size_t bytes = max_count * elem;
  size_t pieces = std::max<size_t>(1, (bytes + chunk_bytes - 1) / std::max<size_t>(chunk_bytes, 1));
  return static_cast<int>(std::min<size_t>(pieces, std::max<size_t>(max_count, 1)));
}

// Maps (block, first element within block, elements) to a slice of some buffer.
using Locator = std::function<Slice(int block, size_t elem_offset, size_t elems)>;

Locator in_buffer(int buffer, size_t base_bytes, const Blocks& blocks, size_t elem) {
  return [=](int c, size_t off, size_t n) {
    return Slice{buffer, base_bytes + (blocks.offset[c] + off) * elem, n * elem};
  };
}

struct Ring {
  ScheduleBuilder& b;
  const PlanContext& ctx;
  const Blocks& blocks;
  size_t elem;
  int pieces;

  int p() const { return ctx.size; }
  int r() const { return ctx.rank; }
  std::pair<size_t, size_t> piece(int c, int j) const { return split_part(blocks.count[c], pieces, j); }

  // Reduce-scatter phase. `source` is this rank's contribution, `accum` holds partial
  // results, `final_dst` receives the own block (with the post-scale). Returns the index
  // of the final reduce of each piece; `sends[s][j]` records the sends of each step.
  std::vector<int> reduce_scatter(const Locator& source, int source_ready, const Locator& accum,
                                  const Locator& final_dst, uint32_t tag_base,
                                  std::vector<std::vector<int>>& sends) {
    const size_t slot_bytes = (blocks.max_count() + pieces - 1) / pieces * elem;
    const int steps = p() - 1;
    const int slots = std::min(kRingSlots, steps * pieces);
    const size_t slot_base = b.scratch(slot_bytes * slots);
    std::vector<int> reduce_at(static_cast<size_t>(steps) * pieces, -1);
    sends.assign(steps, std::vector<int>(pieces, -1));
    std::vector<int> finals(pieces, -1);
    for (int s = 0; s < steps; ++s) {
      const int send_c = mod(r() - s - 1, p());
      const int recv_c = mod(r() - s - 2, p());
      for (int j = 0; j < pieces; ++j) {
        const int seq = s * pieces + j;
        const uint32_t tag = tag_base + static_cast<uint32_t>(seq);
        auto [soff, scount] = piece(send_c, j);
        Slice out = s == 0 ? source(send_c, soff, scount) : accum(send_c, soff, scount);
        sends[s][j] = b.send(mod(r() + 1, p()), tag, out, {s == 0 ? source_ready : reduce_at[seq - pieces]});
        auto [roff, rcount] = piece(recv_c, j);
        const int slot = seq % slots;
        Slice landing{kBufScratch, slot_base + slot * slot_bytes, rcount * elem};
        int recv = b.recv(mod(r() - 1, p()), tag, landing, {seq >= slots ? reduce_at[seq - slots] : -1});
        const bool last = s == steps - 1;
        Slice dst = last ? final_dst(recv_c, roff, rcount) : accum(recv_c, roff, rcount);
        reduce_at[seq] = b.reduce(dst, {source(recv_c, roff, rcount), landing},
                                  last ? ScaleUse::kPost : ScaleUse::kNone, {recv, source_ready});
        if (last) finals[j] = reduce_at[seq];
      }
    }
    // Every reduce reaches the ones `slots` earlier through its receive (slot reuse), so
    // the last `slots` reduces are, transitively, after all reads of the source.
    last_reduces.assign(reduce_at.end() - std::min<size_t>(reduce_at.size(), slots), reduce_at.end());
    return finals;
  }

  // After reduce_scatter: steps after which no reduce reads its source any more.
  std::vector<int> last_reduces{};

  // Allgather phase over `out`: own block is ready after ready[j]; a receive into a
  // block waits for `war[s][j]` (a send that still reads the same memory).
  void allgather(const Locator& out, const std::vector<int>& ready, uint32_t tag_base,
                 const std::vector<std::vector<int>>& war) {
    std::vector<int> prev_recv(pieces, -1);
    for (int s = 0; s < p() - 1; ++s) {
      const int send_c = mod(r() - s, p());
      const int recv_c = mod(r() - s - 1, p());
      for (int j = 0; j < pieces; ++j) {
        const uint32_t tag = tag_base + static_cast<uint32_t>(s * pieces + j);
        auto [soff, scount] = piece(send_c, j);
        b.send(mod(r() + 1, p()), tag, out(send_c, soff, scount), {s == 0 ? ready[j] : prev_recv[j]});
        auto [roff, rcount] = piece(recv_c, j);
        std::vector<int> deps;
        if (!war.empty()) deps.push_back(war[s][j]);
        prev_recv[j] = b.recv(mod(r() - 1, p()), tag, out(recv_c, roff, rcount), deps);
      }
    }
  }
};

// Reduce-scatter and reduce accumulate in scratch; with a pre-scale the scaled input is
// made there once and reduced from there. Returns the source locator and its ready step.
std::pair<Locator, int> scratch_sources(ScheduleBuilder& b, const CollSpec& spec, const Blocks& blocks, size_t elem,
                                        size_t total_bytes, size_t accum_base) {
  if (!spec.prescaled) return {in_buffer(kBufInput, 0, blocks, elem), -1};
  int ready = b.copy({kBufScratch, accum_base, total_bytes}, {kBufInput, 0, total_bytes}, ScaleUse::kPre);
  return {in_buffer(kBufScratch, accum_base, blocks, elem), ready};
}

}  // namespace

Schedule ring_allreduce(const CollSpec& spec, const PlanContext& ctx) {
  Schedule sched;
  sched.algorithm = "ring";
  ScheduleBuilder b(sched, spec.dtype, spec.op);
  const size_t elem = dtype_size(spec.dtype);
  const size_t bytes = spec.count * elem;
  if (ctx.size == 1) return single_rank_copy("ring", spec.dtype, bytes, ScaleUse::kBoth);
  Blocks blocks = partition(spec.count, ctx.size);
  int pieces = pieces_for(blocks.max_count(), elem, ctx.chunk_bytes);
  Ring ring{b, ctx, blocks, elem, pieces};
  // With a pre-scale, the scaled input is made once in the output and reduced from there.
  int ready = -1;
  int source_buffer = kBufInput;
  if (spec.prescaled) {
    ready = b.copy({kBufOutput, 0, bytes}, {kBufInput, 0, bytes}, ScaleUse::kPre);
    source_buffer = kBufOutput;
  }
  Locator source = in_buffer(source_buffer, 0, blocks, elem);
  Locator out = in_buffer(kBufOutput, 0, blocks, elem);
  std::vector<std::vector<int>> sends;
  std::vector<int> finals = ring.reduce_scatter(source, ready, out, out, 0, sends);
  ring.allgather(out, finals, static_cast<uint32_t>((ctx.size - 1) * pieces), sends);
  return sched;
}

Schedule ring_reduce_scatter(const CollSpec& spec, const PlanContext& ctx) {
  Schedule sched;
  sched.algorithm = "ring";
  ScheduleBuilder b(sched, spec.dtype, spec.op);
  const size_t elem = dtype_size(spec.dtype);
  const size_t block_bytes = spec.count * elem;
  if (ctx.size == 1) return single_rank_copy("ring", spec.dtype, block_bytes, ScaleUse::kBoth);
  Blocks blocks = uniform(spec.count, ctx.size);
  int pieces = pieces_for(spec.count, elem, ctx.chunk_bytes);
  Ring ring{b, ctx, blocks, elem, pieces};
  const size_t accum_base = b.scratch(block_bytes * ctx.size);
  auto [source, ready] = scratch_sources(b, spec, blocks, elem, block_bytes * ctx.size, accum_base);
  Locator accum = in_buffer(kBufScratch, accum_base, blocks, elem);
  Locator final_dst = [&](int, size_t off, size_t n) { return Slice{kBufOutput, off * elem, n * elem}; };
  std::vector<std::vector<int>> sends;
  ring.reduce_scatter(source, ready, accum, final_dst, 0, sends);
  return sched;
}

Schedule ring_reduce(const CollSpec& spec, const PlanContext& ctx) {
  Schedule sched;
  sched.algorithm = "ring";
  ScheduleBuilder b(sched, spec.dtype, spec.op);
  const size_t elem = dtype_size(spec.dtype);
  const size_t bytes = spec.count * elem;
  if (ctx.size == 1) return single_rank_copy("ring", spec.dtype, bytes, ScaleUse::kBoth);
  Blocks blocks = partition(spec.count, ctx.size);
  int pieces = pieces_for(blocks.max_count(), elem, ctx.chunk_bytes);
  Ring ring{b, ctx, blocks, elem, pieces};
  const size_t accum_base = b.scratch(bytes);
  auto [source, ready] = scratch_sources(b, spec, blocks, elem, bytes, accum_base);
  Locator accum = in_buffer(kBufScratch, accum_base, blocks, elem);
  const bool is_root = ctx.rank == spec.root;
  Locator final_dst = is_root ? in_buffer(kBufOutput, 0, blocks, elem) : accum;
  std::vector<std::vector<int>> sends;
  std::vector<int> finals = ring.reduce_scatter(source, ready, accum, final_dst, 0, sends);
  // Gather the finished blocks at the root, one message per rank.
  const uint32_t gather_tag = static_cast<uint32_t>((ctx.size - 1) * pieces);
  if (is_root) {
    // In place, the gathered blocks overwrite the input: only after every local read of it
    // (the first sends and all reduces), not merely after the peers' messages imply it.
    std::vector<int> gather_after = ring.last_reduces;
    for (int j = 0; j < pieces; ++j) gather_after.push_back(sends[0][j]);
    for (int c = 0; c < ctx.size; ++c) {
      if (c != ctx.rank) b.recv(c, gather_tag, final_dst(c, 0, blocks.count[c]), gather_after);
    }
  } else {
    b.send(spec.root, gather_tag, final_dst(ctx.rank, 0, blocks.count[ctx.rank]), finals);
  }
  return sched;
}

Schedule ring_allgather(const CollSpec& spec, const PlanContext& ctx) {
  Schedule sched;
  sched.algorithm = "ring";
  ScheduleBuilder b(sched, spec.dtype, spec.op);
  const size_t elem = dtype_size(spec.dtype);
  Blocks blocks = spec.kind == CollKind::kAllgatherv ? Blocks{spec.displs, spec.counts} : uniform(spec.count, ctx.size);
  const size_t own_bytes = blocks.count[ctx.rank] * elem;
  int copied = b.copy({kBufOutput, blocks.offset[ctx.rank] * elem, own_bytes}, {kBufInput, 0, own_bytes},
                      ScaleUse::kNone);
  if (ctx.size == 1) return sched;
  int pieces = pieces_for(blocks.max_count(), elem, ctx.chunk_bytes);
  Ring ring{b, ctx, blocks, elem, pieces};
  ring.allgather(in_buffer(kBufOutput, 0, blocks, elem), std::vector<int>(pieces, copied), 0, {});
  return sched;
}

Schedule ring_broadcast(const CollSpec& spec, const PlanContext& ctx) {
  Schedule sched;
  sched.algorithm = "ring";
  ScheduleBuilder b(sched, spec.dtype, spec.op);
  const size_t elem = dtype_size(spec.dtype);
  const int p = ctx.size;
  const int position = mod(ctx.rank - spec.root, p);  // place in the chain from the root
  const int next = mod(ctx.rank + 1, p);
  const int prev = mod(ctx.rank - 1, p);
  const int pieces = pieces_for(spec.count, elem, ctx.chunk_bytes);
  if (position == 0) b.copy({kBufOutput, 0, spec.count * elem}, {kBufInput, 0, spec.count * elem}, ScaleUse::kNone);
  for (int j = 0; j < pieces && p > 1; ++j) {
    auto [off, n] = split_part(spec.count, pieces, j);
    Slice piece{kBufOutput, off * elem, n * elem};
    if (position == 0) {
      b.send(next, j, Slice{kBufInput, off * elem, n * elem});
    } else {
      int got = b.recv(prev, j, piece);
      if (position < p - 1) b.send(next, j, piece, {got});
    }
  }
  return sched;
}

}  // namespace kolo
