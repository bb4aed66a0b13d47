// Binary trees as NCCL builds them (src/graph/trees.cc): in tree 0 rank r's parent and
// children follow from r's lowest set bit, so every subtree is a contiguous run of ranks
// and the depth is log2(p). The double binary tree's second tree is the first mirrored
// (p even) or shifted by one (p odd), so a rank that is a leaf in one tree is inner in the
// other and the two trees share each rank's links. Allreduce sends half of the data up
// and down each tree; broadcast and reduce use one tree rooted at the root. Every tree
// pipelines pieces of chunk_bytes; received pieces land in rotating scratch slots.
#include <algorithm>
#include <vector>

#include "engine/schedules/algorithms.h"
#include "engine/schedules/schedule_builder.h"

namespace kolo {
namespace {

constexpr int kTreeSlots = 4;

struct TreeLinks {
  int parent = -1;
  std::vector<int> children;
};

// NCCL's ncclGetBtree.
TreeLinks btree(int p, int rank) {
  TreeLinks t;
  int bit = 1;
  while (bit < p && (bit & rank) == 0) bit <<= 1;
  if (rank == 0) {
    if (p > 1) t.children.push_back(bit >> 1);
    return t;
  }
  int up = (rank ^ bit) | (bit << 1);
  t.parent = up >= p ? (rank ^ bit) : up;
  int low = bit >> 1;
  if (low != 0) t.children.push_back(rank - low);
  int down1 = low == 0 ? -1 : rank + low;
  while (down1 >= p) {
    low >>= 1;
    down1 = low == 0 ? -1 : rank + low;
  }
  if (down1 >= 0) t.children.push_back(down1);
  return t;
}

// Tree `which` (0 or 1) of the double binary tree; `map` turns its labels into ranks.
TreeLinks double_tree(int p, int rank, int which) {
  if (which == 0) return btree(p, rank);
  const bool odd = p % 2 == 1;
  auto to_label = [&](int r) { return odd ? (r - 1 + p) % p : p - 1 - r; };
  auto to_rank = [&](int l) { return l < 0 ? -1 : odd ? (l + 1) % p : p - 1 - l; };
  TreeLinks t = btree(p, to_label(rank));
  t.parent = to_rank(t.parent);
  for (int& c : t.children) c = to_rank(c);
  return t;
}

// A tree rooted at `root`: btree over labels (rank - root) mod p.
TreeLinks rooted_tree(int p, int rank, int root) {
  TreeLinks t = btree(p, (rank - root + p) % p);
  if (t.parent >= 0) t.parent = (t.parent + root) % p;
  for (int& c : t.children) c = (c + root) % p;
  return t;
}

// Reduces pieces up one tree and (optionally) broadcasts the result down it. `own(j)` is
// this rank's contribution to piece j, `accum(j)` where non-roots combine, `result(j)`
// where the root's (post-scaled) result and, going down, everyone's result lands.
struct TreeRun {
  ScheduleBuilder& b;
  const TreeLinks& t;
  size_t elem;
  uint32_t tag_base;

