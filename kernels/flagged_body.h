// The one-kernel collectives of the device_ipc executor (Protocol::kFlagged), written once
// for both devices: cuda/flagged_kernels.cu wraps them in a __global__ function,
// device_kernels.cc runs them on the emulated device's stream worker.
//
// A small collective over the slots costs a copy into the slot, a barrier kernel and a
// reduce or copy kernel: three launches and two waits for the peers. Here each rank's
// kernel reads its input from the user's buffer and writes it straight into a box of its
// own in each receiving peer's IPC region, each 4 bytes of data beside a 4-byte flag in
// one 8-byte word (NCCL's LL protocol does the same): a reader that sees the flag sees the
// data, with no fence and no barrier. Then it polls its own region's boxes until every
// sender's words carry this call's flag and reduces them in rank order (allreduce, reduce
// at the root, reduce_scatter) or copies them into place (broadcast, allgather(v), alltoall).
// One launch, no wait but for the data itself.
//
// The flag is the call's number: every rank counts its flagged calls in its own device
// memory (`sequence`, advanced by the kernel, so a CUDA graph replays with new numbers),
// and every rank makes the same calls, so the numbers agree. Call v uses the boxes of
// parity v % 2. Every rank writes a header line, the call's digest (the tag), into its box
// at every peer, and every rank waits for every peer's header, sender or not: ranks making
// different calls fail with a mismatch on every rank instead of reading each other's data
// wrongly, and no rank starts call v + 2 (which writes parity v % 2 again) before every
// peer has started call v + 1, that is, finished reading call v.
//
// A reduction is the slot path's, bit for bit: each contribution prescaled and rounded to
// the storage type, combined in the compute type in rank order, postscaled, rounded once
// (reduce_body.h's reduce_element). Copies move bytes (the launcher gives them as uint8).
// A compressed allreduce (`wire`: FLOAT32 data, fp16 or bf16 codes on the way; the kernel
// is the one of the wire type) is the slot path's one-shot, bit for bit too: each rank
// encodes its prescaled input once (compress_math.h), the readers decode every rank's
// codes, add them in fp32 in rank order and postscale (decompress_sum).
// A thread handles unit u of every block it sends and receives, so an in-place call reads
// what it overwrites before it does. Every wait ends at the deadline or on abort, leaving
// the reason in the barrier's status words (barrier_body.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/barrier_body.h"
#include "kernels/compress_math.h"
#include "kernels/reduce_body.h"

namespace kolo {

// The most data one rank sends one peer in this protocol (a block of reduce_scatter and
// alltoall, the whole input otherwise). A box holds it as words of 4 data bytes and a flag:
// twice that, and one 16-byte header line.
constexpr size_t kFlaggedMaxBytes = size_t{64} << 10;
constexpr size_t kFlaggedBoxBytes = 2 * kFlaggedMaxBytes + 16;
constexpr size_t kFlaggedUnitBytes = 8;  // data bytes per 16-byte line

// Who sends what to whom, and what a receiver does with it.
enum class FlaggedKind : uint8_t { kAllreduce, kReduce, kBroadcast, kAllgather, kReduceScatter, kAlltoall, kAllgatherv };

struct FlaggedArgs {
  FlaggedKind kind = FlaggedKind::kAllreduce;
  int root = 0;  // reduce, broadcast
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // elements per block (copies: bytes, as uint8; allgatherv: this rank's bytes)
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  bool prescaled = false;  // contributions scaled by `pre` (and rounded) before they go out
  bool aligned = false;    // send, recv and every block 8-byte aligned: whole units at once
  ReduceScaleArgs pre, post;
  // Compressed allreduce: send and recv hold FLOAT32, `count` of them; dtype is the wire
  // type (fp16, bf16), op kSum; the scales as the codecs take them (factor / divisor).
  bool wire = false;
  float wire_pre = 1.0f, wire_post = 1.0f;
  // Allgatherv: the bytes each rank sends, and where in recv they land.
  uint32_t vbytes[kMaxIpcRanks] = {};
  uint64_t vdispl[kMaxIpcRanks] = {};
  uint64_t* out[kMaxIpcRanks] = {};       // this rank's box (parity 0) in each rank's region
  const uint64_t* in[kMaxIpcRanks] = {};  // each rank's box (parity 0) in this rank's region
  size_t parity_words = 0;                // from a box of parity 0 to its parity-1 twin
  int ranks = 0;
  int me = 0;
  uint32_t* sequence = nullptr;  // this rank's device memory: the last flagged call's number
  uint32_t* done = nullptr;      // device memory: blocks of the running call that finished
  uint64_t tag = 0;              // the call's digest
  uint64_t timeout_ns = 0;       // KOLO_TIMEOUT
  const volatile uint32_t* abort = nullptr;  // host memory: kolo_comm_abort was called
  volatile uint32_t* status = nullptr;       // host memory: why a wait gave up (barrier_body.h)
  volatile uint32_t* failed = nullptr;       // device memory: the same, for the kernels after
};

// The call's lines of data: units of 8 bytes, the last one maybe part full.
KOLO_HD_INLINE size_t flagged_units(size_t count, size_t element_bytes) {
  return (count * element_bytes + kFlaggedUnitBytes - 1) / kFlaggedUnitBytes;
}

// One line: two words, each 4 data bytes under a 4-byte flag, stored and loaded as whole
// words (8-byte accesses are single-copy atomic on the GPU and on x86).
KOLO_HD_INLINE void store_line(uint64_t* p, uint64_t data, uint32_t flag) {
  const uint64_t lo = (data & 0xffffffffull) | (static_cast<uint64_t>(flag) << 32);
  const uint64_t hi = (data >> 32) | (static_cast<uint64_t>(flag) << 32);
#if defined(__CUDA_ARCH__)
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(lo), "l"(hi) : "memory");
#else
  __atomic_store_n(p, lo, __ATOMIC_RELAXED);
  __atomic_store_n(p + 1, hi, __ATOMIC_RELAXED);
#endif
}

