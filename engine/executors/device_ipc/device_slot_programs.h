// The device_ipc executor's slot programs, written once over an ops policy like the host
// ones (local_programs.h): the executor runs them over ops that enqueue kernels
// (engine/executors/device_ipc/ipc_device_executor.cc), local_program.cc records them for the
// verifier, the simulator and kolo-plan. Every rank has two slots (chunk k uses slot
// k % 2), each an `in` half and an `out` half of slot_bytes / 2. Per chunk:
//   1. copy this rank's input piece(s) of the chunk into its own slot's `in` (a
//      reduction's prescale applied on the way);
//   2. barrier: every rank's input is in place;
//   3. read the peers' slots: reduce all `in`s (allreduce one-shot, reduce at the root,
//      reduce_scatter) or copy a peer's `in` (broadcast, allgather(v), alltoall); two-shot
//      allreduce reduces only its share into its `out`, barriers, then copies every rank's
//      share from the peers' `out`s; ring allreduce passes shares around (ring below).
// A slot is written again two chunks later, after the next chunk's barrier, which every
// rank passes only once it has finished this chunk: nobody overwrites memory a peer still
// reads, with one barrier per step. On a device the barrier is one kernel (it posts this
// rank's number and waits for every peer's); recorded, it is a kSignal and a kWait of the
// kBarrier counter, so the verifier proves the slot reuse.
//
// Ops: size(), index(), slot(index, chunk), slot_bytes(), copy(dst, src, bytes),
// scale_copy(dst, src, count, dtype, ScaleUse), reduce(dst, srcs, n, count, dtype, op,
// ScaleUse), barrier().
#pragma once

#include <algorithm>
#include <cstdint>

#include "engine/collective.h"
#include "engine/schedules/schedule.h"
#include "support/status.h"

namespace kolo {

// Ranks a device slot program runs on at most (the device_ipc executor's kMaxIpcRanks).
constexpr int kDeviceSlotRanks = 8;

template <class Ops>
class DeviceSlotPrograms {
 public:
  // next_chunk: the chunks run before (the slot a chunk uses is its number % 2), kept by
  // the caller across calls.
  DeviceSlotPrograms(Ops& ops, uint64_t& next_chunk) : ops_(ops), next_chunk_(next_chunk) {}

  // allreduce (one-shot, two-shot, ring), reduce, broadcast, allgather(v), reduce_scatter,
  // alltoall; the other algorithms are one-shot.
  Status run(const CollCall& call, Algorithm algorithm) {
    const CollSpec& s = call.spec;
    const int n = ops_.size(), me = ops_.index();
    if (n > kDeviceSlotRanks) return error(Code::kInternal, "device slot programs run on at most ", kDeviceSlotRanks, " ranks");
    const size_t es = dtype_size(s.dtype), half = ops_.slot_bytes() / 2;
    // Elements per chunk of a rank's block: a slot's `in` holds every rank's piece for the
    // rank-major collectives, one piece otherwise; a multiple of 16 bytes, so that every
    // rank's piece keeps the kernels' 16-byte vectors.
    const bool rank_major = s.kind == CollKind::kReduceScatter || s.kind == CollKind::kAlltoall;
    const size_t unit = std::max<size_t>(1, 16 / es);
    const size_t per_chunk = std::max(unit, half / es / (rank_major ? n : 1) / unit * unit);
    const char* send = static_cast<const char*>(call.send);
    // Allgatherv: a count per rank; the chunks run over the largest, each rank's piece of a
    // chunk is what its block has left (maybe nothing).
    const bool varying = s.kind == CollKind::kAllgatherv;
    const size_t total = varying ? *std::max_element(s.counts.begin(), s.counts.end()) : s.count;
    auto piece = [&](int r, size_t first) {
      return varying ? std::min(per_chunk, s.counts[r] > first ? s.counts[r] - first : 0) : 0;
    };
    for (size_t first = 0; first < total; first += per_chunk) {
      const size_t c = std::min(per_chunk, total - first);
      const size_t off = first * es, bytes = c * es;
      const uint64_t chunk = next_chunk_++;
      auto in = [&](int r) { return ops_.slot(r, chunk); };
      auto out = [&](int r) { return ops_.slot(r, chunk) + half; };
      const void* ins[kDeviceSlotRanks];
      for (int r = 0; r < n; ++r) ins[r] = in(r);
      // 1. this rank's input into its slot
      auto copy_in = [&](char* dst, const char* src, size_t nbytes) {
        if (!s.prescaled) return copy(dst, src, nbytes);
        return ops_.scale_copy(dst, src, nbytes / es, s.dtype, ScaleUse::kPre);
      };
      switch (s.kind) {
        case CollKind::kBroadcast:
          if (me == s.root) KOLO_TRY(copy(in(me), send + off, bytes));
          break;
        case CollKind::kReduceScatter:
        case CollKind::kAlltoall:
          for (int p = 0; p < n; ++p) KOLO_TRY(copy_in(in(me) + p * bytes, send + p * s.count * es + off, bytes));
          break;
        case CollKind::kAllgatherv: KOLO_TRY(copy(in(me), send + off, piece(me, first) * es)); break;
        default: KOLO_TRY(copy_in(in(me), send + off, bytes));
      }
      KOLO_TRY(ops_.barrier());  // 2.
      KOLO_TRY(read(call, algorithm, first, c, ins, in, out, piece));  // 3.
    }
    return Status();
  }

