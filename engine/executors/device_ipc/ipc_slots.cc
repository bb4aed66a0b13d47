// ipc_programs.h: the slot programs (device_slot_programs.h, which the verifier proves
// through a recording) over kernels on the call's stream; a rank alone in one pass; the
// digest every barrier carries.
#include "engine/executors/device_ipc/device_slot_programs.h"
#include "engine/executors/device_ipc/ipc_programs.h"
#include "engine/local/local_ops.h"
#include "kernels/device_kernels.h"

namespace kolo {
namespace {

static_assert(kMaxIpcRanks <= kMaxWireInputs, "a compressed reduce sums every rank's wire");
static_assert(kMaxIpcRanks <= kDeviceSlotRanks, "the slot programs take every rank of a host");


// Every rank has two slots (chunk k uses slot k % 2) after its region's header.
class KernelOps : public IpcKernelOps {
 public:
  using IpcKernelOps::IpcKernelOps;
  size_t slot_bytes() const { return 2 * kIpcChunkBytes; }
};

// FNV-1a over what every rank making the same call has alike (not its pointers, scales or
// in-place choice, which may differ), and the zero-copy windows and offsets, which must not.
class Digest {
 public:
  template <class T>
  Digest& add(const T& v) {
    const auto* p = reinterpret_cast<const unsigned char*>(&v);
    for (size_t i = 0; i < sizeof v; ++i) h_ = (h_ ^ p[i]) * 0x100000001b3ull;
    return *this;
  }
  uint64_t value() const { return h_ | 1; }  // never 0, the words' initial value

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

}  // namespace

Status enqueue_slots(const IpcRun& run, const CollCall& call, Algorithm algorithm, uint64_t& chunks) {
  KernelOps ops(run, call);
  return DeviceSlotPrograms<KernelOps>(ops, chunks).run(call, algorithm);
}

// One rank: its result is its input, postscaled where a reduction says so, in one pass
// over the data (the slot programs would copy it into the slot that no peer reads, then
// out). The same bits: the reduction of one input with the same postscale.
Status enqueue_alone(const CollCall& call) {
  const CollSpec& s = call.spec;
  const size_t es = dtype_size(s.dtype);
  switch (s.kind) {
    case CollKind::kAllreduce:
    case CollKind::kReduce:
    case CollKind::kReduceScatter: {
      const void* one[1] = {call.send};
      return device_reduce_into(call.recv, one, 1, s.count, s.dtype, s.op, call.postscale, call.stream);
    }
    case CollKind::kAllgatherv:
      return ipc_copy(static_cast<char*>(call.recv) + s.displs[0] * es, call.send, s.counts[0] * es, call.stream);
    default: return ipc_copy(call.recv, call.send, s.count * es, call.stream);  // broadcast, allgather, alltoall
  }
}

uint64_t ipc_call_tag(const CollCall& call, const Plan& plan, const RegisteredBuffers& zc, bool graph) {
  const CollSpec& s = call.spec;
  Digest d;
  d.add(graph);  // a replay met by an uncaptured call of the same shape is not the same call
  d.add(s.kind).add(s.dtype).add(s.op).add(s.root).add(s.wire).add(plan.algorithm).add(plan.protocol);
  if (s.kind != CollKind::kAllgatherv) d.add(s.count);  // there: this rank's count (in counts)
  for (size_t c : s.counts) d.add(c);
  for (size_t c : s.displs) d.add(c);
  // Shared buffers (no window) were agreed on by every rank in share_buffers.
  if (plan.zero_copy()) d.add(zc.send.window).add(zc.send.offset).add(zc.recv.window).add(zc.recv.offset);
  return d.value();
}

}  // namespace kolo