KOLO_HD_INLINE void load_line(const uint64_t* p, uint64_t* lo, uint64_t* hi) {
#if defined(__CUDA_ARCH__)
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(*lo), "=l"(*hi) : "l"(p) : "memory");
#else
  *lo = __atomic_load_n(p, __ATOMIC_RELAXED);
  *hi = __atomic_load_n(p + 1, __ATOMIC_RELAXED);
#endif
}

// Waits until the line carries `flag` in both words; its data in *data. False when the
// wait gave up (deadline, abort) or another thread's wait did (the status word is set).
KOLO_HD_INLINE bool wait_line(const FlaggedArgs& a, const uint64_t* p, uint32_t flag, int peer, uint64_t start,
                              uint64_t* data) {
  uint64_t lo, hi;
  unsigned spins = 0;
  for (;;) {
    load_line(p, &lo, &hi);
    if (static_cast<uint32_t>(lo >> 32) == flag && static_cast<uint32_t>(hi >> 32) == flag) break;
    if ((++spins & 63) == 0) {
      if (barrier_status(a.failed) != 0) return false;
      if (abort_requested(a.abort)) {
        set_barrier_status(a.failed, a.status, kBarrierAborted);
        return false;
      }
      if (clock_ns() - start > a.timeout_ns) {
        set_barrier_status(a.failed, a.status, kBarrierTimedOut + static_cast<uint32_t>(peer));
        return false;
      }
    }
    barrier_backoff(spins);
  }
  *data = (lo & 0xffffffffull) | (hi << 32);
  return true;
}

// The lines of several senders at once (lines[r]; null: none from r): every load is issued
// before any flag is looked at, so that a reader pays one round trip to its peers' memory
// instead of one per peer (8 thread-ranks on one H200: 16-21 us at 32 KB where 8 B took
// 11), then whatever had not arrived is waited for. Data in data[r]. With `expect` (the
// headers: the call's digest), a line that holds another value is a mismatch, reported as
// soon as it is seen, before any wait for the lines not there yet. The loops run to
// kMaxIpcRanks, unrolled, so that lo and hi stay in registers.
KOLO_HD_INLINE bool wait_lines(const FlaggedArgs& a, const uint64_t* const* lines, uint32_t flag, uint64_t start,
                               uint64_t* data, const uint64_t* expect = nullptr) {
  uint64_t lo[kMaxIpcRanks] = {}, hi[kMaxIpcRanks] = {};
  KOLO_UNROLL
  for (int r = 0; r < kMaxIpcRanks; ++r) {
    if (lines[r] != nullptr) load_line(lines[r], &lo[r], &hi[r]);
  }
  auto differs = [&](int r) {
    if (expect == nullptr || data[r] == *expect) return false;
    set_barrier_status(a.failed, a.status, kBarrierMismatch + static_cast<uint32_t>(r));
    return true;
  };
  bool arrived[kMaxIpcRanks] = {};
  KOLO_UNROLL
  for (int r = 0; r < kMaxIpcRanks; ++r) {
    arrived[r] = lines[r] != nullptr && static_cast<uint32_t>(lo[r] >> 32) == flag &&
                 static_cast<uint32_t>(hi[r] >> 32) == flag;
    if (!arrived[r]) continue;
    data[r] = (lo[r] & 0xffffffffull) | (hi[r] << 32);
    if (differs(r)) return false;
  }
  KOLO_UNROLL
  for (int r = 0; r < kMaxIpcRanks; ++r) {
    if (lines[r] == nullptr || arrived[r]) continue;
    if (!wait_line(a, lines[r], flag, r, start, &data[r]) || differs(r)) return false;
  }
  return true;
}

