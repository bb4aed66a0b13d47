// Two-level allreduce: a ring reduce-scatter inside each host leaves local rank i with
// part i of the host's sum; part i is then allreduced across hosts by a ring of the
// local-rank-i ranks (each over its own nearest NIC, so all NICs work at once and each
// carries 1/L of the data); a ring allgather inside each host spreads the parts. The
// network carries 2(H-1)/H of n/L per rank instead of the flat ring's share of n.
#include "engine/schedules/ring_order.h"
#include "engine/schedules/ring_phases.h"

namespace kolo {

using namespace ring_detail;

Schedule hierarchical_allreduce(const CollSpec& spec, const PlanContext& ctx) {
  const std::vector<std::vector<int>> hosts = ranks_by_host(ctx);
  // One host, or one rank per host: one level is all there is, and the flat ring is it
  // (one rank included).
  if (hosts.size() < 2 || hosts[0].size() < 2) {
    Schedule flat = ring_allreduce(spec, ctx);
    flat.algorithms = {Algorithm::kHierarchical};
    return flat;
  }
  ScheduleDraft b(Algorithm::kHierarchical, spec, ctx, OneRank::kCopy);
  if (b.finished()) return b.take();
  const size_t elem = dtype_size(spec.dtype);
  const size_t bytes = spec.bytes();
  const int H = static_cast<int>(hosts.size());
  const int L = static_cast<int>(hosts[0].size());
  int my_host = 0, my_local = 0;
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < L; ++i) {
      if (hosts[h][i] == ctx.rank) my_host = h, my_local = i;
    }
  }
  std::vector<int> cross;
  for (int h = 0; h < H; ++h) cross.push_back(hosts[h][my_local]);

  const auto [source_buffer, ready] = contribution_source(b, bytes, spec.in_place, spec.prescaled);
  // A zero-byte copy that waits for `deps`: joins phases whose pieces do not line up.
  auto join = [&](std::vector<int> deps) { return b.copy({kBufOutput, 0, 0}, {kBufOutput, 0, 0}, ScaleUse::kNone, deps); };

  // Phase 1, reduce-scatter inside the host around the host's ring, without the post-scale
  // (the sum is only the host's): local rank i ends with part i summed over its host.
  Blocks local_blocks = partition(spec.count, L);
  const int local_pieces = pieces_for(local_blocks.max_count(), elem, ctx.chunk_bytes);
  Ring local{b, hosts[my_host], my_local, local_blocks, elem, local_pieces, ScaleUse::kNone};
  Locator out = in_buffer(kBufOutput, 0, local_blocks, elem);
  std::vector<std::vector<int>> local_sends;
  std::vector<int> partial = local.reduce_scatter(in_buffer(source_buffer, 0, local_blocks, elem), ready, out, out, 0,
                                                  local_sends);
  uint32_t tag = static_cast<uint32_t>((L - 1) * local_pieces);

  // Phase 2, allreduce of part my_local across hosts: a ring of the H ranks with our local
  // index (reduce-scatter of the part's H blocks, then allgather), after all of phase 1
  // here; we end with part my_local summed over every rank, post-scaled.
  Blocks cross_blocks = partition(local_blocks.count[my_local], H);
  for (size_t& off : cross_blocks.offset) off += local_blocks.offset[my_local];
  const int cross_pieces = pieces_for(cross_blocks.max_count(), elem, ctx.chunk_bytes);
  Ring across{b, cross, my_host, cross_blocks, elem, cross_pieces};
  Locator part = in_buffer(kBufOutput, 0, cross_blocks, elem);
  const int phase2_start = join(partial);
  std::vector<std::vector<int>> cross_sends;
  std::vector<int> finals = across.reduce_scatter(part, phase2_start, part, part, tag, cross_sends);
  across.allgather(part, finals, tag + static_cast<uint32_t>((H - 1) * cross_pieces), cross_sends);
  tag += static_cast<uint32_t>(2 * (H - 1) * cross_pieces);
  std::vector<int> phase2;
  for (int i = phase2_start; i < b.next_step(); ++i) phase2.push_back(i);
  const int done = join(phase2);

  // Phase 3, allgather inside the host around the host's ring, once phase 2 is done here:
  // in step s local rank i forwards part i-s and receives part i-s-1, so every rank ends
  // with every part. A receive waits for the phase-1 send that read its part.
  local.allgather(out, std::vector<int>(local_pieces, done), tag, local_sends);
  return b.take();
}

}  // namespace kolo
