// The device_ipc executor's region layout and its programs: each enqueues one call's kernels on the call's
// stream over the ranks' IPC regions (transport/ipc/ipc_regions.h), given what the
// executor holds for them (IpcRun). The executor (ipc_device_executor.cc) admits the
// call, picks the program from the Plan's protocol and fences it; these only enqueue.
// Each program is written once over an ops policy: these run it over kernel ops,
// device_program_record.h records it for the verifier.
//   ipc_slots.cc       the slot programs (device_slot_programs.h), a rank alone, the call's digest
//   ipc_compressed.cc  allreduce with a wire type, through the slots (compressed_program.h)
//   ipc_flagged.cc     the one-kernel collectives (flagged_program.h, kernels/flagged_body.h)
//   ipc_zero_copy.cc   registered buffers read in place (zero_copy_program.h)
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "engine/collective.h"
#include "engine/executors/executor.h"
#include "kernels/barrier_body.h"
#include "kernels/device_kernels.h"
#include "kernels/flagged_body.h"
#include "support/status.h"
#include "transport/ipc/ipc_regions.h"
#include "transport/ipc/ipc_windows.h"

namespace kolo {

// A rank's region:
//   header   one 128-byte barrier word per rank, written only by that rank; then this
//            rank's barrier counter, its device copy of the barrier status, its count of
//            flagged calls and their kernel's finished blocks;
//   slot 0, slot 1   each an `in` half and an `out` half of kIpcChunkBytes;
//   boxes    the one-kernel collectives': one per sender and parity.
inline constexpr size_t kIpcHeaderBytes = 4096;
inline constexpr size_t kIpcWordStride = 128;  // one barrier word per rank, a line of its own
inline constexpr size_t kIpcChunkBytes = size_t{4} << 20;
// After the slots, the one-kernel allreduce's boxes (kernels/flagged_body.h): one per
// sender and parity.
inline constexpr size_t kIpcFlaggedOffset = kIpcHeaderBytes + 2 * 2 * kIpcChunkBytes;
inline constexpr size_t kIpcFlaggedParityBytes = kMaxIpcRanks * kFlaggedBoxBytes;
inline constexpr size_t kIpcRegionBytes = kIpcFlaggedOffset + 2 * kIpcFlaggedParityBytes;
static_assert(kFlaggedBoxBytes % 16 == 0 && kIpcFlaggedParityBytes % 8 == 0);
static_assert(kMaxIpcRanks * kIpcWordStride <= kIpcHeaderBytes);
static_assert(sizeof(BarrierWord) <= kIpcWordStride);
// This rank's barrier counter (BarrierArgs::counter), in its own header after the words.
inline constexpr size_t kIpcCounterOffset = kMaxIpcRanks * kIpcWordStride;
// This rank's device copy of its barrier status (BarrierArgs::failed), after the counter.
inline constexpr size_t kIpcFailedOffset = kIpcCounterOffset + sizeof(uint64_t);
// This rank's count of flagged calls (FlaggedArgs::sequence) and its kernel's finished
// blocks (FlaggedArgs::done).
inline constexpr size_t kIpcSequenceOffset = kIpcFailedOffset + sizeof(uint32_t);
inline constexpr size_t kIpcDoneOffset = kIpcSequenceOffset + sizeof(uint32_t);
static_assert(kIpcDoneOffset + sizeof(uint32_t) <= kIpcHeaderBytes);

// What a program needs of the executor: the regions, the communicator's rank (for
// messages), the call's digest, the step barrier (a kernel, or a wait on the host:
// ipc_host_barrier.h) and the words a kernel that waits reports in.
struct IpcRun {
  IpcRegions& regions;
  int rank;
  uint64_t tag;
  std::function<Status(void*)> barrier;
  const volatile uint32_t* abort;  // host memory: kolo_comm_abort was called
  volatile uint32_t* status;       // host memory: why a wait gave up
  volatile uint32_t* failed;       // device memory: the same, for the kernels after
  double timeout_seconds;          // how long a kernel waits for a peer (the communicator's)
};

// A copy kernel, not memcpy_async: the executor holds a ScopedKernelGuard while it
// enqueues, so after a barrier that gave up (a mismatch, a dead peer, an abort) it touches
// nothing, and nothing reads a peer's buffer that the peer may free once it has failed.
Status ipc_copy(void* dst, const void* src, size_t bytes, void* stream);

// What every device_ipc program's kernel ops share (each program's ops add what it reads):
// the host's ranks and the call's copies, reductions and barriers on the call's stream.
class IpcKernelOps {
 public:
  IpcKernelOps(const IpcRun& run, const CollCall& call) : run_(run), call_(call) {}
  int size() const { return run_.regions.size(); }
  int index() const { return run_.regions.index(); }
  int rank() const { return run_.rank; }
  // Rank r's slot for chunk `chunk` (two per rank, used in turn, after the header).
  char* slot(int r, uint64_t chunk) const {
    return run_.regions.region(r) + kIpcHeaderBytes + (chunk & 1) * 2 * kIpcChunkBytes;
  }
  Status copy(void* dst, const void* src, size_t bytes) { return ipc_copy(dst, src, bytes, call_.stream); }
  Status scale_copy(void* dst, const void* src, size_t count, DType dtype, ScaleUse use) {
    return device_scale_copy(dst, src, count, dtype, scale_for(use, call_), call_.stream);
  }
  Status reduce(void* dst, const void* const* srcs, int n, size_t count, DType dtype, ReduceOp op, ScaleUse use) {
    return device_reduce_into(dst, srcs, n, count, dtype, op, scale_for(use, call_), call_.stream);
  }
  Status barrier() { return run_.barrier(call_.stream); }

 protected:
  const IpcRun& run_;
  const CollCall& call_;
};

// chunks: the slot chunks run before (slot = chunk % 2), advanced.
Status enqueue_slots(const IpcRun& run, const CollCall& call, Algorithm algorithm, uint64_t& chunks);
// One rank: its result is its input, postscaled where a reduction says so, in one pass.
Status enqueue_alone(const CollCall& call);
// The digest every barrier of a call carries (ipc_slots.cc says what goes in it).
uint64_t ipc_call_tag(const CollCall& call, const Plan& plan, const RegisteredBuffers& zc, bool graph);
Status enqueue_compressed(const IpcRun& run, const CollCall& call, Algorithm algorithm, uint64_t& chunks);
Status enqueue_flagged(const IpcRun& run, const CollCall& call);
// Every rank's input and output of a zero-copy call, as this process addresses them (null
// where the collective does not read that buffer in place).
struct InPlaceBuffers {
  char* send[kMaxIpcRanks] = {};
  char* recv[kMaxIpcRanks] = {};
};
Status enqueue_zero_copy(const IpcRun& run, const CollCall& call, const InPlaceBuffers& at);

}  // namespace kolo
