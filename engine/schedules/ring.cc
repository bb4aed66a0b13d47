// Ring algorithms over the rings that ring_order.h picks from the topology (rank order
// without one). Allreduce splits the data over several rings when the hosts have several
// NICs, so each ring leaves a host through a different NIC (as NCCL's channels do); the
// other collectives use the first ring. The phases live in ring_phases.h.
#include "engine/schedules/ring_order.h"
#include "engine/schedules/ring_phases.h"

namespace kolo {
namespace {

using namespace ring_detail;

int position_of(const std::vector<int>& order, int rank) {
  return static_cast<int>(std::find(order.begin(), order.end(), rank) - order.begin());
}

// Blocks by ring position: position c holds the block of rank order[c].
Blocks by_position(const Blocks& by_rank, const std::vector<int>& order) {
  Blocks b;
  for (int rank : order) {
    b.offset.push_back(by_rank.offset[rank]);
    b.count.push_back(by_rank.count[rank]);
  }
  return b;
}

// Reduce-scatter and reduce accumulate in scratch; with a pre-scale the scaled input is
// made there once and reduced from there. Returns the source locator and its ready step.
std::pair<Locator, int> scratch_sources(ScheduleBuilder& b, const CollSpec& spec, const Blocks& blocks, size_t elem,
                                        size_t total_bytes, size_t accum_base) {
  if (!spec.prescaled) return {in_buffer(kBufInput, 0, blocks, elem), -1};
  int ready = b.copy({kBufScratch, accum_base, total_bytes}, {kBufInput, 0, total_bytes}, ScaleUse::kPre);
  return {in_buffer(kBufScratch, accum_base, blocks, elem), ready};
}

}  // namespace

// Allreduce = reduce-scatter + allgather around each ring. Ring k takes segment k of the
// data, cut into p blocks (block c belongs to ring position c). Phase 1, reduce-scatter:
// in step s, position r sends block r-s-1 to its right neighbour and receives block r-s-2
// from its left, adding its own contribution; after p-1 steps it holds block r summed
// over all ranks (post-scaled). Phase 2, allgather: in step s it forwards block r-s and
// receives block r-s-1, so after p-1 more steps every rank has every block.
Schedule ring_allreduce(const CollSpec& spec, const PlanContext& ctx) {
  ScheduleDraft b(Algorithm::kRing, spec, ctx, OneRank::kCopy);
  if (b.finished()) return b.take();
  const size_t elem = dtype_size(spec.dtype);
  const size_t bytes = spec.bytes();
  std::vector<std::vector<int>> rings = ring_orders(ctx);
  // Each ring needs at least one element per block to be worth its messages.
  const size_t ring_count = std::max<size_t>(1, std::min(rings.size(), spec.count / ctx.size));
  // With a pre-scale, the scaled input is made once in the output and reduced from there.
  int ready = -1;
  int source_buffer = kBufInput;
  if (spec.prescaled) {
    ready = b.copy({kBufOutput, 0, bytes}, {kBufInput, 0, bytes}, ScaleUse::kPre);
    source_buffer = kBufOutput;
  }
  uint32_t tag_base = 0;
  for (size_t k = 0; k < ring_count; ++k) {
    // Ring k runs both phases over its own segment; tags never repeat across rings, so
    // the rings' messages between the same two ranks cannot be mixed up.
    auto [seg_off, seg_count] = split_part(spec.count, ring_count, k);
    Blocks blocks = partition(seg_count, ctx.size);
    for (size_t& off : blocks.offset) off += seg_off;
    const int pieces = pieces_for(blocks.max_count(), elem, ctx.chunk_bytes);
    Ring ring{b, rings[k], position_of(rings[k], ctx.rank), blocks, elem, pieces};
    Locator source = in_buffer(source_buffer, 0, blocks, elem);
    Locator out = in_buffer(kBufOutput, 0, blocks, elem);
    std::vector<std::vector<int>> sends;
    std::vector<int> finals = ring.reduce_scatter(source, ready, out, out, tag_base, sends);
    ring.allgather(out, finals, tag_base + static_cast<uint32_t>((ctx.size - 1) * pieces), sends);
    tag_base += static_cast<uint32_t>(2 * (ctx.size - 1) * pieces);
  }
  return b.take();
}

// Reduce-scatter = the allreduce's phase 1 alone, with the blocks placed so that the block
// a position finishes is its rank's: position c works on block order[c] of the input.
// Partial sums live in scratch (the output holds one block); in step s, position r sends
// the partial sum of rank order[r-s-1]'s block to the right, receives that of order[r-s-2]'s
// from the left and adds its contribution; the last step finishes its own block, which is
// written, post-scaled, to the output.
Schedule ring_reduce_scatter(const CollSpec& spec, const PlanContext& ctx) {
  ScheduleDraft b(Algorithm::kRing, spec, ctx, OneRank::kCopy);
  if (b.finished()) return b.take();
  const size_t elem = dtype_size(spec.dtype);
  const size_t block_bytes = spec.bytes();
  const std::vector<int> order = ring_orders(ctx)[0];
  Blocks blocks = by_position(uniform(spec.count, ctx.size), order);
  int pieces = pieces_for(spec.count, elem, ctx.chunk_bytes);
  Ring ring{b, order, position_of(order, ctx.rank), blocks, elem, pieces};
  const size_t accum_base = b.scratch(block_bytes * ctx.size);
  auto [source, ready] = scratch_sources(b, spec, blocks, elem, block_bytes * ctx.size, accum_base);
  Locator accum = in_buffer(kBufScratch, accum_base, blocks, elem);
  Locator final_dst = [&](int, size_t off, size_t n) { return Slice{kBufOutput, off * elem, n * elem}; };
  std::vector<std::vector<int>> sends;
  ring.reduce_scatter(source, ready, accum, final_dst, 0, sends);
  return b.take();
}

// Reduce = reduce-scatter + gather. Phase 1 leaves position c with block c fully reduced
// (the root's straight in its output, the others' in scratch); phase 2 sends every
// finished block straight to the root, one message per rank. The root receives about
// 2n(p-1)/p bytes, where a direct reduce would bring it (p-1)n.
Schedule ring_reduce(const CollSpec& spec, const PlanContext& ctx) {
  ScheduleDraft b(Algorithm::kRing, spec, ctx, OneRank::kCopy);
  if (b.finished()) return b.take();
  const size_t elem = dtype_size(spec.dtype);
  const size_t bytes = spec.bytes();
  const std::vector<int> order = ring_orders(ctx)[0];
  const int pos = position_of(order, ctx.rank);
  Blocks blocks = partition(spec.count, ctx.size);
  int pieces = pieces_for(blocks.max_count(), elem, ctx.chunk_bytes);
  Ring ring{b, order, pos, blocks, elem, pieces};
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
      if (c != pos) b.recv(order[c], gather_tag, final_dst(c, 0, blocks.count[c]), gather_after);
    }
  } else {
    b.send(spec.root, gather_tag, final_dst(pos, 0, blocks.count[pos]), finals);
  }
  return b.take();
}

