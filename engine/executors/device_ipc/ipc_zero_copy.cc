// device_ipc: registered buffers read in place, and the copy kernel the programs share
// (ipc_programs.h).
#include "engine/executors/device_ipc/ipc_programs.h"

#include <algorithm>

#include "kernels/device_kernels.h"

namespace kolo {

PeerReadBuffers peer_read_buffers(const CollCall& call, int size) {
  const CollSpec& s = call.spec;
  const size_t es = dtype_size(s.dtype), n = static_cast<size_t>(size);
  PeerReadBuffers b;
  auto input = [&](size_t bytes) { b.ptr[0] = call.send, b.bytes[0] = bytes; };
  auto output = [&](size_t bytes) { b.ptr[1] = call.recv, b.bytes[1] = bytes; };
  switch (s.kind) {
    case CollKind::kAllreduce: input(s.bytes()), output(s.bytes()); break;
    case CollKind::kBroadcast: output(s.bytes()); break;
    case CollKind::kAllgather: output(s.bytes() * n); break;
    case CollKind::kAllgatherv: {
      size_t end = 0;
      for (size_t r = 0; r < n && r < s.counts.size() && r < s.displs.size(); ++r) {
        end = std::max(end, (s.displs[r] + s.counts[r]) * es);
      }
      output(end);
      break;
    }
    case CollKind::kReduce: input(s.bytes()); break;
    case CollKind::kReduceScatter: input(s.bytes() * n); break;
    default: break;
  }
  return b;
}

// Which registered windows hold the call's buffers (executor.h): the communicator asks
// before planning (spec.registered), the executor again when it enqueues.
bool find_registered(const CollCall& call, const IpcWindows& windows, int rank, int size, RegisteredBuffers* where) {
  const PeerReadBuffers b = peer_read_buffers(call, size);
  if (b.ptr[0] == nullptr && b.ptr[1] == nullptr) return false;
  return (b.ptr[0] == nullptr || windows.find(b.ptr[0], b.bytes[0], &where->send)) &&
         (b.ptr[1] == nullptr || windows.find(b.ptr[1], b.bytes[1], &where->recv));
}

Status ipc_copy(void* dst, const void* src, size_t bytes, void* stream) {
  if (dst == src || bytes == 0) return Status();
  return device_scale_copy(dst, src, bytes, DType::kUint8, Scale{}, stream);
}

// Buffers read in place (registered on every rank, or shared by ipc_peer_buffers.h): S(r)
// is rank r's input, R(r) its output, as this process addresses them.
//   barrier   every rank's input is ready, and no peer still reads its output;
//   read      the peers' buffers straight into this rank's output (allreduce: reduce
//             this rank's share into its output, barrier, copy every other share from
//             its owner's output; broadcast and allgather(v): the owner's output, where
//             the owner put its part before the first barrier: in-place forms put an
//             allgather's input at another offset on every rank, outputs are symmetric);
//   barrier   no peer reads this rank's buffers any more: the caller may reuse them.
// In place is safe: a rank writes only what no peer reads in the same step (its own
// share, or blocks that peers read before the barrier that precedes the write).
Status enqueue_zero_copy(const IpcRun& run, const CollCall& call, const InPlaceBuffers& at) {
  const CollSpec& s = call.spec;
  const int n = run.regions.size(), me = run.regions.index();
  const size_t es = dtype_size(s.dtype), bytes = s.bytes();
  auto S = [&](int r) { return at.send[r]; };
  auto R = [&](int r) { return at.recv[r]; };
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