// Line `line` of every peer's box of this parity (not this rank's own: null there).
KOLO_HD_INLINE void peer_lines(const FlaggedArgs& a, size_t parity, size_t line, const uint64_t** lines) {
  KOLO_UNROLL
  for (int r = 0; r < kMaxIpcRanks; ++r) lines[r] = r < a.ranks && r != a.me ? a.in[r] + parity + line : nullptr;
}

// 8 data bytes as elements of the storage type.
template <class S>
union FlaggedUnit {
  uint64_t bits;
  S elem[kFlaggedUnitBytes / sizeof(S)];
};

// Allgatherv: the units of the longest rank's bytes (every receiving thread's range).
KOLO_HD_INLINE size_t flagged_most_units(const FlaggedArgs& a) {
  size_t most = 0;
  for (int r = 0; r < a.ranks; ++r) most = flagged_units(a.vbytes[r], 1) > most ? flagged_units(a.vbytes[r], 1) : most;
  return most;
}

// Who sends to whom: a rooted reduce gathers at the root, a broadcast scatters from it.
KOLO_HD_INLINE bool flagged_sends(const FlaggedArgs& a, int from, int to) {
  if (from == to) return false;
  if (a.kind == FlaggedKind::kReduce) return to == a.root;
  if (a.kind == FlaggedKind::kBroadcast) return from == a.root;
  return true;
}

KOLO_HD_INLINE bool flagged_reduces(const FlaggedArgs& a) {
  return a.kind == FlaggedKind::kAllreduce || a.kind == FlaggedKind::kReduce || a.kind == FlaggedKind::kReduceScatter;
}

// Whether each peer gets a block of its own (reduce_scatter, alltoall) or the whole input.
KOLO_HD_INLINE bool flagged_per_peer(const FlaggedArgs& a) {
  return a.kind == FlaggedKind::kReduceScatter || a.kind == FlaggedKind::kAlltoall;
}

// Where rank `to`'s block starts in a sender's input.
KOLO_HD_INLINE size_t flagged_block(const FlaggedArgs& a, int to, size_t element_bytes) {
  return flagged_per_peer(a) ? static_cast<size_t>(to) * a.count * element_bytes : 0;
}

// Unit u (8 bytes) of the block starting `offset` bytes into `base`, as elements: zeros
// past the end, prescaled and rounded where the call says so.
template <DType D>
KOLO_HD_INLINE uint64_t load_unit(const FlaggedArgs& a, const void* base, size_t offset, size_t u) {
  using Tr = DTypeTraits<D>;
  using S = typename Tr::Storage;
  constexpr size_t kPer = kFlaggedUnitBytes / sizeof(S);
  const S* block = reinterpret_cast<const S*>(static_cast<const char*>(base) + offset);
  FlaggedUnit<S> v;
  v.bits = 0;
  const size_t first = u * kPer;
  if (a.aligned && first + kPer <= a.count) {
    v.bits = *reinterpret_cast<const uint64_t*>(block + first);
  } else {
    for (size_t e = 0; e < kPer && first + e < a.count; ++e) v.elem[e] = block[first + e];
  }
  if (a.prescaled) {
    const BodyScaler<typename Tr::Compute> sc(a.pre);
    KOLO_UNROLL
    for (size_t e = 0; e < kPer; ++e) v.elem[e] = Tr::store(sc(Tr::load(v.elem[e])));
  }
  return v.bits;
}

