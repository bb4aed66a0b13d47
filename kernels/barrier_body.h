// The step barrier of the one-host device collectives, written once for both devices:
// cuda/barrier_kernels.cu wraps it in a __global__ function, device_kernels.cc runs it on
// the emulated device's stream worker. Ranks of one host map each other's IPC regions
// (transport/ipc/ipc_regions.h); every rank has a word per peer in its own region, which only that
// peer writes. A barrier is a number, the same on every rank and increasing: a rank posts
// it into its word in every region (a system-scope release, so what it wrote before is
// visible to whoever sees the number), then waits until every peer's word in its own
// region has reached it (acquire). The spin ends at a deadline or on kolo_comm_abort,
// leaving the reason in a status word the host reads: a dead peer releases the stream
// with an error instead of holding the GPU forever.
// With its number a rank posts the call's tag (a digest of what it is running); a waiter
// compares every peer's tag with its own, so ranks that are not making the same call (a
// different collective, count, type or root, or registered buffers on one rank only) get
// an error on every rank instead of reading each other's memory wrongly.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/float_types.h"  // KOLO_HD_INLINE
#if !defined(__CUDA_ARCH__)
#include <sched.h>
#include <time.h>
#endif

namespace kolo {

constexpr int kMaxIpcRanks = 8;

// What one rank posts into another's region. The tag of barrier v sits in tag[v % 2]: a
// peer may post barrier v + 1 before this rank has read v's tag, never v + 2.
struct BarrierWord {
  uint64_t number;
  uint64_t tag[2];
};

struct BarrierArgs {
  BarrierWord* post[kMaxIpcRanks] = {};        // this rank's word in each rank's region
  const BarrierWord* wait[kMaxIpcRanks] = {};  // each rank's word in this rank's region
  int ranks = 0;
  uint64_t value = 0;       // this barrier's number, or (counter set) taken from the counter:
  uint64_t* counter = nullptr;  // this rank's own device memory: the last number it used,
                                // advanced by the kernel, so that a CUDA graph replays with
                                // new numbers (a number fixed at capture would pass at once)
  uint64_t tag = 0;         // the call's digest, the same on every rank making the same call
  uint64_t timeout_ns = 0;  // KOLO_TIMEOUT
  // Host memory the kernel can address (pinned, mapped):
  const volatile uint32_t* abort = nullptr;  // nonzero: kolo_comm_abort was called
  volatile uint32_t* status = nullptr;       // 0: fine; else why a barrier gave up (below)
  // Device memory: the status again, for this rank's kernels queued after the barrier
  // (ScopedKernelGuard) and its later barriers. They read it, not `status`: a read of host
  // memory from a GPU crosses PCIe, and one per block cost ~1 us each on an H100
  // (bench/results/2026-11-26-gpu-check-5cebbe5.md).
  volatile uint32_t* failed = nullptr;
};

// Status words: kBarrierAborted, kBarrierTimedOut + the rank waited for, or
// kBarrierMismatch + the first rank whose tag differs. Once set, later barriers return at
// once (the collective has failed; the host reports it).
constexpr uint32_t kBarrierAborted = 1;
constexpr uint32_t kBarrierTimedOut = 16;
constexpr uint32_t kBarrierMismatch = 32;

KOLO_HD_INLINE void flag_store_release(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

KOLO_HD_INLINE uint64_t flag_load_acquire(const uint64_t* p) {
#if defined(__CUDA_ARCH__)
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

// The abort word, written by a host thread (kolo_comm_abort) while the barrier spins: a
// volatile read on the device, an atomic one on the host (a plain read is a data race
// there, which ThreadSanitizer reports).
KOLO_HD_INLINE bool abort_requested(const volatile uint32_t* p) {
#if defined(__CUDA_ARCH__)
  return *p != 0;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE) != 0;
#endif
}

KOLO_HD_INLINE uint64_t clock_ns() {
#if defined(__CUDA_ARCH__)
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
#endif
}

// Between polls: a GPU thread sleeps briefly; a host thread (the emulated device, where
// ranks may outnumber cores) yields, then sleeps, so the peer it waits for gets to run.
KOLO_HD_INLINE void barrier_backoff(unsigned spins) {
#if defined(__CUDA_ARCH__)
  __nanosleep(spins < 64 ? 32 : 256);
#else
  if (spins < 64) return;
  if (spins < 1024) {
    sched_yield();
    return;
  }
  timespec ts{0, 20000};
  nanosleep(&ts, nullptr);
#endif
}

// Whether a barrier gave up earlier: the device copy of the status word.
KOLO_HD_INLINE uint32_t barrier_status(const volatile uint32_t* failed) {
#if defined(__CUDA_ARCH__)
  return *failed;
#else
  return __atomic_load_n(const_cast<uint32_t*>(failed), __ATOMIC_ACQUIRE);
#endif
}
KOLO_HD_INLINE uint32_t barrier_status(const BarrierArgs& a) { return barrier_status(a.failed); }

// The status word is host memory the host reads with atomics; a GPU writes it through
// the mapping (volatile, then a system fence so the host sees it before later work). The
// device copy is ordered before the kernels after this one by the stream.
KOLO_HD_INLINE void set_barrier_status(volatile uint32_t* failed, volatile uint32_t* status, uint32_t value) {
#if defined(__CUDA_ARCH__)
  *failed = value;
  *status = value;
  __threadfence_system();
#else
  __atomic_store_n(const_cast<uint32_t*>(failed), value, __ATOMIC_RELEASE);
  __atomic_store_n(const_cast<uint32_t*>(status), value, __ATOMIC_RELEASE);
#endif
}
KOLO_HD_INLINE void set_barrier_status(const BarrierArgs& a, uint32_t value) { set_barrier_status(a.failed, a.status, value); }

// Thread 0 of a one-block grid does it all: the barrier is a handful of words.
KOLO_HD_INLINE void barrier_thread(const BarrierArgs& a, size_t thread) {
  if (thread != 0 || barrier_status(a) != 0) return;
  uint64_t value = a.value;
  if (a.counter != nullptr) *a.counter = value = *a.counter + 1;  // only this rank's stream touches it
  const int parity = static_cast<int>(value & 1);
  for (int p = 0; p < a.ranks; ++p) {
    a.post[p]->tag[parity] = a.tag;  // ordered before the number by its release
    flag_store_release(&a.post[p]->number, value);
  }
  const uint64_t start = clock_ns();
  unsigned spins = 0;
  for (int p = 0; p < a.ranks; ++p) {
    while (flag_load_acquire(&a.wait[p]->number) < value) {
      // The abort word is host memory (a PCIe read from a GPU) and the clock a special
      // register: looked at every 64 polls, not every one.
      if ((++spins & 63) == 0) {
        if (abort_requested(a.abort)) {
          set_barrier_status(a, kBarrierAborted);
          return;
        }
        if (clock_ns() - start > a.timeout_ns) {
          set_barrier_status(a, kBarrierTimedOut + static_cast<uint32_t>(p));
          return;
        }
      }
      barrier_backoff(spins);
    }
    if (flag_load_acquire(&a.wait[p]->tag[parity]) != a.tag) {
      set_barrier_status(a, kBarrierMismatch + static_cast<uint32_t>(p));
      return;
    }
  }
}

}  // namespace kolo
