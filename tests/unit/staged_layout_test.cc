// The device_staged executor's offset arithmetic (engine/executors/device_staged/
// staged_layout.h) against a reference written here: for each collective on 1-5 ranks,
// odd counts, several dtypes and chunk splits, in place and not, the views a chunk copies
// hold exactly the bytes of the user's buffers the chunk's host call reads and writes, in
// the order the host call sees them; over the chunks every byte of a buffer is copied once;
// the layout keeps aliasing (a device byte has one place in the staging); a slot holds the
// largest chunk of the staging rule. The chunking itself (chunk_elems, staged_chunk_elems)
// is not tested here: the chunk splits are the test's own.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/executors/device_staged/staged_layout.h"

namespace kolo::staged {
namespace {

constexpr CollKind kChunkable[] = {CollKind::kAllreduce, CollKind::kBroadcast,     CollKind::kReduce,
                                   CollKind::kAllgather, CollKind::kReduceScatter, CollKind::kAlltoall};
constexpr DType kDTypes[] = {DType::kInt8, DType::kFloat16, DType::kFloat32, DType::kFloat64};

// ---- the reference ------------------------------------------------------------------------

// Bytes of a call's input and output buffers (what the API checks them for).
struct Sizes {
  size_t in = 0, out = 0;
};

Sizes reference_sizes(CollKind kind, size_t count, size_t es, int ranks) {
  const size_t b = count * es, all = b * static_cast<size_t>(ranks);
  switch (kind) {
    case CollKind::kAllreduce:
    case CollKind::kBroadcast:
    case CollKind::kReduce: return {b, b};
    case CollKind::kAllgather: return {b, all};
    case CollKind::kReduceScatter: return {all, b};
    case CollKind::kAlltoall: return {all, all};
    case CollKind::kSend: return {b, 0};
    case CollKind::kRecv: return {0, b};
    default: return {0, 0};
  }
}

// The side of a call that holds one block per rank.
bool holds_blocks(CollKind kind, bool send_side) {
  switch (kind) {
    case CollKind::kAllgather: return !send_side;
    case CollKind::kReduceScatter: return send_side;
    case CollKind::kAlltoall: return true;
    default: return false;
  }
}

// Byte k of the send (recv) buffer of the host call that runs elements [first, first + c)
// of every block is byte map[k] of the user's send (recv) buffer.
std::vector<size_t> host_map(CollKind kind, bool send_side, size_t count, size_t first, size_t c, size_t es,
                             int ranks) {
  std::vector<size_t> map;
  const size_t blocks = holds_blocks(kind, send_side) ? static_cast<size_t>(ranks) : 1;
  for (size_t q = 0; q < blocks; ++q) {
    for (size_t j = 0; j < c * es; ++j) map.push_back(q * count * es + first * es + j);
  }
  return map;
}

// A call's buffers in the test's memory.
struct Buffers {
  const char* send = nullptr;  // null: no send buffer
  char* recv = nullptr;
  Sizes size;
};

// The device bytes of a view, in the order the staging holds them.
std::vector<const char*> bytes_of_view(const View& v) {
  std::vector<const char*> out;
  if (!v.used()) return out;
  for (size_t q = 0; q < v.blocks; ++q) {
    for (size_t j = 0; j < v.bytes; ++j) out.push_back(v.device + q * v.stride + j);
  }
  return out;
}

size_t staging_bytes(const Layout& l) {
  size_t bytes = 0;
  for (int r = 0; r < l.regions; ++r) bytes += staged_aligned(l.region[r].total());
  return bytes;
}

std::string what(const CollCall& call, int ranks, int rank, size_t first, size_t c) {
  return std::string(coll_name(call.spec.kind)) + " ranks " + std::to_string(ranks) + " rank " +
         std::to_string(rank) + " count " + std::to_string(call.spec.count) + " es " +
         std::to_string(dtype_size(call.spec.dtype)) + (call.spec.in_place ? " in place" : "") + " chunk [" +
         std::to_string(first) + ", +" + std::to_string(c) + ")";
}

// One side of a part against the reference: the view holds the user's bytes map[k] in
// order, inside the buffer, and the layout stages them end to end (the host call's buffer)
// where the region's staging holds them. Counts each user byte the chunk copies.
void check_side(const char* side, const View& view, const char* buffer, size_t size, const std::vector<size_t>& map,
                const Layout& l, int in, std::vector<int>* cover, size_t* host_at, const std::string& w) {
  SCOPED_TRACE(w + " " + side);
  if (buffer == nullptr || map.empty()) {
    EXPECT_FALSE(view.used());
    EXPECT_EQ(in, -1);
    return;
  }
  ASSERT_TRUE(view.used());
  EXPECT_TRUE(view.blocks == 1 || view.stride >= view.bytes) << "pieces overlap";
  EXPECT_GE(view.device, buffer);
  EXPECT_LE(view.end(), buffer + size);
  const std::vector<const char*> got = bytes_of_view(view);
  ASSERT_EQ(got.size(), map.size());
  for (size_t k = 0; k < map.size(); ++k) {
    ASSERT_LT(map[k], size);
    ASSERT_EQ(got[k], buffer + map[k]) << "host byte " << k;
    ++(*cover)[map[k]];
  }
  ASSERT_GE(in, 0);
  ASSERT_LT(in, l.regions);
  const View& region = l.region[in];
  const size_t at = region.locate(view.device, view.bytes);
  ASSERT_NE(at, View::npos);
  for (size_t q = 0; q < view.blocks; ++q) {  // each piece is one copy: inside one piece of the region
    EXPECT_NE(region.locate(view.device + q * view.stride, view.bytes), View::npos) << "piece " << q;
  }
  for (size_t k = 0; k < map.size(); ++k) {
    ASSERT_EQ(region.locate(buffer + map[k], 1), at + k) << "host byte " << k << " is not where the host call reads it";
  }
  *host_at = at;
}

// part_of and layout_of for elements [first, first + c) of every block of `call`.
void check_chunk(const CollCall& call, const Buffers& b, size_t first, size_t c, int ranks, int rank,
                 std::vector<int>* send_cover, std::vector<int>* recv_cover) {
  const std::string w = what(call, ranks, rank, first, c);
  SCOPED_TRACE(w);
  const CollKind kind = call.spec.kind;
  const size_t es = dtype_size(call.spec.dtype), count = call.spec.count;
  const bool chunked = kind != CollKind::kAllgatherv && kind != CollKind::kSend && kind != CollKind::kRecv &&
                       kind != CollKind::kBarrier;
  const Part p = part_of(call, first, c, ranks, rank);
  EXPECT_EQ(p.call.spec.count, chunked ? c : count);
  EXPECT_EQ(p.call.recv, call.recv);
  EXPECT_EQ(p.call.send, b.send);  // a broadcast's send is dropped where it is not read

  std::vector<size_t> send_map, recv_map;
  if (chunked) {
    send_map = host_map(kind, true, count, first, c, es, ranks);
    recv_map = host_map(kind, false, count, first, c, es, ranks);
  } else {
    for (size_t k = 0; k < b.size.in; ++k) send_map.push_back(k);
    for (size_t k = 0; k < b.size.out; ++k) recv_map.push_back(k);
  }

  Layout l;
  const Status s = layout_of(p, rank, &l);
  ASSERT_TRUE(s.ok()) << s.message();
  const bool both = p.send.used() && p.recv.used();
  const bool shared = both && overlap(p.send, p.recv);
  EXPECT_EQ(l.regions, (p.send.used() ? 1 : 0) + (p.recv.used() ? 1 : 0) - (shared ? 1 : 0));
  EXPECT_EQ(l.whole_in, shared && p.send.blocks == 1 && p.recv.blocks == 1);
  if (l.whole_in) {  // one span, both buffers in it
    EXPECT_EQ(l.region[0].blocks, 1u);
    EXPECT_EQ(l.region[0].device, std::min(p.send.device, p.recv.device));
    EXPECT_EQ(l.region[0].end(), std::max(p.send.end(), p.recv.end()));
  }
  for (int r = 0; r < l.regions; ++r) {
    EXPECT_TRUE(l.region[r].used());
    EXPECT_TRUE(l.region[r].blocks == 1 || l.region[r].stride >= l.region[r].bytes) << "region " << r;
  }
  if (l.regions == 2) {
    EXPECT_FALSE(overlap(l.region[0], l.region[1]));
    EXPECT_NE(l.send_in, l.recv_in);
  }
  if (call.spec.in_place) {
    EXPECT_EQ(l.regions, 1);
    EXPECT_EQ(l.send_in, l.recv_in);
  }
  size_t send_at = View::npos, recv_at = View::npos;
  check_side("send", p.send, b.send, b.size.in, send_map, l, l.send_in, send_cover, &send_at, w);
  check_side("recv", p.recv, b.recv, b.size.out, recv_map, l, l.recv_in, recv_cover, &recv_at, w);
  if (call.spec.in_place && send_at != View::npos && recv_at != View::npos) {
    // The host call runs in place on the staging as the device call does.
    const size_t own = static_cast<size_t>(rank) * c * es;
    if (kind == CollKind::kAllgather) {
      EXPECT_EQ(send_at, recv_at + own);
    } else if (kind == CollKind::kReduceScatter) {
      EXPECT_EQ(recv_at, send_at + own);
    } else {
      EXPECT_EQ(send_at, recv_at);
    }
  }
  EXPECT_LE(staging_bytes(l), staged_slot_bytes(ranks));
}

void expect_covered_once(const std::vector<int>& cover, const char* side, const std::string& w) {
  for (size_t k = 0; k < cover.size(); ++k) {
    if (cover[k] != 1) {
      ADD_FAILURE() << w << ": byte " << k << " of " << side << " copied " << cover[k] << " times";
      return;
    }
  }
}

// Where the test's buffers lie: disjoint, or in place as the API takes it.
struct Memory {
  std::vector<char> arena;
  Buffers place(CollKind kind, bool in_place, size_t count, size_t es, int ranks, int rank, int root) {
    Buffers b;
    b.size = reference_sizes(kind, count, es, ranks);
    arena.assign(b.size.in + b.size.out + 64, 0);
    char* base = arena.data() + 3;  // not aligned: the layout must not care
    const size_t own = static_cast<size_t>(rank) * count * es;
    if (!in_place) {
      b.send = base;
      b.recv = base + b.size.in + 5;
    } else if (kind == CollKind::kAllgather) {
      b.recv = base;
      b.send = base + own;
    } else if (kind == CollKind::kReduceScatter) {
      b.send = base;
      b.recv = base + own;
    } else {
      b.send = b.recv = base;
    }
    if (kind == CollKind::kReduce && rank != root) b.recv = nullptr;  // as the API passes it
    return b;
  }
};

// The test's chunk splits of `count`: even ones, a whole one, a ragged one.
std::vector<std::vector<size_t>> splits_of(size_t count) {
  std::vector<std::vector<size_t>> out;
  for (size_t per : {size_t{1}, size_t{2}, size_t{3}, count}) {
    if (per == 0) continue;
    std::vector<size_t> s;
    for (size_t first = 0; first < count; first += per) s.push_back(std::min(per, count - first));
    out.push_back(s);
  }
  std::vector<size_t> ragged;
  for (size_t left = count, c = 1; left > 0; c = c % 3 + 1) {
    ragged.push_back(std::min(c, left));
    left -= ragged.back();
  }
  out.push_back(ragged);
  return out;
}

// ---- the tests ------------------------------------------------------------------------------

TEST(StagedLayout, ChunksOfEveryChunkableCallCopyEachByteOnceWhereTheHostCallSeesIt) {
  Memory m;
  for (int ranks = 1; ranks <= 5; ++ranks) {
    const int root = ranks / 2;
    for (int rank = 0; rank < ranks; ++rank) {
      for (CollKind kind : kChunkable) {
        for (DType dtype : kDTypes) {
          const size_t es = dtype_size(dtype);
          for (size_t count : {1, 2, 5, 7, 13}) {
            for (bool in_place : {false, true}) {
              const Buffers b = m.place(kind, in_place, count, es, ranks, rank, root);
              CollCall call;
              call.spec.kind = kind;
              call.spec.count = count;
              call.spec.dtype = dtype;
              call.spec.root = root;
              call.spec.in_place = in_place && !(kind == CollKind::kReduce && rank != root);
              call.send = b.send;
              call.recv = b.recv;
              Buffers expected = b;
              if (kind == CollKind::kBroadcast && rank != root && !in_place) {
                // Read at the root only: elsewhere anything, even a pointer into recv.
                call.send = b.recv + 1;
                expected.send = nullptr;
              }
              for (const std::vector<size_t>& split : splits_of(count)) {
                std::vector<int> send_cover(b.size.in), recv_cover(b.size.out);
                size_t first = 0;
                for (size_t c : split) {
                  check_chunk(call, expected, first, c, ranks, rank, &send_cover, &recv_cover);
                  first += c;
                }
                if (::testing::Test::HasFatalFailure()) return;
                const std::string w = what(call, ranks, rank, 0, count) + " split of " + std::to_string(split.size());
                if (expected.send != nullptr) expect_covered_once(send_cover, "send", w);
                if (expected.recv != nullptr) expect_covered_once(recv_cover, "recv", w);
                if (::testing::Test::HasFailure()) return;
              }
            }
          }
        }
      }
    }
  }
}

TEST(StagedLayout, AnEmptyChunkStagesNothing) {
  std::vector<char> arena(64);
  for (CollKind kind : kChunkable) {
    CollCall call;
    call.spec.kind = kind;
    call.spec.count = 0;
    call.send = arena.data();
    call.recv = arena.data() + 32;
    const Part p = part_of(call, 0, 0, 3, 0);
    EXPECT_FALSE(p.send.used()) << coll_name(kind);
    EXPECT_FALSE(p.recv.used()) << coll_name(kind);
    Layout l;
    ASSERT_TRUE(layout_of(p, 0, &l).ok());
    EXPECT_EQ(l.regions, 0) << coll_name(kind);
    EXPECT_EQ(l.send_in, -1);
    EXPECT_EQ(l.recv_in, -1);
  }
}

// Allgatherv, send and recv run whole: each buffer is one piece of bytes_of's size; an
// allgatherv in place (send at its own displacement of recv) stages recv's whole span,
// gaps included, copied in whole so that they come back as they were.
TEST(StagedLayout, WholeCallsStageTheirWholeBuffers) {
  struct Case {
    std::vector<size_t> counts, displs;
  };
  const std::vector<Case> cases = {
      {{3}, {0}},
      {{2, 5}, {0, 2}},
      {{4, 1, 3}, {9, 0, 2}},       // out of order, a gap
      {{1, 0, 6, 2}, {0, 1, 1, 7}},  // a rank with nothing (at the same place as the next)
      {{5, 5, 5, 5, 5}, {20, 15, 10, 5, 0}},
  };
  std::vector<char> arena(4096);
  for (const Case& k : cases) {
    const int ranks = static_cast<int>(k.counts.size());
    for (int rank = 0; rank < ranks; ++rank) {
      for (DType dtype : kDTypes) {
        const size_t es = dtype_size(dtype);
        size_t extent = 0;
        for (int q = 0; q < ranks; ++q) extent = std::max(extent, k.displs[q] + k.counts[q]);
        for (bool in_place : {false, true}) {
          CollCall call;
          call.spec.kind = CollKind::kAllgatherv;
          call.spec.count = k.counts[rank];
          call.spec.dtype = dtype;
          call.spec.counts = k.counts;
          call.spec.displs = k.displs;
          Buffers b;
          b.size = {k.counts[rank] * es, extent * es};
          b.recv = arena.data() + 7;
          b.send = in_place ? b.recv + k.displs[rank] * es : b.recv + b.size.out + 1;
          call.send = b.send;
          call.recv = b.recv;
          const CallBytes bytes = bytes_of(call.spec, ranks, rank);
          EXPECT_EQ(bytes.in, b.size.in);
          EXPECT_EQ(bytes.out, b.size.out);
          std::vector<int> send_cover(b.size.in), recv_cover(b.size.out);
          check_chunk(call, b, 0, call.spec.count, ranks, rank, &send_cover, &recv_cover);
          const std::string w = what(call, ranks, rank, 0, call.spec.count);
          expect_covered_once(send_cover, "send", w);
          expect_covered_once(recv_cover, "recv", w);
          if (in_place && b.size.in > 0) {
            Layout l;
            ASSERT_TRUE(layout_of(part_of(call, 0, call.spec.count, ranks, rank), rank, &l).ok());
            EXPECT_TRUE(l.whole_in) << w;
            EXPECT_EQ(l.region[0].device, b.recv) << w;
            EXPECT_EQ(l.region[0].total(), b.size.out) << w;
          }
        }
      }
    }
  }
  for (CollKind kind : {CollKind::kSend, CollKind::kRecv}) {
    for (size_t count : {1, 6, 11}) {
      CollCall call;
      call.spec.kind = kind;
      call.spec.count = count;
      call.spec.dtype = DType::kFloat64;
      call.spec.peer = 1;
      Buffers b;
      b.size = reference_sizes(kind, count, 8, 2);
      if (kind == CollKind::kSend) b.send = arena.data() + 1;
      if (kind == CollKind::kRecv) b.recv = arena.data() + 1;
      call.send = b.send;
      call.recv = b.recv;
      std::vector<int> send_cover(b.size.in), recv_cover(b.size.out);
      check_chunk(call, b, 0, count, 2, 0, &send_cover, &recv_cover);
      const std::string w = what(call, 2, 0, 0, count);
      expect_covered_once(send_cover, "send", w);
      expect_covered_once(recv_cover, "recv", w);
    }
  }
  CollCall barrier;
  barrier.spec.kind = CollKind::kBarrier;
  const Part p = part_of(barrier, 0, 0, 4, 1);
  Layout l;
  ASSERT_TRUE(layout_of(p, 1, &l).ok());
  EXPECT_EQ(l.regions, 0);
}

TEST(StagedLayout, BytesOfEveryKind) {
  for (int ranks = 1; ranks <= 5; ++ranks) {
    for (DType dtype : kDTypes) {
      const size_t es = dtype_size(dtype);
      for (CollKind kind : {CollKind::kAllreduce, CollKind::kBroadcast, CollKind::kReduce, CollKind::kAllgather,
                            CollKind::kReduceScatter, CollKind::kAlltoall, CollKind::kSend, CollKind::kRecv,
                            CollKind::kBarrier}) {
        for (size_t count : {0, 1, 9}) {
          CollSpec s;
          s.kind = kind;
          s.count = count;
          s.dtype = dtype;
          const Sizes want = reference_sizes(kind, count, es, ranks);
          const CallBytes got = bytes_of(s, ranks, ranks - 1);
          EXPECT_EQ(got.in, want.in) << coll_name(kind) << " ranks " << ranks << " count " << count;
          EXPECT_EQ(got.out, want.out) << coll_name(kind) << " ranks " << ranks << " count " << count;
        }
      }
    }
  }
  // An allgatherv whose counts do not name this rank: its own count.
  CollSpec s;
  s.kind = CollKind::kAllgatherv;
  s.count = 4;
  s.dtype = DType::kFloat32;
  s.counts = {2, 3};
  s.displs = {3, 0};
  EXPECT_EQ(bytes_of(s, 3, 2).in, 16u);
  EXPECT_EQ(bytes_of(s, 3, 2).out, 20u);
  EXPECT_EQ(bytes_of(s, 3, 1).in, 12u);
}

TEST(StagedLayout, ViewsLocatePiecesAndTellOverlap) {
  std::vector<char> arena(256);
  const char* d = arena.data();
  const View strided{d + 10, 3, 20, 6};  // [10,16) [30,36) [50,56)
  EXPECT_EQ(strided.total(), 18u);
  EXPECT_EQ(strided.end(), d + 56);
  EXPECT_EQ(strided.locate(d + 10, 6), 0u);
  EXPECT_EQ(strided.locate(d + 32, 4), 8u);
  EXPECT_EQ(strided.locate(d + 50, 6), 12u);
  EXPECT_EQ(strided.locate(d + 9, 1), View::npos);   // before
  EXPECT_EQ(strided.locate(d + 16, 1), View::npos);  // in a gap
  EXPECT_EQ(strided.locate(d + 14, 4), View::npos);  // across a gap
  EXPECT_EQ(strided.locate(d + 70, 1), View::npos);  // past the last piece
  EXPECT_EQ(strided.locate(d + 56, 1), View::npos);
  EXPECT_TRUE(strided.holds(View{d + 31, 1, 0, 5}));
  EXPECT_TRUE(strided.holds(View{d + 12, 3, 20, 4}));
  EXPECT_FALSE(strided.holds(View{d + 12, 3, 20, 5}));
  EXPECT_FALSE(strided.holds(View{d + 12, 3, 21, 4}));

  const View adjacent{d, 4, 8, 8};
  const View one = adjacent.normal();
  EXPECT_EQ(one.blocks, 1u);
  EXPECT_EQ(one.device, d);
  EXPECT_EQ(one.total(), 32u);
  EXPECT_EQ(strided.normal().blocks, 3u);

  EXPECT_TRUE(overlap(View{d, 1, 0, 10}, View{d + 9, 1, 0, 4}));
  EXPECT_FALSE(overlap(View{d, 1, 0, 10}, View{d + 10, 1, 0, 4}));  // touching
  EXPECT_FALSE(overlap(View{d, 1, 0, 10}, View{d + 5, 1, 0, 0}));   // empty
  EXPECT_FALSE(overlap(View{nullptr, 1, 0, 10}, View{d, 1, 0, 4}));
  EXPECT_FALSE(View{}.used());

  EXPECT_EQ(staged_aligned(0), 0u);
  EXPECT_EQ(staged_aligned(1), kStagedAlign);
  EXPECT_EQ(staged_aligned(kStagedAlign), kStagedAlign);
  EXPECT_EQ(staged_aligned(kStagedAlign + 1), 2 * kStagedAlign);
}

// Send and recv overlapping other than in place, in a chunk: staging cannot keep the
// aliasing, and says so rather than stage something else.
TEST(StagedLayout, OverlapStagingCannotReproduceIsAnError) {
  std::vector<char> arena(1024);
  const size_t count = 8, c = 3;
  CollCall call;
  call.spec.kind = CollKind::kAllgather;
  call.spec.count = count;
  call.spec.dtype = DType::kFloat32;
  call.recv = arena.data();
  call.send = arena.data() + 4 * count + 2;  // rank 1's block, two bytes on
  Layout l;
  const Status s = layout_of(part_of(call, 2, c, 3, 1), 1, &l);
  EXPECT_EQ(s.code(), Code::kInternal);
  call.send = arena.data() + 4 * count;  // exactly rank 1's block: in place
  EXPECT_TRUE(layout_of(part_of(call, 2, c, 3, 1), 1, &l).ok());

  call.spec.kind = CollKind::kAlltoall;
  call.send = arena.data() + 4 * count;  // one block on
  EXPECT_EQ(layout_of(part_of(call, 2, c, 3, 1), 1, &l).code(), Code::kInternal);
}

// The largest chunk the staging rule makes (a side of at most kStagedChunkBytes; a
// rank-major call's pieces max(kStagedChunkBytes / ranks, kStagedMinPieceBytes) each)
// fits a slot, whole or cut from the middle of a larger call, in place or not.
void check_largest_chunk_fits(CollKind kind, int ranks, DType dtype, bool in_place) {
  const size_t es = dtype_size(dtype);
  const size_t n = static_cast<size_t>(ranks);
  const bool major = kind == CollKind::kAllgather || kind == CollKind::kReduceScatter || kind == CollKind::kAlltoall;
  const size_t piece = major ? std::max(kStagedChunkBytes / n, kStagedMinPieceBytes) : kStagedChunkBytes;
  const size_t c = piece / es;
  for (size_t count : {c, c + 1}) {
    const Sizes size = reference_sizes(kind, count, es, ranks);
    std::unique_ptr<char[]> arena(new char[size.in + size.out]);  // never touched
    const int rank = ranks - 1;
    CollCall call;
    call.spec.kind = kind;
    call.spec.count = count;
    call.spec.dtype = dtype;
    call.spec.root = rank;
    call.spec.in_place = in_place;
    char* recv = arena.get() + (in_place ? 0 : size.in);
    const char* send = arena.get();
    if (in_place && kind == CollKind::kAllgather) send = recv + static_cast<size_t>(rank) * count * es;
    if (in_place && kind == CollKind::kReduceScatter) recv = arena.get() + static_cast<size_t>(rank) * count * es;
    call.send = send;
    call.recv = recv;
    Layout l;
    ASSERT_TRUE(layout_of(part_of(call, count - c, c, ranks, rank), rank, &l).ok());
    EXPECT_LE(staging_bytes(l), staged_slot_bytes(ranks))
        << coll_name(kind) << " on " << ranks << " ranks, " << es << "-byte elements" << (in_place ? ", in place" : "")
        << ", a chunk of " << c << " from a call of " << count;
  }
}

TEST(StagedLayout, TheLargestChunkFitsASlot) {
  for (int ranks : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 64}) {
    for (CollKind kind : kChunkable) {
      for (DType dtype : {DType::kInt8, DType::kFloat32, DType::kFloat64}) {
        for (bool in_place : {false, true}) {
          // Not yet so: see the test below.
          if (kind == CollKind::kAlltoall && !in_place && ranks > 8) continue;
          check_largest_chunk_fits(kind, ranks, dtype, in_place);
        }
      }
    }
  }
  EXPECT_EQ(staged_slot_bytes(0), staged_slot_bytes(1));
}

// staged_slot_bytes counts one strided side and one piece for a rank-major call, but an
// alltoall out of place stages both sides strided: from 9 ranks on (pieces of
// kStagedMinPieceBytes) its largest chunk, and an alltoall not cut, need 2 * ranks pieces,
// more than a slot, and go through the large buffer.
TEST(StagedLayout, DISABLED_AnAlltoallChunkOnManyRanksFitsASlot) {
  for (int ranks : {9, 16, 64}) check_largest_chunk_fits(CollKind::kAlltoall, ranks, DType::kFloat32, false);
}

// The stream items of a staged run: per chunk kStagedChunkItems and one copy for each piece
// of each buffer it uses (a whole buffer is one piece, an empty one none; a chunk of a
// rank-major call has a piece per rank on its strided sides). A group runs whole, whatever
// `per` says.
TEST(StagedLayout, StreamItemsCountEveryCopy) {
  std::vector<char> arena(4096);
  for (int ranks = 1; ranks <= 5; ++ranks) {
    for (int rank = 0; rank < ranks; ++rank) {
      std::vector<CollCall> calls;
      size_t copies = 0;
      for (CollKind kind : kChunkable) {
        const bool reads_send = kind != CollKind::kBroadcast || rank == 0;
        for (size_t count : {7, 0, 12}) {
          CollCall call;
          call.spec.kind = kind;
          call.spec.count = count;
          call.spec.dtype = DType::kFloat32;
          call.spec.root = 0;
          call.send = arena.data();
          call.recv = arena.data() + 2048;
          const std::string w = std::string(coll_name(kind)) + ", rank " + std::to_string(rank) + " of " +
                                std::to_string(ranks) + ", count " + std::to_string(count);
          if (count > 0) {
            copies += reads_send ? 2 : 1;
            // Alone, cut in chunks of `per` (the last one shorter).
            for (size_t per : {size_t{1}, size_t{5}, count - 1}) {
              if (per == 0) continue;
              const size_t chunks = (count + per - 1) / per;
              const size_t n = per < count ? static_cast<size_t>(ranks) : 1;
              const size_t pieces = (reads_send ? (holds_blocks(kind, true) ? n : 1) : 0) +
                                    (holds_blocks(kind, false) ? n : 1);
              EXPECT_EQ(stream_items(&call, 1, per, ranks, rank), chunks * (pieces + kStagedChunkItems))
                  << w << ", chunks of " << per;
            }
            EXPECT_EQ(stream_items(&call, 1, 0, ranks, rank), kStagedChunkItems + (reads_send ? 2 : 1)) << w;
          }
          calls.push_back(call);
          if (calls.size() < 2) continue;
          EXPECT_EQ(stream_items(calls.data(), calls.size(), 3, ranks, rank), kStagedChunkItems + copies)
              << w << ", a group of " << calls.size();
        }
      }
    }
  }
}

}  // namespace
}  // namespace kolo::staged
