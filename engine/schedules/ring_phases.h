// Internal to the ring family (ring.cc, hierarchical.cc): blocks, locators and the two
// ring phases over an arbitrary ring of ranks. Block c of the data belongs to ring
// position c. In the reduce-scatter phase, at step s position r sends block (r-s-1) and
// receives block (r-s-2), reducing it with its own contribution, so after p-1 steps it
// holds block r fully reduced; each block is reduced in one order, so every rank gets
// bit-identical results. The allgather phase then passes the finished blocks around the
// ring. Every block is split into J pieces that travel independently, so sending,
// receiving and reducing overlap (pipelining); received pieces land in K rotating scratch
// slots.
#pragma once

#include <algorithm>
#include <functional>
#include <vector>

#include "engine/schedules/algorithms.h"
#include "engine/schedules/schedule_builder.h"

namespace kolo::ring_detail {

inline int mod(int a, int p) { return ((a % p) + p) % p; }

constexpr int kRingSlots = 4;

// Where the blocks of the ring live, in elements of the data type.
struct Blocks {
  std::vector<size_t> offset;
  std::vector<size_t> count;
  size_t max_count() const { return count.empty() ? 0 : *std::max_element(count.begin(), count.end()); }
};

inline Blocks partition(size_t total, int parts) {
  Blocks b;
  for (int c = 0; c < parts; ++c) {
    auto [off, cnt] = split_part(total, parts, c);
    b.offset.push_back(off);
    b.count.push_back(cnt);
  }
  return b;
}

inline Blocks uniform(size_t each, int parts) {
  Blocks b;
  for (int c = 0; c < parts; ++c) {
    b.offset.push_back(each * c);
    b.count.push_back(each);
  }
  return b;
}

// Maps (block, first element within block, elements) to a slice of some buffer.
using Locator = std::function<Slice(int block, size_t elem_offset, size_t elems)>;

inline Locator in_buffer(int buffer, size_t base_bytes, const Blocks& blocks, size_t elem) {
  return [=](int c, size_t off, size_t n) {
    return Slice{buffer, base_bytes + (blocks.offset[c] + off) * elem, n * elem};
  };
}

// One ring: `order` lists the ranks by position, this rank is at `pos`; block c belongs
// to position c. Tags start at tag_base (callers space rings and phases apart).
struct Ring {
  ScheduleBuilder& b;
  const std::vector<int>& order;
  int pos;
  const Blocks& blocks;
  size_t elem;
  int pieces;
  ScaleUse final_scale = ScaleUse::kPost;  // kNone when a later phase finishes the result

  int p() const { return static_cast<int>(order.size()); }
  int r() const { return pos; }
  int next() const { return order[mod(pos + 1, p())]; }
  int prev() const { return order[mod(pos - 1, p())]; }
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
      // Step s: send block r-s-1, which we hold summed over positions r-s..r (at s = 0
      // that is our own contribution), to the next position; receive block r-s-2, summed
      // over positions r-s-1..r-1, from the previous one and add our contribution. At the
      // last step that block is r, now summed over all p positions: it goes to final_dst.
      const int send_c = mod(r() - s - 1, p());
      const int recv_c = mod(r() - s - 2, p());
      for (int j = 0; j < pieces; ++j) {
        // Piece j waits only for piece j of the step before, so the pieces of consecutive
        // steps overlap; a receive reuses the slot of the piece `slots` earlier once that
        // piece's reduce has read it.
        const int seq = s * pieces + j;
        const uint32_t tag = tag_base + static_cast<uint32_t>(seq);
        auto [soff, scount] = piece(send_c, j);
        Slice out = s == 0 ? source(send_c, soff, scount) : accum(send_c, soff, scount);
        sends[s][j] = b.send(next(), tag, out, {s == 0 ? source_ready : reduce_at[seq - pieces]});
        auto [roff, rcount] = piece(recv_c, j);
        const int slot = seq % slots;
        Slice landing{kBufScratch, slot_base + slot * slot_bytes, rcount * elem};
        int recv = b.recv(prev(), tag, landing, {seq >= slots ? reduce_at[seq - slots] : -1});
        const bool last = s == steps - 1;
        Slice dst = last ? final_dst(recv_c, roff, rcount) : accum(recv_c, roff, rcount);
        reduce_at[seq] = b.reduce(dst, {source(recv_c, roff, rcount), landing},
                                  last ? final_scale : ScaleUse::kNone, {recv, source_ready});
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
      // Step s: send block r-s (our own at s = 0, else the one received at step s-1) to
      // the next position and receive block r-s-1 from the previous one; after p-1 steps
      // every block is here. The reduce-scatter's step s also sent block r-s-1, from the
      // memory this receive overwrites when the two phases share a buffer: hence war.
      const int send_c = mod(r() - s, p());
      const int recv_c = mod(r() - s - 1, p());
      for (int j = 0; j < pieces; ++j) {
        const uint32_t tag = tag_base + static_cast<uint32_t>(s * pieces + j);
        auto [soff, scount] = piece(send_c, j);
        b.send(next(), tag, out(send_c, soff, scount), {s == 0 ? ready[j] : prev_recv[j]});
        auto [roff, rcount] = piece(recv_c, j);
        std::vector<int> deps;
        if (!war.empty()) deps.push_back(war[s][j]);
        prev_recv[j] = b.recv(prev(), tag, out(recv_c, roff, rcount), deps);
      }
    }
  }
};

}  // namespace kolo::ring_detail
