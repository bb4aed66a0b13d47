// Recursive halving-doubling (Rabenseifner; Thakur, Rabenseifner, Gropp 2005) for any
// rank count. With p' the largest power of two <= p and rem = p - p', the first 2*rem
// ranks pair up: the even one ("extra") folds its data into the odd one and gets the
// result back at the end, so p' ranks (virtual ranks v) run the power-of-two algorithm.
// Reduce-scatter by halving: at distance d = p'/2 .. 1, v keeps the half of its range on
// its side of bit d, sends the other half to v ^ d and reduces what comes back; v ends
// with group v fully reduced. Allgather by doubling: d = 1 .. p'/2, v swaps everything it
// has with v ^ d. Latency 2 log2(p') alpha instead of the ring's 2(p-1) alpha, with the
// ring's bandwidth term. Groups are element ranges: for allreduce p' near-equal parts; for
// reduce_scatter/allgather the blocks of the ranks a virtual rank stands for.
#include <tuple>
#include <vector>

#include "engine/schedules/algorithms.h"
#include "engine/schedules/schedule_builder.h"

namespace kolo {
namespace {

struct Fold {
  int pow2 = 1, rem = 0, levels = 0;
  int vrank = -1;    // -1 for an extra rank
  int partner = -1;  // the rank folded into this one (or this extra rank's host)

  Fold(int rank, int p) {
    while (pow2 * 2 <= p) pow2 *= 2, ++levels;
    rem = p - pow2;
    if (rank < 2 * rem) {
      vrank = rank % 2 == 0 ? -1 : rank / 2;
      partner = rank % 2 == 0 ? rank + 1 : rank - 1;
    } else {
      vrank = rank - rem;
    }
  }
  int first_rank(int v) const { return v < rem ? 2 * v : v + rem; }  // ranks of group v start here
  int real_rank(int v) const { return v < rem ? 2 * v + 1 : v + rem; }
};

class HalvingDoubling {
 public:
  HalvingDoubling(ScheduleBuilder& b, const Fold& f, size_t elem, std::vector<size_t> bounds)
      : b_(b), f_(f), elem_(elem), bounds_(std::move(bounds)) {}

  Slice range(int buffer, size_t base, int glo, int ghi) const {
    return {buffer, base + bounds_[glo] * elem_, (bounds_[ghi] - bounds_[glo]) * elem_};
  }

  // Halving: src (read at the first level) is reduced into accum; returns the last reduce
  // (post-scaled) after which accum holds group vrank. `ready` orders the first reads.
  int reduce_scatter(int src_buf, size_t src_base, int acc_buf, size_t acc_base, int ready) {
    int glo = 0, ghi = f_.pow2, prev = ready, k = 0;
    sends_.assign(f_.levels, -1);
    for (int d = f_.pow2 / 2; d >= 1; d /= 2, ++k) {
      // Level k, distance d: our groups [glo, ghi) split in two; we keep the half on our
      // side of bit d (the half that holds group vrank), send the other half, summed over
      // the 2^k virtual ranks we now stand for, to v ^ d, receive its sum of our half into
      // fresh scratch and add it in. Each level halves both the range and the bytes.
      const int mid = (glo + ghi) / 2;
      const bool upper = (f_.vrank & d) != 0;
      const int klo = upper ? mid : glo, khi = upper ? ghi : mid;
      const int glo_give = upper ? glo : mid, ghi_give = upper ? mid : ghi;
      const int peer = f_.real_rank(f_.vrank ^ d);
      const uint32_t tag = 1 + k;
      const bool first = k == 0;
      sends_[k] = b_.send(peer, tag, first ? range(src_buf, src_base, glo_give, ghi_give)
                                           : range(acc_buf, acc_base, glo_give, ghi_give), {prev});
      Slice kept = range(acc_buf, acc_base, klo, khi);
      Slice slot{kBufScratch, b_.scratch(kept.bytes), kept.bytes};
      int got = b_.recv(peer, tag, slot);
      Slice own = first ? range(src_buf, src_base, klo, khi) : kept;
      prev = b_.reduce(kept, {own, slot}, d == 1 ? ScaleUse::kPost : ScaleUse::kNone, {got, prev});
      glo = klo, ghi = khi;
    }
    return prev;
  }

