// device_ipc: registered buffers read in place, and the copy kernel the programs share
// (ipc_programs.h).
#include "engine/executors/device_ipc/ipc_programs.h"

#include <algorithm>

#include "kernels/device_kernels.h"

namespace kolo {

// Which registered windows hold the call's buffers (executor.h): the communicator asks
// before planning (spec.registered), the executor again when it enqueues.
bool find_registered(const CollCall& call, const IpcWindows& windows, int rank, int size, RegisteredBuffers* where) {
  const CollSpec& s = call.spec;
  const size_t es = dtype_size(s.dtype);
  switch (s.kind) {
    case CollKind::kAllreduce:
      return windows.find(call.send, s.bytes(), &where->send) && windows.find(call.recv, s.bytes(), &where->recv);
    case CollKind::kBroadcast: return windows.find(call.recv, s.bytes(), &where->recv);
    case CollKind::kAllgather: return windows.find(call.recv, s.bytes() * size, &where->recv);
    case CollKind::kAllgatherv: {
      size_t end = 0;
      for (int r = 0; r < size; ++r) end = std::max(end, (s.displs[r] + s.counts[r]) * es);
      return windows.find(call.recv, end, &where->recv);
    }
    case CollKind::kReduce: return windows.find(call.send, s.bytes(), &where->send);
    case CollKind::kReduceScatter: return windows.find(call.send, s.bytes() * size, &where->send);
    default: return false;
  }
}

Status ipc_copy(void* dst, const void* src, size_t bytes, void* stream) {
  if (dst == src || bytes == 0) return Status();
  return device_scale_copy(dst, src, bytes, DType::kUint8, Scale{}, stream);
}

// Buffers registered on every rank, read in place: S(r) is rank r's input, R(r) its
// output, as this process addresses them.
//   barrier   every rank's input is ready, and no peer still reads its output;
//   read      the peers' buffers straight into this rank's output (allreduce: reduce
//             this rank's share into its output, barrier, copy every other share from
//             its owner's output; broadcast and allgather(v): the owner's output, where
//             the owner put its part before the first barrier: in-place forms put an
//             allgather's input at another offset on every rank, outputs are symmetric);
//   barrier   no peer reads this rank's buffers any more: the caller may reuse them.
// In place is safe: a rank writes only what no peer reads in the same step (its own
// share, or blocks that peers read before the barrier that precedes the write).
Status enqueue_zero_copy(const IpcRun& run, const CollCall& call, const RegisteredBuffers& zc, const IpcWindows& windows) {
  const CollSpec& s = call.spec;
  const int n = run.regions.size(), me = run.regions.index();
  const size_t es = dtype_size(s.dtype), bytes = s.bytes();
  auto S = [&](int r) { return windows.address(zc.send.window, r) + zc.send.offset; };
  auto R = [&](int r) { return windows.address(zc.recv.window, r) + zc.recv.offset; };
  char* recv = static_cast<char*>(call.recv);
  const void* ins[kMaxIpcRanks];
  // The collectives whose peers read this rank's output: its own part goes there first.
  if (s.kind == CollKind::kBroadcast && me == s.root) KOLO_TRY(ipc_copy(recv, call.send, bytes, call.stream));
  if (s.kind == CollKind::kAllgather) KOLO_TRY(ipc_copy(recv + me * bytes, call.send, bytes, call.stream));
  if (s.kind == CollKind::kAllgatherv) {
    KOLO_TRY(ipc_copy(recv + s.displs[me] * es, call.send, s.counts[me] * es, call.stream));
  }
  KOLO_TRY(run.barrier(call.stream));
  switch (s.kind) {
    case CollKind::kAllreduce: {
      auto lo = [&](int p) { return s.count * p / n * es; };
      for (int r = 0; r < n; ++r) ins[r] = S(r) + lo(me);
      KOLO_TRY(device_reduce_into(recv + lo(me), ins, n, (lo(me + 1) - lo(me)) / es, s.dtype, s.op, call.postscale,
                                  call.stream));
      KOLO_TRY(run.barrier(call.stream));
      for (int p = 0; p < n; ++p) {
        if (p != me) KOLO_TRY(ipc_copy(recv + lo(p), R(p) + lo(p), lo(p + 1) - lo(p), call.stream));
      }
      break;
    }
    case CollKind::kReduce:
      for (int r = 0; r < n; ++r) ins[r] = S(r);
      if (me == s.root) KOLO_TRY(device_reduce_into(recv, ins, n, s.count, s.dtype, s.op, call.postscale, call.stream));
      break;
    case CollKind::kBroadcast:
      if (me != s.root) KOLO_TRY(ipc_copy(recv, R(s.root), bytes, call.stream));
      break;
    case CollKind::kAllgather:
      for (int p = 0; p < n; ++p) {
        if (p != me) KOLO_TRY(ipc_copy(recv + p * bytes, R(p) + p * bytes, bytes, call.stream));
      }
      break;
    case CollKind::kAllgatherv:
      for (int p = 0; p < n; ++p) {
        const size_t at = s.displs[p] * es;
        if (p != me) KOLO_TRY(ipc_copy(recv + at, R(p) + at, s.counts[p] * es, call.stream));
      }
      break;
    case CollKind::kReduceScatter:
      for (int r = 0; r < n; ++r) ins[r] = S(r) + me * bytes;
      KOLO_TRY(device_reduce_into(recv, ins, n, s.count, s.dtype, s.op, call.postscale, call.stream));
      break;
    default:
      return error(Code::kInternal, "rank ", run.rank, ": a zero-copy ", coll_name(s.kind), " reached device_ipc");
  }
  return run.barrier(call.stream);
}

}  // namespace kolo
