// device_ipc: the one-kernel collectives (flagged_program.h, kernels/flagged_body.h,
// ipc_programs.h).
#include "engine/executors/device_ipc/ipc_programs.h"

#include "engine/executors/device_ipc/flagged_program.h"
#include "kernels/device_kernels.h"
#include "support/device/device.h"

namespace kolo {
namespace {

// The flagged program's ops on a device: one kernel does every step, so begin() fills its
// arguments, the steps only check that the program and the kernel agree on who sends whom
// and through which box (what the verifier proved is what runs), and end() launches it.
class FlaggedKernelOps {
 public:
  FlaggedKernelOps(const IpcRun& run, const CollCall& call) : run_(run), call_(call) {}
  int size() const { return run_.regions.size(); }
  int index() const { return run_.regions.index(); }

  // A small collective in one kernel (kernels/flagged_body.h): this rank's input into its
  // box in every receiving peer's region, the senders' boxes in its own reduced or copied
  // as their flags arrive.
  Status begin() {
    const CollSpec& s = call_.spec;
    const int n = size(), me = index();
    switch (s.kind) {
      case CollKind::kAllreduce: a_.kind = FlaggedKind::kAllreduce; break;
      case CollKind::kReduce: a_.kind = FlaggedKind::kReduce; break;
      case CollKind::kBroadcast: a_.kind = FlaggedKind::kBroadcast; break;
      case CollKind::kAllgather: a_.kind = FlaggedKind::kAllgather; break;
      case CollKind::kReduceScatter: a_.kind = FlaggedKind::kReduceScatter; break;
      case CollKind::kAlltoall: a_.kind = FlaggedKind::kAlltoall; break;
      case CollKind::kAllgatherv:
        a_.kind = FlaggedKind::kAllgatherv;
        for (int r = 0; r < n; ++r) {  // as bytes: the kernel copies bytes
          a_.vbytes[r] = static_cast<uint32_t>(s.counts[r] * dtype_size(s.dtype));
          a_.vdispl[r] = s.displs[r] * dtype_size(s.dtype);
        }
        break;
      default:
        return error(Code::kInternal, "rank ", run_.rank, ": ", coll_name(s.kind), " has no one-kernel form");
    }
    a_.root = s.root;
    a_.send = call_.send;
    a_.recv = call_.recv;
    a_.count = s.count;
    a_.dtype = s.dtype;
    a_.op = s.op;
    if (s.compressed()) {  // FLOAT32 data, the wire type's codes in the boxes
      a_.wire = true;
      a_.dtype = s.wire;
      a_.op = ReduceOp::kSum;  // AVG came lowered: a sum and a postscale divisor
    }
    for (int p = 0; p < n; ++p) {
      a_.out[p] = reinterpret_cast<uint64_t*>(box(p, me));
      a_.in[p] = reinterpret_cast<const uint64_t*>(box(me, p));
    }
    a_.parity_words = kIpcFlaggedParityBytes / sizeof(uint64_t);
    a_.ranks = n;
    a_.me = me;
    a_.sequence = reinterpret_cast<uint32_t*>(run_.regions.region(me) + kIpcSequenceOffset);
    a_.done = reinterpret_cast<uint32_t*>(run_.regions.region(me) + kIpcDoneOffset);
    a_.tag = run_.tag;
    a_.timeout_ns = static_cast<uint64_t>(run_.timeout_seconds * 1e9);
    a_.abort = run_.abort;
    a_.status = run_.status;
    a_.failed = run_.failed;
    return Status();
  }
  // Parity 0's: the kernel adds the parity of the call number it keeps in device memory.
  char* box(int owner, int sender) const {
    return run_.regions.region(owner) + kIpcFlaggedOffset + sender * kFlaggedBoxBytes;
  }
  Status header(int) { return Status(); }
  Status post(int to, const char* at, const void* src, size_t, ScaleUse) {
    sent_[to] = true;
    return agree(at == box(to, index()) && src == static_cast<const char*>(call_.send) + flagged_block(a_, to, element()),
                 "what rank ", to, " gets, or where");
  }
  Status await_header(int) { return Status(); }
  Status await(int from, const char* at) {
    received_[from] = true;
    return agree(at == box(index(), from), "where rank ", from, "'s data is");
  }
  // The reads: the kernel's.
  char* registers(size_t) { return nullptr; }
  Status scale_copy(void*, const void*, size_t, ScaleUse) { return Status(); }
  Status copy(void*, const void*, size_t) { return Status(); }
  Status reduce(void*, const void* const*, int, size_t, DType, ReduceOp, ScaleUse) { return Status(); }

  Status end() {
    const CollSpec& s = call_.spec;
    const int n = size(), me = index();
    const bool any = a_.kind == FlaggedKind::kAllgatherv ? flagged_most_units(a_) > 0 : a_.count > 0;
    const bool own_box = a_.wire && flagged_fp8(a_.dtype);
    for (int p = 0; p < n; ++p) {
      const bool sends = p == me ? own_box : flagged_sends(a_, me, p);
      const bool receives =
          p != me && any && flagged_sends(a_, p, me) && (a_.kind != FlaggedKind::kAllgatherv || a_.vbytes[p] > 0);
      KOLO_TRY(agree(sent_[p] == sends, "whether rank ", p, " gets data"));
      KOLO_TRY(agree(received_[p] == receives, "whether rank ", p, "'s data is awaited"));
    }
    return device_flagged(device::runtime(), a_, s.prescaled ? call_.prescale : Scale{}, call_.postscale, call_.stream);
  }

 private:
  size_t element() const { return a_.wire ? sizeof(float) : dtype_size(a_.dtype); }
  template <typename... Args>
  Status agree(bool ok, const Args&... what) const {
    if (ok) return Status();
    return error(Code::kInternal, "rank ", run_.rank, ": the flagged program (flagged_program.h) and its kernel ",
                 "(kernels/flagged_body.h) disagree on ", what...);
  }

  const IpcRun& run_;
  const CollCall& call_;
  FlaggedArgs a_;
  bool sent_[kMaxIpcRanks] = {};
  bool received_[kMaxIpcRanks] = {};
};

}  // namespace

Status enqueue_flagged(const IpcRun& run, const CollCall& call) {
  FlaggedKernelOps ops(run, call);
  return FlaggedProgram<FlaggedKernelOps>(ops).run(call);
}

}  // namespace kolo
