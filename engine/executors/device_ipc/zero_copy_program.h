// The device_ipc zero-copy program, written once over an ops policy like the slot programs
// (device_slot_programs.h): ipc_zero_copy.cc runs it over ops that enqueue kernels,
// device_program_record.cc records it for the verifier. The buffers are read in place
// (registered on every rank, or shared by ipc_peer_buffers.h): S(r) is rank r's input,
// R(r) its output, as this process addresses them.
//   barrier   every rank's input is ready, and no peer still reads its output;
//   read      the peers' buffers straight into this rank's output (allreduce: reduce
//             this rank's share into its output, barrier, copy every other share from
//             its owner's output; broadcast and allgather(v): the owner's output, where
//             the owner put its part before the first barrier: in-place forms put an
//             allgather's input at another offset on every rank, outputs are symmetric);
//   barrier   no peer reads this rank's buffers any more: the caller may reuse them.
// In place is safe: a rank writes only what no peer reads in the same step (its own
// share, or blocks that peers read before the barrier that precedes the write).
// Recorded, the peers' buffers are the verifier's rank_buffer slices: it proves that every
// read of a peer's buffer comes after that peer's call began and before it returned.
//
// Ops: size(), index(), rank() (for messages), send_of(index), recv_of(index) (S, R),
// copy(dst, src, bytes), reduce(dst, srcs, n, count, dtype, op, ScaleUse), barrier().
#pragma once

#include <cstddef>

#include "engine/collective.h"
#include "engine/schedules/schedule.h"
#include "kernels/barrier_body.h"
#include "support/status.h"

namespace kolo {

template <class Ops>
class ZeroCopyProgram {
 public:
  explicit ZeroCopyProgram(Ops& ops) : ops_(ops) {}

  // allreduce (two-shot), reduce, broadcast, allgather(v), reduce_scatter; not prescaled.
  Status run(const CollCall& call) {
    const CollSpec& s = call.spec;
    const int n = ops_.size(), me = ops_.index();
    if (n > kMaxIpcRanks) return error(Code::kInternal, "zero-copy programs run on at most ", kMaxIpcRanks, " ranks");
    const size_t es = dtype_size(s.dtype), bytes = s.bytes();
    auto S = [&](int r) { return ops_.send_of(r); };
    auto R = [&](int r) { return ops_.recv_of(r); };
    char* recv = static_cast<char*>(call.recv);
    const char* send = static_cast<const char*>(call.send);
    const void* ins[kMaxIpcRanks];
    // The collectives whose peers read this rank's output: its own part goes there first.
    if (s.kind == CollKind::kBroadcast && me == s.root) KOLO_TRY(copy(recv, send, bytes));
    if (s.kind == CollKind::kAllgather) KOLO_TRY(copy(recv + me * bytes, send, bytes));
    if (s.kind == CollKind::kAllgatherv) KOLO_TRY(copy(recv + s.displs[me] * es, send, s.counts[me] * es));
    KOLO_TRY(ops_.barrier());
    switch (s.kind) {
      case CollKind::kAllreduce: {
        auto lo = [&](int p) { return s.count * p / n * es; };
        for (int r = 0; r < n; ++r) ins[r] = S(r) + lo(me);
        KOLO_TRY(ops_.reduce(recv + lo(me), ins, n, (lo(me + 1) - lo(me)) / es, s.dtype, s.op, ScaleUse::kPost));
        KOLO_TRY(ops_.barrier());
        for (int p = 0; p < n; ++p) {
          if (p != me) KOLO_TRY(copy(recv + lo(p), R(p) + lo(p), lo(p + 1) - lo(p)));
        }
        break;
      }
      case CollKind::kReduce:
        for (int r = 0; r < n; ++r) ins[r] = S(r);
        if (me == s.root) KOLO_TRY(ops_.reduce(recv, ins, n, s.count, s.dtype, s.op, ScaleUse::kPost));
        break;
      case CollKind::kBroadcast:
        if (me != s.root) KOLO_TRY(copy(recv, R(s.root), bytes));
        break;
      case CollKind::kAllgather:
        for (int p = 0; p < n; ++p) {
          if (p != me) KOLO_TRY(copy(recv + p * bytes, R(p) + p * bytes, bytes));
        }
        break;
      case CollKind::kAllgatherv:
        for (int p = 0; p < n; ++p) {
          const size_t at = s.displs[p] * es;
          if (p != me) KOLO_TRY(copy(recv + at, R(p) + at, s.counts[p] * es));
        }
        break;
      case CollKind::kReduceScatter:
        for (int r = 0; r < n; ++r) ins[r] = S(r) + me * bytes;
        KOLO_TRY(ops_.reduce(recv, ins, n, s.count, s.dtype, s.op, ScaleUse::kPost));
        break;
      default:
        return error(Code::kInternal, "rank ", ops_.rank(), ": a zero-copy ", coll_name(s.kind), " reached device_ipc");
    }
    return ops_.barrier();
  }

 private:
  Status copy(void* dst, const void* src, size_t bytes) { return program_copy(ops_, dst, src, bytes); }

  Ops& ops_;
};

}  // namespace kolo