  // Doubling over `buf`: group vrank is there after `ready`. Returns every receive.
  std::vector<int> allgather(int buf, size_t base, std::vector<int> ready) {
    int glo = f_.vrank, ghi = f_.vrank + 1, k = 0;
    std::vector<int> deps = std::move(ready);
    for (int d = 1; d < f_.pow2; d *= 2, ++k) {
      // Level k, distance d: swap everything we have, groups [glo, ghi), with v ^ d, whose
      // range of the same size lies on the other side of bit d; each level doubles it.
      const int size = ghi - glo;
      const bool upper = (f_.vrank & d) != 0;
      const int plo = upper ? glo - size : ghi, phi = plo + size;
      const int peer = f_.real_rank(f_.vrank ^ d);
      const uint32_t tag = 1 + f_.levels + k;
      b_.send(peer, tag, range(buf, base, glo, ghi), deps);
      // The halving level with this distance sent from the memory this receive fills.
      const int level = f_.levels - 1 - k;
      const int war = sends_.empty() ? -1 : sends_[level];
      deps.push_back(b_.recv(peer, tag, range(buf, base, plo, phi), {war}));
      glo = std::min(glo, plo), ghi = std::max(ghi, phi);
    }
    return deps;
  }

  uint32_t last_tag() const { return 1 + 2 * f_.levels; }

