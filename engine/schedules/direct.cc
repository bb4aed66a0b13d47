// Direct algorithms: one round in which each rank sends what a peer needs straight to it.
// Latency-optimal for small messages; reductions combine the contributions in rank order
// (0, 1, ..., p-1) on every rank, so every rank computes bit-identical results.
#include <algorithm>
#include <tuple>

#include "engine/schedules/algorithms.h"
#include "engine/schedules/schedule_builder.h"

namespace kolo {
namespace {

// Reduces `parts` (in rank order) into dst in groups of at most 8 inputs, the most a
// reduce step takes: the first group reduces parts 0..7, each later one dst and the next
// 7 parts, so the order of the operands is the same on every rank. The last group applies
// the post-scale. Returns the last step.
int reduce_in_order(ScheduleBuilder& b, Slice dst, const std::vector<Slice>& parts, std::vector<int> deps) {
  constexpr size_t kMaxInputs = 8;
  int last = -1;
  size_t next = 0;
  bool first = true;
  while (next < parts.size() || first) {
    std::vector<Slice> group;
    if (!first) group.push_back(dst);
    while (group.size() < kMaxInputs && next < parts.size()) group.push_back(parts[next++]);
    const bool final_group = next >= parts.size();
    last = b.reduce(dst, group, final_group ? ScaleUse::kPost : ScaleUse::kNone, deps);
    deps = {last};
    first = false;
  }
  return last;
}

// Gathers every peer's `bytes` into scratch slots (one per rank) and reduces them with
// `own` into `dst`. Own data that lives in dst is first copied aside when more than one
// reduce group is needed (a later group would read it after dst was overwritten).
// Returns the final reduce; `sends`, when given, gets the send to each peer.
int exchange_and_reduce(ScheduleBuilder& b, const PlanContext& ctx, Slice own, int own_ready,
                        const std::vector<Slice>& to_peer, Slice dst, std::vector<int> extra_deps,
                        std::vector<int>* sends = nullptr) {
  const size_t bytes = dst.bytes;
  const size_t slots = b.scratch(bytes * ctx.size);
  std::vector<int> deps = std::move(extra_deps);
  if (sends != nullptr) sends->assign(ctx.size, -1);
  // Round 1: every peer q gets to_peer[q] at once. The reduce waits for these sends as
  // well, because dst may be the memory they read from (in place, or a pre-scaled copy).
  for (int q = 0; q < ctx.size; ++q) {
    if (q == ctx.rank) continue;
    deps.push_back(b.send(q, 0, to_peer[q], {own_ready}));
    if (sends != nullptr) (*sends)[q] = deps.back();
  }
  // Peer q's contribution lands in slot q; ours is read where it is.
  std::vector<Slice> parts(ctx.size);
  for (int q = 0; q < ctx.size; ++q) {
    Slice slot{kBufScratch, slots + q * bytes, bytes};
    if (q == ctx.rank) {
      if (own.buffer == dst.buffer && ctx.size > 8) {
        deps.push_back(b.copy(slot, own, ScaleUse::kNone, {own_ready}));
        parts[q] = slot;
      } else {
        parts[q] = own;
      }
      continue;
    }
    parts[q] = slot;
    deps.push_back(b.recv(q, 0, slot));
  }
  deps.push_back(own_ready);
  return reduce_in_order(b, dst, parts, deps);
}

}  // namespace

// Allreduce in one round: every rank sends its whole contribution to every peer, receives
// all of theirs into scratch slots and reduces the p contributions, in rank order, into
// its output. (p-1)n bytes leave each rank, but there is only one message latency.
Schedule direct_allreduce(const CollSpec& spec, const PlanContext& ctx) {
  ScheduleDraft b(Algorithm::kDirect, spec, ctx, OneRank::kCopy);
  if (b.finished()) return b.take();
  const size_t bytes = spec.bytes();
  const auto [source, ready] = contribution_source(b, bytes, spec.in_place, spec.prescaled);
  const Slice own{source, 0, bytes};
  exchange_and_reduce(b, ctx, own, ready, std::vector<Slice>(ctx.size, own), {kBufOutput, 0, bytes}, {});
  return b.take();
}

Schedule one_shot_allreduce(const CollSpec& spec, const PlanContext& ctx) {
  Schedule sched = direct_allreduce(spec, ctx);
  sched.algorithms = {Algorithm::kOneShot};
  return sched;
}

// Two-shot: the data is cut into p parts and rank r owns part r. Shot 1, a direct
// reduce-scatter: send part q to rank q, receive part r from every peer and reduce the p
// copies of it in rank order into our output. Shot 2, a direct allgather: send the
// reduced part r to every peer and receive part q from rank q. Each rank sends 2(p-1)/p
// of the data, in two rounds.
Schedule two_shot_allreduce(const CollSpec& spec, const PlanContext& ctx) {
  ScheduleDraft b(Algorithm::kTwoShot, spec, ctx, OneRank::kCopy);
  if (b.finished()) return b.take();
  const size_t elem = dtype_size(spec.dtype);
  const auto [source, ready] = contribution_source(b, spec.bytes(), spec.in_place, spec.prescaled);
  auto part = [&](int buffer, int q) {
    auto [off, n] = split_part(spec.count, ctx.size, q);
    return Slice{buffer, off * elem, n * elem};
  };
  std::vector<Slice> to_peer;
  for (int q = 0; q < ctx.size; ++q) to_peer.push_back(part(source, q));
  std::vector<int> sends;
  const int reduced =
      exchange_and_reduce(b, ctx, part(source, ctx.rank), ready, to_peer, part(kBufOutput, ctx.rank), {}, &sends);
  for (int q = 0; q < ctx.size; ++q) {
    if (q == ctx.rank) continue;
    b.send(q, 1, part(kBufOutput, ctx.rank), {reduced});
    // When the source is the output, part q must have left before q's result lands there.
    b.recv(q, 1, part(kBufOutput, q), {source == kBufOutput ? sends[q] : -1});
  }
  return b.take();
}

// Reduce-scatter in one round: block q of our input goes straight to rank q; we receive
// block r from every peer and reduce the p copies of it, in rank order, into our output.
Schedule direct_reduce_scatter(const CollSpec& spec, const PlanContext& ctx) {
  ScheduleDraft b(Algorithm::kDirect, spec, ctx, OneRank::kCopy);
  if (b.finished()) return b.take();
  const size_t block = spec.bytes();
  Slice all{kBufInput, 0, block * ctx.size};  // our p blocks
  int ready = -1;
  if (spec.prescaled) std::tie(all, ready) = prescaled_in_scratch(b, all.bytes);
  std::vector<Slice> to_peer;
  for (int q = 0; q < ctx.size; ++q) to_peer.push_back({all.buffer, all.offset + q * block, block});
  Slice own = to_peer[ctx.rank];
  // In place, the own block is the output itself.
  if (spec.in_place && !spec.prescaled) own = {kBufOutput, 0, block};
  exchange_and_reduce(b, ctx, own, ready, to_peer, {kBufOutput, 0, block}, {});
  return b.take();
}

// Reduce in one round: every non-root sends its whole contribution to the root, which
// receives them into scratch slots and reduces the p contributions, in rank order, into
// its output.
Schedule direct_reduce(const CollSpec& spec, const PlanContext& ctx) {
  ScheduleDraft b(Algorithm::kDirect, spec, ctx, OneRank::kCopy);
  if (b.finished()) return b.take();
  const size_t bytes = spec.bytes();
  Slice own{kBufInput, 0, bytes};
  int ready = -1;
  if (spec.prescaled) std::tie(own, ready) = prescaled_in_scratch(b, bytes);
  if (ctx.rank != spec.root) {
    b.send(spec.root, 0, own, {ready});
    return b.take();
  }
  if (spec.in_place && !spec.prescaled) own = {kBufOutput, 0, bytes};
  const size_t slots = b.scratch(bytes * ctx.size);
  std::vector<Slice> parts(ctx.size);
  std::vector<int> deps{ready};
  for (int q = 0; q < ctx.size; ++q) {
    if (q == ctx.rank) {
      parts[q] = own;
      // In the output, our part would be overwritten by the first of several reduce
      // groups before a later group reads it: copy it aside.
      if (own.buffer == kBufOutput && ctx.size > 8) {
        parts[q] = {kBufScratch, slots + q * bytes, bytes};
        deps.push_back(b.copy(parts[q], own, ScaleUse::kNone, {ready}));
      }
      continue;
    }
    parts[q] = {kBufScratch, slots + q * bytes, bytes};
    deps.push_back(b.recv(q, 0, parts[q]));
  }
  reduce_in_order(b, {kBufOutput, 0, bytes}, parts, deps);
  return b.take();
}

// Allgather (and allgatherv) in one round: copy our block to its place in the output, send
// it to every peer, and receive every peer's block straight into its place.
Schedule direct_allgather(const CollSpec& spec, const PlanContext& ctx) {
  ScheduleDraft b(Algorithm::kDirect, spec, ctx, OneRank::kGeneral);
  const size_t elem = dtype_size(spec.dtype);
  const bool v = spec.kind == CollKind::kAllgatherv;
  auto count_of = [&](int q) { return v ? spec.counts[q] : spec.count; };
  auto offset_of = [&](int q) { return (v ? spec.displs[q] : spec.count * q) * elem; };
  const size_t own_bytes = count_of(ctx.rank) * elem;
  b.copy({kBufOutput, offset_of(ctx.rank), own_bytes}, {kBufInput, 0, own_bytes}, ScaleUse::kNone);
  for (int q = 0; q < ctx.size; ++q) {
    if (q == ctx.rank) continue;
    b.send(q, 0, {kBufInput, 0, own_bytes});
    b.recv(q, 0, {kBufOutput, offset_of(q), count_of(q) * elem});
  }
  return b.take();
}

// Broadcast in one round: the root copies its input to its output and sends the input to
// every other rank, which receives it into its output.
Schedule direct_broadcast(const CollSpec& spec, const PlanContext& ctx) {
  ScheduleDraft b(Algorithm::kDirect, spec, ctx, OneRank::kGeneral);
  const size_t bytes = spec.bytes();
  if (ctx.rank == spec.root) {
    b.copy({kBufOutput, 0, bytes}, {kBufInput, 0, bytes}, ScaleUse::kNone);
    for (int q = 0; q < ctx.size; ++q) {
      if (q != ctx.rank) b.send(q, 0, {kBufInput, 0, bytes});
    }
  } else {
    b.recv(spec.root, 0, {kBufOutput, 0, bytes});
  }
  return b.take();
}

// Alltoall in one round: block q of our input goes to rank q, and the block rank q sends
// us lands in block q of our output; our own block is copied across.
Schedule direct_alltoall(const CollSpec& spec, const PlanContext& ctx) {
  ScheduleDraft b(Algorithm::kDirect, spec, ctx, OneRank::kGeneral);
  const size_t block = spec.bytes();
  int source = kBufInput;
  size_t base = 0;
  int ready = -1;
  if (spec.in_place) {  // incoming blocks overwrite what is still to be sent: send a copy
    base = b.scratch(block * ctx.size);
    source = kBufScratch;
    ready = b.copy({kBufScratch, base, block * ctx.size}, {kBufInput, 0, block * ctx.size}, ScaleUse::kNone);
  }
  b.copy({kBufOutput, ctx.rank * block, block}, {source, base + ctx.rank * block, block}, ScaleUse::kNone, {ready});
  for (int q = 0; q < ctx.size; ++q) {
    if (q == ctx.rank) continue;
    b.send(q, 0, {source, base + q * block, block}, {ready});
    b.recv(q, 0, {kBufOutput, q * block, block}, {ready});
  }
  return b.take();
}

// Dissemination barrier (Hensgen, Finkel, Manber): in round k, send an empty message to
// rank + 2^k and wait for one from rank - 2^k, each round after the previous one's
// receive. After ceil(log2 p) rounds every rank has heard, directly or through others,
// from every rank, so none leaves before all have arrived.
Schedule dissemination_barrier(const CollSpec& spec, const PlanContext& ctx) {
  ScheduleDraft b(Algorithm::kDissemination, DType::kUint8, ReduceOp::kSum);  // the messages are empty
  int prev = -1;
  uint32_t round = 0;
  for (int distance = 1; distance < ctx.size; distance *= 2, ++round) {
    int to = (ctx.rank + distance) % ctx.size;
    int from = ((ctx.rank - distance) % ctx.size + ctx.size) % ctx.size;
    int sent = b.send(to, round, {kBufScratch, 0, 0}, {prev});
    prev = b.recv(from, round, {kBufScratch, 0, 0}, {prev, sent});
  }
  return b.take();
}

// A send or a receive: one message between the two ranks, tag 0 (the communicator tells
// consecutive calls apart).
Schedule point_to_point(const CollSpec& spec, const PlanContext& ctx) {
  ScheduleDraft b(Algorithm::kPointToPoint, spec, ctx, OneRank::kGeneral);
  if (spec.kind == CollKind::kSend) {
    b.send(spec.peer, 0, {kBufInput, 0, spec.bytes()});
  } else {
    b.recv(spec.peer, 0, {kBufOutput, 0, spec.bytes()});
  }
  return b.take();
}

}  // namespace kolo