 private:
  template <class In, class Out, class Piece>
  Status read(const CollCall& call, Algorithm algorithm, size_t first, size_t c, const void* const* ins, In in, Out out,
              Piece piece) {
    const CollSpec& s = call.spec;
    const int n = ops_.size(), me = ops_.index();
    const size_t es = dtype_size(s.dtype), off = first * es, bytes = c * es;
    char* recv = static_cast<char*>(call.recv);
    switch (s.kind) {
      case CollKind::kAllreduce:
        if (algorithm == Algorithm::kRing) return ring_allreduce(call, c, in, out, recv + off);
        if (algorithm == Algorithm::kTwoShot) {
          const size_t lo = c * me / n, hi = c * (me + 1) / n;
          const void* mine[kDeviceSlotRanks];
          for (int r = 0; r < n; ++r) mine[r] = in(r) + lo * es;
          KOLO_TRY(ops_.reduce(out(me) + lo * es, mine, n, hi - lo, s.dtype, s.op, ScaleUse::kPost));
          KOLO_TRY(ops_.barrier());
          for (int p = 0; p < n; ++p) {
            const size_t plo = c * p / n, phi = c * (p + 1) / n;
            KOLO_TRY(copy(recv + off + plo * es, out(p) + plo * es, (phi - plo) * es));
          }
          return Status();
        }
        return ops_.reduce(recv + off, ins, n, c, s.dtype, s.op, ScaleUse::kPost);
      case CollKind::kReduce:
        return me == s.root ? ops_.reduce(recv + off, ins, n, c, s.dtype, s.op, ScaleUse::kPost) : Status();
      case CollKind::kBroadcast: return copy(recv + off, in(s.root), bytes);
      case CollKind::kAllgather:
        for (int p = 0; p < n; ++p) KOLO_TRY(copy(recv + p * s.count * es + off, in(p), bytes));
        return Status();
      case CollKind::kAllgatherv:
        for (int p = 0; p < n; ++p) KOLO_TRY(copy(recv + (s.displs[p] + first) * es, in(p), piece(p, first) * es));
        return Status();
      case CollKind::kReduceScatter: {
        const void* mine[kDeviceSlotRanks];
        for (int r = 0; r < n; ++r) mine[r] = in(r) + me * bytes;
        return ops_.reduce(recv + off, mine, n, c, s.dtype, s.op, ScaleUse::kPost);
      }
      case CollKind::kAlltoall:
        for (int p = 0; p < n; ++p) KOLO_TRY(copy(recv + p * s.count * es + off, in(p) + me * bytes, bytes));
        return Status();
      default:
        return error(Code::kInternal, "rank ", me, ": ", coll_name(s.kind), " has no device slot program");
    }
  }

  // One chunk of a ring allreduce, every rank reading only from the one before it, r - 1,
  // in n shares. Reduce-scatter, steps s = 1 .. n-1: rank r adds its input's share (r - s)
  // to what r - 1 has summed of it (its `out`; at s = 1 its `in`) into its own `out`; after
  // step n-1 rank r holds share r + 1 summed over all ranks. Allgather, steps s = 1 .. n-1:
  // rank r copies share (r - s + 1) from r - 1's `out`, where it is whole by then. A
  // barrier after each step; every share of `out` is written once per phase, and read only
  // by r + 1 in the step after. Then `out` is copied to the result. Each share's sum is
  // computed once and copied: every rank gets the same bits. The last step needs no
  // barrier of its own (the verifier found it redundant): `out` is written again two
  // chunks later, behind the next chunk's barriers, which r + 1 passes only after its last
  // step.
  template <class In, class Out>
  Status ring_allreduce(const CollCall& call, size_t c, In in, Out out, char* result) {
    const CollSpec& s = call.spec;
    const int n = ops_.size(), me = ops_.index();
    const size_t es = dtype_size(s.dtype);
    if (n == 1) {
      const void* one[1] = {in(me)};
      return ops_.reduce(result, one, 1, c, s.dtype, s.op, ScaleUse::kPost);
    }
    auto lo = [&](int k) { return c * static_cast<size_t>(k) / n * es; };
    auto len = [&](int k) { return lo(k + 1) - lo(k); };
    const int prev = (me + n - 1) % n;
    auto mod = [n](int k) { return ((k % n) + n) % n; };
    for (int step = 1; step < n; ++step) {
      const int k = mod(me - step);
      const void* two[2] = {(step == 1 ? in(prev) : out(prev)) + lo(k), in(me) + lo(k)};
      // The last step's sum is the result: the postscale goes there (once per share).
      KOLO_TRY(ops_.reduce(out(me) + lo(k), two, 2, len(k) / es, s.dtype, s.op,
                           step == n - 1 ? ScaleUse::kPost : ScaleUse::kNone));
      KOLO_TRY(ops_.barrier());
    }
    for (int step = 1; step < n; ++step) {
      const int k = mod(me - step + 1);
      KOLO_TRY(copy(out(me) + lo(k), out(prev) + lo(k), len(k)));
      if (step < n - 1) KOLO_TRY(ops_.barrier());
    }
    return copy(result, out(me), c * es);
  }

  Status copy(void* dst, const void* src, size_t bytes) { return program_copy(ops_, dst, src, bytes); }

  Ops& ops_;
  uint64_t& next_chunk_;
};

}  // namespace kolo