  template <typename Own, typename Accum, typename Result>
  void run(int pieces, const Own& own, const Accum& accum, const Result& result, int ready, size_t slot_bytes,
           bool down) {
    const int slots = std::min(kTreeSlots, pieces);
    std::vector<size_t> slot_base;
    for (size_t c = 0; c < t.children.size(); ++c) slot_base.push_back(b.scratch(slot_bytes * slots));
    std::vector<int> reduces(pieces, -1);
    for (int j = 0; j < pieces; ++j) {
      // Up: receive each child's partial result of piece j (its subtree's sum) into the
      // child's slot, which the reduce of piece j - slots has finished reading.
      const Slice mine = own(j);
      const uint32_t up_tag = tag_base + 2 * j, down_tag = up_tag + 1;
      std::vector<Slice> srcs{mine};
      std::vector<int> deps{ready};
      for (size_t c = 0; c < t.children.size(); ++c) {
        Slice slot{kBufScratch, slot_base[c] + (j % slots) * slot_bytes, mine.bytes};
        srcs.push_back(slot);
        deps.push_back(b.recv(t.children[c], up_tag, slot, {j >= slots ? reduces[j - slots] : -1}));
      }
      // Add our contribution to the children's: the root finishes the piece (post-scaled)
      // in `result`, an inner rank makes its subtree's partial in `accum`, and a leaf
      // passes its contribution on as it is.
      const bool root = t.parent < 0;
      int have = ready;  // the step after which this rank's (partial) piece is complete
      Slice partial = mine;
      if (root) {
        partial = result(j);
        have = reduces[j] = b.reduce(partial, srcs, ScaleUse::kPost, deps);
      } else if (!t.children.empty()) {
        partial = accum(j);
        have = reduces[j] = b.reduce(partial, srcs, ScaleUse::kNone, deps);
      }
      // A non-root passes its partial up. Going down (allreduce), it receives the finished
      // piece from its parent, and every rank passes the piece on to its children.
      if (!root) {
        int sent = b.send(t.parent, up_tag, partial, {have});
        if (!down) continue;
        // The result lands where the partial was read from (in place) only once it left.
        have = b.recv(t.parent, down_tag, result(j), {sent});
      }
      if (down) {
        for (int child : t.children) b.send(child, down_tag, result(j), {have});
      }
    }
  }
};

}  // namespace

// Allreduce over the double binary tree: half k of the data goes up tree k, each rank
// adding its children's partial sums to its own contribution, piece by piece, until the
// tree's root has the sum (post-scaled); then down the same tree, each rank receiving the
// result from its parent and passing it to its children. The halves travel at once, and
// no rank has more than two children over both trees, so each rank sends and receives
// about 2n, as in the ring, with about 2 log2(p) latencies instead of the ring's 2(p-1).
Schedule tree_allreduce(const CollSpec& spec, const PlanContext& ctx) {
  ScheduleDraft b(Algorithm::kTree, spec, ctx, OneRank::kCopy);
  if (b.finished()) return b.take();
  const size_t elem = dtype_size(spec.dtype);
  const size_t bytes = spec.bytes();
  const auto [src, ready] = contribution_source(b, bytes, spec.in_place, spec.prescaled);
  uint32_t tag_base = 0;
  for (int which = 0; which < 2; ++which) {
    auto [half_off, half_count] = split_part(spec.count, 2, which);
    const int pieces = pieces_for(half_count, elem, ctx.chunk_bytes);
    auto at = [&, half_off = half_off, half_count = half_count, pieces](int buffer, int j) {
      auto [off, n] = split_part(half_count, pieces, j);
      return Slice{buffer, (half_off + off) * elem, n * elem};
    };
    const size_t slot_bytes = (half_count + pieces - 1) / pieces * elem;
    TreeLinks t = double_tree(ctx.size, ctx.rank, which);
    TreeRun run{b, t, elem, tag_base};
    run.run(pieces, [&, src = src](int j) { return at(src, j); }, [&](int j) { return at(kBufOutput, j); },
            [&](int j) { return at(kBufOutput, j); }, ready, slot_bytes, true);
    tag_base += 2 * pieces;
  }
  return b.take();
}

// Reduce up one binary tree rooted at the root: piece by piece, every rank adds its
// children's partial sums to its contribution and sends the result to its parent; the
// root's sum (post-scaled) is the result. log2(p) latencies; no way down.
Schedule tree_reduce(const CollSpec& spec, const PlanContext& ctx) {
  ScheduleDraft b(Algorithm::kTree, spec, ctx, OneRank::kCopy);
  if (b.finished()) return b.take();
  const size_t elem = dtype_size(spec.dtype);
  const size_t bytes = spec.bytes();
  const bool is_root = ctx.rank == spec.root;
  // Non-roots combine in scratch; a pre-scaled input is made there (root: in the output).
  const int work = is_root ? kBufOutput : kBufScratch;
  const size_t work_base = is_root ? 0 : b.scratch(bytes);
  int src = is_root && spec.in_place ? kBufOutput : kBufInput;
  size_t src_base = 0;
  int ready = -1;
  if (spec.prescaled) {
    ready = b.copy({work, work_base, bytes}, {kBufInput, 0, bytes}, ScaleUse::kPre);
    src = work;
    src_base = work_base;
  }
  const int pieces = pieces_for(spec.count, elem, ctx.chunk_bytes);
  auto at = [&](int buffer, size_t base, int j) {
    auto [off, n] = split_part(spec.count, pieces, j);
    return Slice{buffer, base + off * elem, n * elem};
  };
  TreeLinks t = rooted_tree(ctx.size, ctx.rank, spec.root);
  TreeRun run{b, t, elem, 0};
  run.run(pieces, [&](int j) { return at(src, src_base, j); }, [&](int j) { return at(work, work_base, j); },
          [&](int j) { return at(kBufOutput, 0, j); }, ready, (spec.count + pieces - 1) / pieces * elem, false);
  return b.take();
}

// Broadcast down one binary tree rooted at the root: piece by piece, every rank receives
// from its parent into its output and sends to its children, so a piece reaches every
// rank after log2(p) hops and the pieces behind it follow through the pipeline.
Schedule tree_broadcast(const CollSpec& spec, const PlanContext& ctx) {
  ScheduleDraft b(Algorithm::kTree, spec, ctx, OneRank::kGeneral);
  const size_t elem = dtype_size(spec.dtype);
  const bool is_root = ctx.rank == spec.root;
  if (is_root) b.copy({kBufOutput, 0, spec.bytes()}, {kBufInput, 0, spec.bytes()}, ScaleUse::kNone);
  if (ctx.size == 1) return b.take();  // the root's copy was the whole broadcast
  const int pieces = pieces_for(spec.count, elem, ctx.chunk_bytes);
  TreeLinks t = rooted_tree(ctx.size, ctx.rank, spec.root);
  for (int j = 0; j < pieces; ++j) {
    auto [off, n] = split_part(spec.count, pieces, j);
    Slice out{kBufOutput, off * elem, n * elem};
    int have = is_root ? -1 : b.recv(t.parent, j, out);
    // The root sends from its input: its copy to the output need not finish first.
    for (int child : t.children) b.send(child, j, is_root ? Slice{kBufInput, off * elem, n * elem} : out, {have});
  }
  return b.take();
}

}  // namespace kolo