// Unit u of the block of `count` elements starting `offset` bytes into recv: the elements
// inside the block.
template <DType D>
KOLO_HD_INLINE void store_unit(const FlaggedArgs& a, size_t offset, size_t u, uint64_t bits, size_t count) {
  using S = typename DTypeTraits<D>::Storage;
  constexpr size_t kPer = kFlaggedUnitBytes / sizeof(S);
  S* block = reinterpret_cast<S*>(static_cast<char*>(a.recv) + offset);
  FlaggedUnit<S> v;
  v.bits = bits;
  const size_t first = u * kPer;
  if (a.aligned && first + kPer <= count) {
    *reinterpret_cast<uint64_t*>(block + first) = v.bits;
  } else {
    for (size_t e = 0; e < kPer && first + e < count; ++e) block[first + e] = v.elem[e];
  }
}

// The wire types a compressed allreduce takes here: one code per value, no block scale.
template <DType D>
constexpr bool kFlaggedWire = D == DType::kFloat16 || D == DType::kBFloat16;

// fp8 wires carry a scale per block of 128 values: in the box each block is 16 units of
// codes and one unit whose low 4 bytes are the scale (units [17b, 17b + 17)).
constexpr size_t kFlaggedFp8Block = 128;  // kWireFp8Block (compress.h), which the slot path uses
constexpr size_t kFlaggedFp8Lines = kFlaggedFp8Block / kFlaggedUnitBytes;  // of codes
constexpr size_t kFlaggedFp8BlockUnits = kFlaggedFp8Lines + 1;
KOLO_HD_INLINE constexpr bool flagged_fp8(DType wire) { return wire == DType::kFloat8E4M3 || wire == DType::kFloat8E5M2; }
template <DType D>
constexpr bool kFlaggedBlockedWire = flagged_fp8(D);

KOLO_HD_INLINE size_t flagged_fp8_units(size_t count) {
  return (count + kFlaggedFp8Block - 1) / kFlaggedFp8Block * kFlaggedFp8BlockUnits;
}
// The lines of codes of `count` values, one thread's each: 16 per block.
KOLO_HD_INLINE size_t flagged_fp8_lines(size_t count) {
  return (count + kFlaggedFp8Block - 1) / kFlaggedFp8Block * kFlaggedFp8Lines;
}
// Where line j (0..15 codes, 16 the scale) of fp8 block b sits in a box: words after the header.
KOLO_HD_INLINE size_t flagged_fp8_word(size_t b, size_t j) { return 2 + 2 * (b * kFlaggedFp8BlockUnits + j); }

// The box bytes of a compressed call of `count` FLOAT32 values with this wire type: codes,
// and for fp8 a scale line per block (the planner and the launcher ask alike).
inline size_t flagged_wire_box_bytes(DType wire, size_t count) {
  return flagged_fp8(wire) ? flagged_fp8_units(count) * kFlaggedUnitBytes : count * dtype_size(wire);
}

// fp8 block b's scale: from the amax of its values [128b, 128b + 128) prescaled, as the
// slot path's encoder (compress.cc) takes it, bit for bit. Each of a block's 16 lines is a
// thread's, and each finds the amax itself: the body runs on the emulated device too, where
// threads cannot share registers.
template <DType D>
KOLO_HD_INLINE BlockScale fp8_block_scale(const FlaggedArgs& a, size_t b) {
  const size_t first = b * kFlaggedFp8Block;
  const size_t n = a.count - first < kFlaggedFp8Block ? a.count - first : kFlaggedFp8Block;
  const float* src = static_cast<const float*>(a.send) + first;
  uint32_t amax = 0;
  for (size_t j = 0; j < n; ++j) {
    const uint32_t x = abs_bits(codec_value<CodecOp::kCompress>(src[j], 0.0f, a.wire_pre));
    amax = x > amax ? x : amax;
  }
  return block_scale<WireTraits<D>>(amax);
}

// Line k of fp8 block b: the codes of values [128b + 8k, 128b + 8k + 8), zeros past the end.
template <DType D>
KOLO_HD_INLINE uint64_t fp8_line(const FlaggedArgs& a, size_t b, size_t k, float inv) {
  using Tr = WireTraits<D>;
  const size_t first = b * kFlaggedFp8Block + k * kFlaggedUnitBytes;
  const float* src = static_cast<const float*>(a.send) + first;
  FlaggedUnit<typename Tr::Code> v;
  v.bits = 0;
  for (size_t e = 0; e < kFlaggedUnitBytes && first + e < a.count; ++e) {
    v.elem[e] = encode_blocked<Tr>(codec_value<CodecOp::kCompress>(src[e], 0.0f, a.wire_pre), inv);
  }
  return v.bits;
}

