// The one-kernel allreduce of the device_ipc executor (Protocol::kFlagged), written once
// for both devices: cuda/flagged_kernels.cu wraps it in a __global__ function,
// device_kernels.cc runs it on the emulated device's stream worker.
//
// A small allreduce as separate kernels costs a copy into the slot, a barrier kernel and
// a reduce kernel: three launches and two waits for the peers. Here each rank's kernel
// reads its input from the user's buffer and writes it straight into a box of its own in
// every peer's IPC region, each 4 bytes of data beside a 4-byte flag in one 8-byte word
// (NCCL's LL protocol does the same): a reader that sees the flag sees the data, with no
// fence and no barrier. Then it polls its own region's boxes until every peer's words
// carry this call's flag, reduces in rank order, and writes the result. One launch, no
// wait but for the data itself.
//
// The flag is the call's number: every rank counts its flagged calls in its own device
// memory (`sequence`, advanced by the kernel, so a CUDA graph replays with new numbers),
// and every rank makes the same calls, so the numbers agree. Call v uses the boxes of
// parity v % 2: a rank writes parity v % 2 again at call v + 2, which it starts only after
// every peer has written its data of call v + 1, which each did after it had finished
// reading call v. A box starts with a header line holding the call's digest (the tag),
// which a reader compares first: ranks making different calls fail with a mismatch on
// every rank instead of reading each other's data wrongly.
//
// The reduction is the slot path's, bit for bit: each contribution prescaled and rounded
// to the storage type, combined in the compute type in rank order, postscaled, rounded
// once (reduce_body.h's reduce_element). Every wait ends at the deadline or on abort,
// leaving the reason in the barrier's status words (barrier_body.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/barrier_body.h"
#include "kernels/reduce_body.h"

namespace kolo {

// The largest allreduce this protocol runs, in bytes of data. A box holds it as words of
// 4 data bytes and a flag: twice that, and one 16-byte header line.
constexpr size_t kFlaggedMaxBytes = size_t{64} << 10;
constexpr size_t kFlaggedBoxBytes = 2 * kFlaggedMaxBytes + 16;
constexpr size_t kFlaggedUnitBytes = 8;  // data bytes per 16-byte line

struct FlaggedArgs {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  bool prescaled = false;  // contributions scaled by `pre` (and rounded) before they go out
  bool aligned = false;    // send and recv 8-byte aligned: whole units in one load or store
  ReduceScaleArgs pre, post;
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

// 8 data bytes as elements of the storage type.
template <class S>
union FlaggedUnit {
  uint64_t bits;
  S elem[kFlaggedUnitBytes / sizeof(S)];
};

// This rank's contribution to unit u: its input's elements there, prescaled and rounded
// where the call says so; zeros past the end.
template <DType D>
KOLO_HD_INLINE uint64_t own_unit(const FlaggedArgs& a, size_t u) {
  using Tr = DTypeTraits<D>;
  using S = typename Tr::Storage;
  constexpr size_t kPer = kFlaggedUnitBytes / sizeof(S);
  const S* send = static_cast<const S*>(a.send);
  FlaggedUnit<S> v;
  v.bits = 0;
  const size_t first = u * kPer;
  if (a.aligned && first + kPer <= a.count) {
    v.bits = *reinterpret_cast<const uint64_t*>(send + first);
  } else {
    for (size_t e = 0; e < kPer && first + e < a.count; ++e) v.elem[e] = send[first + e];
  }
  if (a.prescaled) {
    const BodyScaler<typename Tr::Compute> sc(a.pre);
    KOLO_UNROLL
    for (size_t e = 0; e < kPer; ++e) v.elem[e] = Tr::store(sc(Tr::load(v.elem[e])));
  }
  return v.bits;
}

// Thread `thread` of `nthreads`: the header, then this thread's units, into every peer's
// box of this call's parity.
template <DType D, ReduceOp O>
KOLO_HD_INLINE void flagged_write(const FlaggedArgs& a, uint32_t seq, size_t thread, size_t nthreads) {
  const size_t parity = (seq & 1u) * a.parity_words;
  if (thread == 0) {
    for (int p = 0; p < a.ranks; ++p) {
      if (p != a.me) store_line(a.out[p] + parity, a.tag, seq);
    }
  }
  const size_t units = flagged_units(a.count, sizeof(typename DTypeTraits<D>::Storage));
  for (size_t u = thread; u < units; u += nthreads) {
    const uint64_t bits = own_unit<D>(a, u);
    for (int p = 0; p < a.ranks; ++p) {
      if (p != a.me) store_line(a.out[p] + parity + 2 + 2 * u, bits, seq);
    }
  }
}

// Thread `thread` of `nthreads`: every peer's header checked, then this thread's units
// reduced in rank order into recv. Returns early once any wait gave up.
template <DType D, ReduceOp O>
KOLO_HD_INLINE void flagged_read(const FlaggedArgs& a, uint32_t seq, size_t thread, size_t nthreads) {
  using Tr = DTypeTraits<D>;
  using S = typename Tr::Storage;
  using C = typename Tr::Compute;
  constexpr size_t kPer = kFlaggedUnitBytes / sizeof(S);
  const size_t parity = (seq & 1u) * a.parity_words;
  const uint64_t start = clock_ns();
  const size_t units = flagged_units(a.count, sizeof(typename DTypeTraits<D>::Storage));
  if (thread >= units) return;
  for (int p = 0; p < a.ranks; ++p) {
    uint64_t tag = 0;
    if (p == a.me) continue;
    if (!wait_line(a, a.in[p] + parity, seq, p, start, &tag)) return;
    if (tag != a.tag) {
      set_barrier_status(a.failed, a.status, kBarrierMismatch + static_cast<uint32_t>(p));
      return;
    }
  }
  const typename OpFn<O, C>::type op;
  const BodyScaler<C> post(a.post);
  S* recv = static_cast<S*>(a.recv);
  // Rank r's contribution to unit u: this rank's own, or the words in r's box.
  auto contribution = [&](int r, size_t u, FlaggedUnit<S>* v) {
    if (r != a.me) return wait_line(a, a.in[r] + parity + 2 + 2 * u, seq, r, start, &v->bits);
    v->bits = own_unit<D>(a, u);
    return true;
  };
  for (size_t u = thread; u < units; u += nthreads) {
    FlaggedUnit<S> v;
    if (!contribution(0, u, &v)) return;
    C acc[kPer];
    KOLO_UNROLL
    for (size_t e = 0; e < kPer; ++e) acc[e] = Tr::load(v.elem[e]);
    for (int r = 1; r < a.ranks; ++r) {
      if (!contribution(r, u, &v)) return;
      KOLO_UNROLL
      for (size_t e = 0; e < kPer; ++e) acc[e] = op(acc[e], Tr::load(v.elem[e]));
    }
    FlaggedUnit<S> out;
    KOLO_UNROLL
    for (size_t e = 0; e < kPer; ++e) out.elem[e] = Tr::store(post(acc[e]));
    const size_t first = u * kPer;
    if (a.aligned && first + kPer <= a.count) {
      *reinterpret_cast<uint64_t*>(recv + first) = out.bits;
    } else {
      for (size_t e = 0; e < kPer && first + e < a.count; ++e) recv[first + e] = out.elem[e];
    }
  }
}

}  // namespace kolo
