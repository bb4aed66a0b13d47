// The device_ipc compressed allreduce, written once over an ops policy like the slot
// programs (device_slot_programs.h): ipc_compressed.cc runs it over ops that enqueue
// kernels, device_program_record.cc records it for the verifier.
//
// Allreduce of FLOAT32 with contributions compressed on the way (CollSpec::wire): each
// rank encodes its input once into its slot (prescale fused), and the readers decode
// and add the ranks' contributions in fp32, in rank order, so every rank gets the same
// bits (kernels/compress.h: decompress_sum, recompress_sum).
//   one-shot  every rank reads every slot: recv = postscale * sum decode(in(r)); one
//             rounding per contribution.
//   two-shot  the chunk is cut into n shares, each encoded as a wire buffer of its own;
//             rank p sums share p of every slot and encodes the result (postscale fused)
//             into its `out`; every rank, p too, decodes every share from the `out`s:
//             one rounding per contribution plus one of the result.
// Chunk k uses slot k % 2 (the executor's count of slot chunks, shared with the slot
// programs); a slot is written again two chunks later, behind the next chunk's barrier.
//
// Ops: size(), index(), rank() (for messages), slot(index, chunk) (its `in` half, the `out`
// half half_bytes() after), chunk_values() (FLOAT32 values per chunk), wire_bytes(count)
// (of `count` values encoded), compress(dst, src, count, ScaleUse), decompress_sum(dst,
// srcs, n, count, ScaleUse), recompress_sum(dst, srcs, n, count, ScaleUse), barrier().
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "engine/collective.h"
#include "engine/schedules/schedule.h"
#include "kernels/barrier_body.h"
#include "support/status.h"

namespace kolo {

template <class Ops>
class CompressedProgram {
 public:
  // chunks: the slot chunks run before (slot = chunk % 2), advanced.
  CompressedProgram(Ops& ops, uint64_t& chunks) : ops_(ops), chunks_(chunks) {}

  // algorithm: kTwoShot, else one-shot.
  Status run(const CollCall& call, Algorithm algorithm) {
    const CollSpec& s = call.spec;
    const int n = ops_.size(), me = ops_.index();
    if (n > kMaxIpcRanks) return error(Code::kInternal, "compressed programs run on at most ", kMaxIpcRanks, " ranks");
    const bool two_shot = algorithm == Algorithm::kTwoShot;
    const float* send = static_cast<const float*>(call.send);
    float* recv = static_cast<float*>(call.recv);
    constexpr size_t kAlign = 16;  // values: shares start 64-byte aligned in fp32, 16 in codes
    const size_t per_chunk = ops_.chunk_values(), half = ops_.half_bytes();
    for (size_t first = 0; first < s.count; first += per_chunk) {
      const size_t c = std::min(per_chunk, s.count - first);
      const uint64_t chunk = chunks_++;
      auto in = [&](int r) { return ops_.slot(r, chunk); };
      auto out = [&](int r) { return in(r) + half; };
      if (!two_shot) {
        KOLO_TRY(ops_.compress(in(me), send + first, c, ScaleUse::kPre));
        KOLO_TRY(ops_.barrier());
        const void* ins[kMaxIpcRanks];
        for (int r = 0; r < n; ++r) ins[r] = in(r);
        KOLO_TRY(ops_.decompress_sum(recv + first, ins, n, c, ScaleUse::kPost));
        continue;
      }
      const size_t share = (c + n - 1) / n;
      const size_t per = (share + kAlign - 1) / kAlign * kAlign;
      const size_t stride = (ops_.wire_bytes(per) + kAlign - 1) / kAlign * kAlign;
      if (static_cast<size_t>(n) * stride > half) {
        return error(Code::kInternal, "rank ", ops_.rank(), ": compressed shares of ", c, " values overflow a slot");
      }
      auto lo = [&](int p) { return std::min(c, static_cast<size_t>(p) * per); };
      auto hi = [&](int p) { return std::min(c, static_cast<size_t>(p + 1) * per); };
      for (int p = 0; p < n; ++p) {
        KOLO_TRY(ops_.compress(in(me) + p * stride, send + first + lo(p), hi(p) - lo(p), ScaleUse::kPre));
      }
      KOLO_TRY(ops_.barrier());
      const void* mine[kMaxIpcRanks];
      for (int r = 0; r < n; ++r) mine[r] = in(r) + me * stride;
      KOLO_TRY(ops_.recompress_sum(out(me), mine, n, hi(me) - lo(me), ScaleUse::kPost));
      KOLO_TRY(ops_.barrier());
      for (int p = 0; p < n; ++p) {
        const void* result[1] = {out(p)};
        KOLO_TRY(ops_.decompress_sum(recv + first + lo(p), result, 1, hi(p) - lo(p), ScaleUse::kNone));
      }
    }
    return Status();
  }

 private:
  Ops& ops_;
  uint64_t& chunks_;
};

}  // namespace kolo
