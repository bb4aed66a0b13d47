// device_ipc: the one-kernel collectives (kernels/flagged_body.h, ipc_programs.h).
#include "engine/executors/device_ipc/ipc_programs.h"

#include "kernels/device_kernels.h"
#include "support/device/device.h"
#include "support/env.h"

namespace kolo {

// A small collective in one kernel (kernels/flagged_body.h): this rank's input into its
// box in every receiving peer's region, the senders' boxes in its own reduced or copied
// as their flags arrive.
Status enqueue_flagged(const IpcRun& run, const CollCall& call) {
  const CollSpec& s = call.spec;
  const int n = run.regions.size(), me = run.regions.index();
  FlaggedArgs a;
  switch (s.kind) {
    case CollKind::kAllreduce: a.kind = FlaggedKind::kAllreduce; break;
    case CollKind::kReduce: a.kind = FlaggedKind::kReduce; break;
    case CollKind::kBroadcast: a.kind = FlaggedKind::kBroadcast; break;
    case CollKind::kAllgather: a.kind = FlaggedKind::kAllgather; break;
    case CollKind::kReduceScatter: a.kind = FlaggedKind::kReduceScatter; break;
    case CollKind::kAlltoall: a.kind = FlaggedKind::kAlltoall; break;
    case CollKind::kAllgatherv:
      a.kind = FlaggedKind::kAllgatherv;
      for (int r = 0; r < n; ++r) {  // as bytes: the kernel copies bytes
        a.vbytes[r] = static_cast<uint32_t>(s.counts[r] * dtype_size(s.dtype));
        a.vdispl[r] = s.displs[r] * dtype_size(s.dtype);
      }
      break;
    default:
      return error(Code::kInternal, "rank ", run.rank, ": ", coll_name(s.kind), " has no one-kernel form");
  }
  a.root = s.root;
  a.send = call.send;
  a.recv = call.recv;
  a.count = s.count;
  a.dtype = s.dtype;
  a.op = s.op;
  if (s.compressed()) {  // FLOAT32 data, the wire type's codes in the boxes
    a.wire = true;
    a.dtype = s.wire;
    a.op = ReduceOp::kSum;  // AVG came lowered: a sum and a postscale divisor
  }
  for (int p = 0; p < n; ++p) {
    a.out[p] = reinterpret_cast<uint64_t*>(run.regions.region(p) + kIpcFlaggedOffset + me * kFlaggedBoxBytes);
    a.in[p] = reinterpret_cast<const uint64_t*>(run.regions.region(me) + kIpcFlaggedOffset + p * kFlaggedBoxBytes);
  }
  a.parity_words = kIpcFlaggedParityBytes / sizeof(uint64_t);
  a.ranks = n;
  a.me = me;
  a.sequence = reinterpret_cast<uint32_t*>(run.regions.region(me) + kIpcSequenceOffset);
  a.done = reinterpret_cast<uint32_t*>(run.regions.region(me) + kIpcDoneOffset);
  a.tag = run.tag;
  a.timeout_ns = static_cast<uint64_t>(env_timeout_seconds() * 1e9);
  a.abort = run.abort;
  a.status = run.status;
  a.failed = run.failed;
  return device_flagged(device::runtime(), a, s.prescaled ? call.prescale : Scale{}, call.postscale, call.stream);
}

}  // namespace kolo
