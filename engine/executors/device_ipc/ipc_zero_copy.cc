// device_ipc: registered buffers read in place, and the copy kernel the programs share
// (ipc_programs.h).
#include "engine/executors/device_ipc/ipc_programs.h"

#include <algorithm>

#include "engine/executors/device_ipc/zero_copy_program.h"
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

namespace {

// The zero-copy program's ops (zero_copy_program.h): kernels on the call's stream.
class ZeroCopyKernelOps : public IpcKernelOps {
 public:
  ZeroCopyKernelOps(const IpcRun& run, const CollCall& call, const InPlaceBuffers& at) : IpcKernelOps(run, call), at_(at) {}
  char* send_of(int index) const { return at_.send[index]; }
  char* recv_of(int index) const { return at_.recv[index]; }

 private:
  const InPlaceBuffers& at_;
};

}  // namespace

Status enqueue_zero_copy(const IpcRun& run, const CollCall& call, const InPlaceBuffers& at) {
  ZeroCopyKernelOps ops(run, call, at);
  return ZeroCopyProgram<ZeroCopyKernelOps>(ops).run(call);
}

}  // namespace kolo
