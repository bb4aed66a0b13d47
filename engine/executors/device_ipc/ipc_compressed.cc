// device_ipc: allreduce with a wire type, through the slots (ipc_programs.h).
#include "engine/executors/device_ipc/ipc_programs.h"

#include <algorithm>

#include "kernels/device_kernels.h"
#include "support/device/device.h"

namespace kolo {

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
Status enqueue_compressed(const IpcRun& run, const CollCall& call, Algorithm algorithm, uint64_t& chunks) {
  const CollSpec& s = call.spec;
  const device::DeviceOps& dev = device::runtime();
  const int n = run.regions.size(), me = run.regions.index();
  const WireFormat fmt = wire_format(s.wire);
  const bool two_shot = algorithm == Algorithm::kTwoShot;
  const float* send = static_cast<const float*>(call.send);
  float* recv = static_cast<float*>(call.recv);
  constexpr size_t kAlign = 16;  // values: shares start 64-byte aligned in fp32, 16 in codes
  const size_t per_chunk = kIpcChunkBytes / sizeof(float);
  for (size_t first = 0; first < s.count; first += per_chunk) {
    const size_t c = std::min(per_chunk, s.count - first);
    const int slot = static_cast<int>(chunks++ & 1);
    auto in = [&](int r) { return run.regions.region(r) + kIpcHeaderBytes + slot * 2 * kIpcChunkBytes; };
    auto out = [&](int r) { return in(r) + kIpcChunkBytes; };
    if (!two_shot) {
      KOLO_TRY(device_compress(dev, in(me), send + first, c, fmt, call.prescale, call.stream));
      KOLO_TRY(run.barrier(call.stream));
      const void* ins[kMaxIpcRanks];
      for (int r = 0; r < n; ++r) ins[r] = in(r);
      KOLO_TRY(device_decompress_sum(dev, recv + first, ins, n, c, fmt, call.postscale, call.stream));
      continue;
    }
    const size_t share = (c + n - 1) / n;
    const size_t per = (share + kAlign - 1) / kAlign * kAlign;
    const size_t stride = (wire_bytes(fmt, per) + kAlign - 1) / kAlign * kAlign;
    if (static_cast<size_t>(n) * stride > kIpcChunkBytes) {
      return error(Code::kInternal, "rank ", run.rank, ": compressed shares of ", c, " values overflow a slot");
    }
    auto lo = [&](int p) { return std::min(c, static_cast<size_t>(p) * per); };
    auto hi = [&](int p) { return std::min(c, static_cast<size_t>(p + 1) * per); };
    for (int p = 0; p < n; ++p) {
      KOLO_TRY(device_compress(dev, in(me) + p * stride, send + first + lo(p), hi(p) - lo(p), fmt, call.prescale,
                               call.stream));
    }
    KOLO_TRY(run.barrier(call.stream));
    const void* mine[kMaxIpcRanks];
    for (int r = 0; r < n; ++r) mine[r] = in(r) + me * stride;
    KOLO_TRY(device_recompress_sum(dev, out(me), mine, n, hi(me) - lo(me), fmt, call.postscale, call.stream));
    KOLO_TRY(run.barrier(call.stream));
    for (int p = 0; p < n; ++p) {
      const void* result[1] = {out(p)};
      KOLO_TRY(device_decompress_sum(dev, recv + first + lo(p), result, 1, hi(p) - lo(p), fmt, Scale{}, call.stream));
    }
  }
  return Status();
}

}  // namespace kolo