// The units of the call's box: fp8 wires' blocks, or the data's 8-byte units.
template <DType D>
KOLO_HD_INLINE size_t flagged_call_units(const FlaggedArgs& a) {
  if constexpr (kFlaggedBlockedWire<D>) {
    if (a.wire) return flagged_fp8_units(a.count);
  }
  return flagged_units(a.count, sizeof(typename DTypeTraits<D>::Storage));
}

// Compressed unit u: FLOAT32 values [4u, 4u + 4) of send, prescaled and encoded (zeros
// past the end), as 8 bytes of codes.
template <DType D>
KOLO_HD_INLINE uint64_t load_wire_unit(const FlaggedArgs& a, size_t u) {
  using Tr = WireTraits<D>;
  constexpr size_t kPer = kFlaggedUnitBytes / sizeof(typename Tr::Code);
  const float* src = static_cast<const float*>(a.send);
  FlaggedUnit<typename Tr::Code> v;
  v.bits = 0;
  for (size_t e = 0; e < kPer && u * kPer + e < a.count; ++e) {
    v.elem[e] = Tr::encode(codec_value<CodecOp::kCompress>(src[u * kPer + e], 0.0f, a.wire_pre));
  }
  return v.bits;
}

// Thread `thread` of `nthreads`: the header into every peer's box, then this thread's
// units of each block this rank sends, into the receiving peers' boxes of this call's
// parity.
template <DType D, ReduceOp O>
KOLO_HD_INLINE void flagged_write(const FlaggedArgs& a, uint32_t seq, size_t thread, size_t nthreads) {
  constexpr size_t kBytes = sizeof(typename DTypeTraits<D>::Storage);
  const size_t parity = (seq & 1u) * a.parity_words;
  if (thread == 0) {
    for (int p = 0; p < a.ranks; ++p) {
      if (p != a.me) store_line(a.out[p] + parity, a.tag, seq);
    }
  }
  if (a.kind == FlaggedKind::kBroadcast && a.me != a.root) return;  // receives only (send may be null)
  if constexpr (kFlaggedBlockedWire<D>) {
    if (a.wire) {
      // A thread per line of codes: 16 per block of 128 values, the first also sending the
      // block's scale. Into this rank's own box too, where its own readers take them: a
      // reader then knows that every value of its block was encoded before it overwrites
      // any (in place).
      const size_t lines = flagged_fp8_lines(a.count);
      for (size_t i = thread; i < lines; i += nthreads) {
        const size_t b = i / kFlaggedFp8Lines, k = i % kFlaggedFp8Lines;
        const BlockScale scale = fp8_block_scale<D>(a, b);
        const uint64_t codes = fp8_line<D>(a, b, k, scale.inv);
        for (int p = 0; p < a.ranks; ++p) {
          store_line(a.out[p] + parity + flagged_fp8_word(b, k), codes, seq);
          if (k == 0) store_line(a.out[p] + parity + flagged_fp8_word(b, kFlaggedFp8Lines), float_to_bits(scale.scale), seq);
        }
      }
      return;
    }
  }
  const size_t units = flagged_call_units<D>(a);
  const bool per_peer = flagged_per_peer(a);
  for (size_t u = thread; u < units; u += nthreads) {
    // The same unit for every peer, loaded (and prescaled) once, unless each has a block.
    uint64_t same = 0;
    if constexpr (kFlaggedWire<D>) {
      if (a.wire) same = load_wire_unit<D>(a, u);
    }
    if (!per_peer && !a.wire) same = load_unit<D>(a, a.send, 0, u);
    for (int p = 0; p < a.ranks; ++p) {
      if (flagged_sends(a, a.me, p)) {
        const uint64_t bits = per_peer ? load_unit<D>(a, a.send, flagged_block(a, p, kBytes), u) : same;
        store_line(a.out[p] + parity + 2 + 2 * u, bits, seq);
      }
    }
  }
}