 private:
  ScheduleBuilder& b_;
  const Fold& f_;
  size_t elem_;
  std::vector<size_t> bounds_;  // element offset where group v starts; bounds_[pow2] = end
  std::vector<int> sends_;
};

std::vector<size_t> bounds_by_parts(size_t count, int parts) {
  std::vector<size_t> out;
  for (int v = 0; v <= parts; ++v) out.push_back(v == parts ? count : split_part(count, parts, v).first);
  return out;
}

std::vector<size_t> bounds_by_ranks(const Fold& f, size_t per_rank, int p) {
  std::vector<size_t> out;
  for (int v = 0; v <= f.pow2; ++v) out.push_back((v == f.pow2 ? p : f.first_rank(v)) * per_rank);
  return out;
}

}  // namespace

// Allreduce: fold the extra ranks in, reduce-scatter by halving over p' near-equal groups
// of the data, allgather by doubling, hand the extra ranks the result.
Schedule halving_doubling_allreduce(const CollSpec& spec, const PlanContext& ctx) {
  ScheduleDraft b(Algorithm::kHalvingDoubling, spec, ctx, OneRank::kCopy);
  if (b.finished()) return b.take();
  const size_t bytes = spec.bytes();
  const Fold f(ctx.rank, ctx.size);
  auto [src, ready] = contribution_source(b, bytes, spec.in_place, spec.prescaled);
  const Slice all_src{src, 0, bytes};
  const Slice all_out{kBufOutput, 0, bytes};
  HalvingDoubling hd(b, f, dtype_size(spec.dtype), bounds_by_parts(spec.count, f.pow2));
  if (f.vrank < 0) {  // extra: fold in, then wait for the result
    int sent = b.send(f.partner, 0, all_src, {ready});
    b.recv(f.partner, hd.last_tag(), all_out, {sent});
    return b.take();
  }
  // Fold: the partner of an extra rank adds the extra's whole contribution to its own, in
  // its output, and from then on reduces from there.
  if (f.partner >= 0) {
    Slice slot{kBufScratch, b.scratch(bytes), bytes};
    int got = b.recv(f.partner, 0, slot);
    ready = b.reduce(all_out, {all_src, slot}, ScaleUse::kNone, {got, ready});
    src = kBufOutput;
  }
  int reduced = hd.reduce_scatter(src, 0, kBufOutput, 0, ready);
  std::vector<int> have = hd.allgather(kBufOutput, 0, {reduced});
  // Unfold: the extra rank gets the whole result.
  if (f.partner >= 0) b.send(f.partner, hd.last_tag(), all_out, have);
  return b.take();
}

// Reduce-scatter: group v is the blocks of the ranks virtual rank v stands for (its own,
// and its extra rank's). Fold the extra ranks in, halve in scratch until we hold our
// group summed over all ranks, copy our block to the output and send the extra its block.
Schedule halving_doubling_reduce_scatter(const CollSpec& spec, const PlanContext& ctx) {
  ScheduleDraft b(Algorithm::kHalvingDoubling, spec, ctx, OneRank::kCopy);
  if (b.finished()) return b.take();
  const size_t block = spec.bytes();
  const Fold f(ctx.rank, ctx.size);
  const size_t total = block * ctx.size;
  Slice input{kBufInput, 0, total};
  int ready = -1;
  if (spec.prescaled) std::tie(input, ready) = prescaled_in_scratch(b, total);
  int src = input.buffer;
  size_t src_base = input.offset;
  HalvingDoubling hd(b, f, dtype_size(spec.dtype), bounds_by_ranks(f, spec.count, ctx.size));
  if (f.vrank < 0) {  // extra: fold in, then wait for our block
    int sent = b.send(f.partner, 0, {src, src_base, total}, {ready});
    b.recv(f.partner, hd.last_tag(), {kBufOutput, 0, block}, {sent});
    return b.take();
  }
  // Partial sums live in scratch (the output holds one block); the partner of an extra
  // rank starts them with the sum of both inputs.
  const size_t acc = b.scratch(total);
  if (f.partner >= 0) {
    Slice slot{kBufScratch, b.scratch(total), total};
    int got = b.recv(f.partner, 0, slot);
    ready = b.reduce({kBufScratch, acc, total}, {{src, src_base, total}, slot}, ScaleUse::kNone, {got, ready});
    src = kBufScratch;
    src_base = acc;
  }
  int reduced = hd.reduce_scatter(src, src_base, kBufScratch, acc, ready);
  b.copy({kBufOutput, 0, block}, {kBufScratch, acc + ctx.rank * block, block}, ScaleUse::kNone, {reduced});
  if (f.partner >= 0) b.send(f.partner, hd.last_tag(), {kBufScratch, acc + f.partner * block, block}, {reduced});
  return b.take();
}

// Allgather: copy our block to its place in the output; the extra ranks hand theirs to
// their partners, doubling gathers everything among the p' virtual ranks, and the
// partners send the extras the whole output.
Schedule halving_doubling_allgather(const CollSpec& spec, const PlanContext& ctx) {
  ScheduleDraft b(Algorithm::kHalvingDoubling, spec, ctx, OneRank::kGeneral);
  const size_t block = spec.bytes();
  const Slice own_in{kBufInput, 0, block};
  int copied = b.copy({kBufOutput, ctx.rank * block, block}, own_in, ScaleUse::kNone);
  if (ctx.size == 1) return b.take();  // the own block was the whole result
  const Fold f(ctx.rank, ctx.size);
  HalvingDoubling hd(b, f, dtype_size(spec.dtype), bounds_by_ranks(f, spec.count, ctx.size));
  const Slice all_out{kBufOutput, 0, block * ctx.size};
  if (f.vrank < 0) {  // extra: the whole output, our own block included, comes back
    int sent = b.send(f.partner, 0, own_in);
    b.recv(f.partner, hd.last_tag(), all_out, {sent, copied});
    return b.take();
  }
  std::vector<int> ready{copied};
  if (f.partner >= 0) ready.push_back(b.recv(f.partner, 0, {kBufOutput, f.partner * block, block}));
  std::vector<int> have = hd.allgather(kBufOutput, 0, ready);
  if (f.partner >= 0) b.send(f.partner, hd.last_tag(), all_out, have);
  return b.take();
}

}  // namespace kolo