// Allgather (and allgatherv) = the allreduce's phase 2 alone: each rank first copies its
// own block to its place in the output; then in step s, position r forwards the block of
// rank order[r-s] to the right and receives that of order[r-s-1] from the left, straight
// into its place; after p-1 steps every rank has every block.
Schedule ring_allgather(const CollSpec& spec, const PlanContext& ctx) {
  ScheduleDraft b(Algorithm::kRing, spec, ctx, OneRank::kGeneral);
  const size_t elem = dtype_size(spec.dtype);
  Blocks by_rank = spec.kind == CollKind::kAllgatherv ? Blocks{spec.displs, spec.counts} : uniform(spec.count, ctx.size);
  const size_t own_bytes = by_rank.count[ctx.rank] * elem;
  int copied = b.copy({kBufOutput, by_rank.offset[ctx.rank] * elem, own_bytes}, {kBufInput, 0, own_bytes},
                      ScaleUse::kNone);
  if (ctx.size == 1) return b.take();  // the own block was the whole result
  const std::vector<int> order = ring_orders(ctx)[0];
  Blocks blocks = by_position(by_rank, order);
  int pieces = pieces_for(blocks.max_count(), elem, ctx.chunk_bytes);
  Ring ring{b, order, position_of(order, ctx.rank), blocks, elem, pieces};
  ring.allgather(in_buffer(kBufOutput, 0, blocks, elem), std::vector<int>(pieces, copied), 0, {});
  return b.take();
}

// Broadcast down a pipelined chain: the ring opened at the root. The root copies its input
// to its output and sends piece j of it to its right neighbour; every other rank receives
// piece j from its left into its output and, unless it ends the chain, forwards it to the
// right. Pieces of chunk_bytes keep every link busy once the chain fills: the time is
// about n/bw plus p-2 piece times, not (p-1) n/bw.
Schedule ring_broadcast(const CollSpec& spec, const PlanContext& ctx) {
  ScheduleDraft b(Algorithm::kRing, spec, ctx, OneRank::kGeneral);
  const size_t elem = dtype_size(spec.dtype);
  const int p = ctx.size;
  const std::vector<int> order = ring_orders(ctx)[0];
  const int at = position_of(order, ctx.rank);
  const int root_at = position_of(order, spec.root);
  const int position = mod(at - root_at, p);  // place in the chain from the root
  const int next = order[mod(at + 1, p)];
  const int prev = order[mod(at - 1, p)];
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
  return b.take();
}

}  // namespace kolo