// Thread `thread` of `nthreads`: every peer's header checked, then this thread's units
// reduced in rank order into recv, or copied into their places. Returns early once any
// wait gave up.
template <DType D, ReduceOp O>
KOLO_HD_INLINE void flagged_read(const FlaggedArgs& a, uint32_t seq, size_t thread, size_t nthreads) {
  using Tr = DTypeTraits<D>;
  using S = typename Tr::Storage;
  using C = typename Tr::Compute;
  constexpr size_t kPer = kFlaggedUnitBytes / sizeof(S);
  constexpr size_t kBytes = sizeof(S);
  const size_t parity = (seq & 1u) * a.parity_words;
  const uint64_t start = clock_ns();
  const size_t units = a.kind == FlaggedKind::kAllgatherv ? flagged_most_units(a) : flagged_call_units<D>(a);
  if (thread >= units) return;
  {
    const uint64_t* lines[kMaxIpcRanks];
    uint64_t tags[kMaxIpcRanks] = {};
    peer_lines(a, parity, 0, lines);
    if (!wait_lines(a, lines, seq, start, tags, &a.tag)) return;
  }
  // Rank r's unit u: this rank's own block, or the words in r's box.
  const size_t mine = flagged_block(a, a.me, kBytes);
  auto unit_of = [&](int r, size_t u, uint64_t* bits) {
    if (r != a.me) return wait_line(a, a.in[r] + parity + 2 + 2 * u, seq, r, start, bits);
    *bits = load_unit<D>(a, a.send, mine, u);
    return true;
  };
  if (a.kind == FlaggedKind::kAllgatherv) {
    // Rank r's bytes, of their own length, at their own place.
    for (size_t u = thread; u < units; u += nthreads) {
      for (int r = 0; r < a.ranks; ++r) {
        if (u >= flagged_units(a.vbytes[r], 1)) continue;
        if (r == a.me && static_cast<const char*>(a.send) == static_cast<const char*>(a.recv) + a.vdispl[r]) continue;
        uint64_t bits;
        if (!unit_of(r, u, &bits)) return;
        store_unit<D>(a, a.vdispl[r], u, bits, a.vbytes[r]);
      }
    }
    return;
  }
  if (!flagged_reduces(a)) {
    // broadcast: the root's input; allgather, alltoall: block r of the result from rank r.
    for (size_t u = thread; u < units; u += nthreads) {
      const uint64_t* lines[kMaxIpcRanks];
      uint64_t bits[kMaxIpcRanks] = {};
      peer_lines(a, parity, 2 + 2 * u, lines);
      KOLO_UNROLL
      for (int r = 0; r < kMaxIpcRanks; ++r) {
        if (lines[r] != nullptr && !flagged_sends(a, r, a.me)) lines[r] = nullptr;
      }
      if (!wait_lines(a, lines, seq, start, bits)) return;
      KOLO_ROLLED
      for (int r = 0; r < kMaxIpcRanks; ++r) {
        if (r >= a.ranks) break;
        const bool own = r == a.me && (a.kind != FlaggedKind::kBroadcast || a.me == a.root);
        if (!own && lines[r] == nullptr) continue;
        const size_t to = a.kind == FlaggedKind::kBroadcast ? 0 : static_cast<size_t>(r) * a.count * kBytes;
        if (own && static_cast<const char*>(a.send) + mine == static_cast<const char*>(a.recv) + to) continue;
        store_unit<D>(a, to, u, own ? load_unit<D>(a, a.send, mine, u) : bits[r], a.count);
      }
    }
    return;
  }
  if (a.kind == FlaggedKind::kReduce && a.me != a.root) return;  // sent; nothing to receive
  if constexpr (kFlaggedBlockedWire<D>) {
    if (a.wire) {
      // A thread per line of codes: every rank's codes of it, with that rank's scale of the
      // block, decoded and added in rank order, postscaled, stored as FLOAT32: the slot
      // one-shot's decompress_sum, bit for bit. This rank's own come from its own box, once
      // all 17 lines of the block are there: every value of the block was read by then.
      using W = WireTraits<D>;
      float* dst = static_cast<float*>(a.recv);
      const size_t lines = flagged_fp8_lines(a.count);
      for (size_t i = thread; i < lines; i += nthreads) {
        const size_t b = i / kFlaggedFp8Lines, k = i % kFlaggedFp8Lines;
        const size_t first = b * kFlaggedFp8Block + k * kFlaggedUnitBytes;
        if (first >= a.count) continue;
        uint64_t own_codes = 0, own_scale = 0;
        for (size_t j = 0; j < kFlaggedFp8BlockUnits; ++j) {
          uint64_t bits;
          if (!wait_line(a, a.in[a.me] + parity + flagged_fp8_word(b, j), seq, a.me, start, &bits)) return;
          if (j == k) own_codes = bits;
          if (j == kFlaggedFp8Lines) own_scale = bits;
        }
        const uint64_t* lines_of[kMaxIpcRanks];
        uint64_t scales[kMaxIpcRanks] = {}, codes[kMaxIpcRanks] = {};
        peer_lines(a, parity, flagged_fp8_word(b, kFlaggedFp8Lines), lines_of);
        if (!wait_lines(a, lines_of, seq, start, scales)) return;
        peer_lines(a, parity, flagged_fp8_word(b, k), lines_of);
        if (!wait_lines(a, lines_of, seq, start, codes)) return;
        float acc[kFlaggedUnitBytes] = {};
        KOLO_ROLLED
        for (int r = 0; r < kMaxIpcRanks; ++r) {
          if (r >= a.ranks) break;
          FlaggedUnit<typename W::Code> v;
          v.bits = r == a.me ? own_codes : codes[r];
          const float scale = bits_to_float(static_cast<uint32_t>(r == a.me ? own_scale : scales[r]));
          KOLO_UNROLL
          for (size_t e = 0; e < kFlaggedUnitBytes; ++e) {
            const float x = decode_blocked<W>(v.elem[e], scale);
            acc[e] = r == 0 ? x : add_rn(acc[e], x);
          }
        }
        for (size_t e = 0; e < kFlaggedUnitBytes && first + e < a.count; ++e) {
          dst[first + e] = codec_value<CodecOp::kDecompress>(0.0f, acc[e], a.wire_post);
        }
      }
      return;
    }
  }
  if constexpr (kFlaggedWire<D>) {
    if (a.wire) {
      // Every rank's codes (this rank's encoded here, as its peers did), decoded and added
      // in rank order, postscaled, stored as FLOAT32.
      using W = WireTraits<D>;
      float* dst = static_cast<float*>(a.recv);
      for (size_t u = thread; u < units; u += nthreads) {
        const uint64_t* lines[kMaxIpcRanks];
        uint64_t bits[kMaxIpcRanks] = {};
        peer_lines(a, parity, 2 + 2 * u, lines);
        if (!wait_lines(a, lines, seq, start, bits)) return;
        const uint64_t own = load_wire_unit<D>(a, u);
        float acc[kPer] = {};
        KOLO_ROLLED
        for (int r = 0; r < kMaxIpcRanks; ++r) {
          if (r >= a.ranks) break;
          FlaggedUnit<typename W::Code> v;
          v.bits = r == a.me ? own : bits[r];
          KOLO_UNROLL
          for (size_t e = 0; e < kPer; ++e) acc[e] = r == 0 ? W::decode(v.elem[e]) : add_rn(acc[e], W::decode(v.elem[e]));
        }
        for (size_t e = 0; e < kPer && u * kPer + e < a.count; ++e) {
          dst[u * kPer + e] = codec_value<CodecOp::kDecompress>(0.0f, acc[e], a.wire_post);
        }
      }
      return;
    }
  }
  const typename OpFn<O, C>::type op;
  const BodyScaler<C> post(a.post);
  for (size_t u = thread; u < units; u += nthreads) {
    const uint64_t* lines[kMaxIpcRanks];
    uint64_t bits[kMaxIpcRanks] = {};
    peer_lines(a, parity, 2 + 2 * u, lines);
    if (!wait_lines(a, lines, seq, start, bits)) return;
    const uint64_t own = load_unit<D>(a, a.send, mine, u);
    C acc[kPer] = {};
    KOLO_ROLLED
    for (int r = 0; r < kMaxIpcRanks; ++r) {
      if (r >= a.ranks) break;
      FlaggedUnit<S> v;
      v.bits = r == a.me ? own : bits[r];
      KOLO_UNROLL
      for (size_t e = 0; e < kPer; ++e) acc[e] = r == 0 ? Tr::load(v.elem[e]) : op(acc[e], Tr::load(v.elem[e]));
    }
    FlaggedUnit<S> out;
    KOLO_UNROLL
    for (size_t e = 0; e < kPer; ++e) out.elem[e] = Tr::store(post(acc[e]));
    store_unit<D>(a, 0, u, out.bits, a.count);
  }
}

}  // namespace kolo
