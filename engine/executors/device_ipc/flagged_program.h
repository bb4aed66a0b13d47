// The device_ipc one-kernel collectives (Protocol::kFlagged, kernels/flagged_body.h) as a
// program over an ops policy, like the slot programs (device_slot_programs.h): what the
// kernel does, step by step. ipc_flagged.cc runs it over ops that check each step against
// the arguments the kernel gets (who sends whom, which box) and then launch the kernel,
// once; device_program_record.cc records it for the verifier, boxes as staging slots and
// flags as counters.
//
// Call v (every rank counts its flagged calls) uses the boxes of parity v % 2: one per
// sender in every receiver's region. Each rank writes its header line into its box at
// every peer, then its data into the boxes of the peers it sends to (each line carries the
// call's flag: a reader that sees the flag sees the data); then it waits for every peer's
// header, sender or not, and for each sender's data, and reduces (in rank order, its own
// contribution from its input) or copies it into place. Every rank waiting for every
// peer's header is what makes the parity rule hold: a rank starts call v + 2 (which writes
// parity v % 2 again) only after every peer has started call v + 1, that is, finished
// reading call v. A call with no data (count 0) writes the headers and waits for nothing.
// A kernel thread handles unit u of every block it sends and receives, so each unit sees
// the order written here (all writes, then the reads), in place too.
//
// Ops: size(), index(), begin() (the call's parity), box(owner, sender) (this call's),
// header(to), post(to, box, src, count, ScaleUse) (data and its flag), await_header(from),
// await(from, box), registers(bytes) (the kernel's own prescaled contribution),
// scale_copy(dst, src, count, ScaleUse), copy(dst, src, bytes), reduce(dst, srcs, n,
// count, dtype, op, ScaleUse), end().
#pragma once

#include <algorithm>
#include <cstddef>

#include "engine/collective.h"
#include "engine/schedules/schedule.h"
#include "kernels/flagged_body.h"
#include "support/status.h"

namespace kolo {

template <class Ops>
class FlaggedProgram {
 public:
  explicit FlaggedProgram(Ops& ops) : ops_(ops) {}

  // allreduce (FLOAT32 with a wire type too), reduce, broadcast, allgather(v),
  // reduce_scatter, alltoall.
  Status run(const CollCall& call) {
    const CollSpec& s = call.spec;
    const int n = ops_.size(), me = ops_.index();
    KOLO_TRY(ops_.begin());
    const size_t es = dtype_size(s.dtype);
    const bool varying = s.kind == CollKind::kAllgatherv;
    const bool per_peer = s.kind == CollKind::kReduceScatter || s.kind == CollKind::kAlltoall;
    const bool reduces =
        s.kind == CollKind::kAllreduce || s.kind == CollKind::kReduce || s.kind == CollKind::kReduceScatter;
    // fp8 wires: this rank's codes go into its own box too, where its readers take them.
    const bool own_box = s.compressed() && flagged_fp8(s.wire);
    // Copies move bytes: only a reduction's contributions are prescaled.
    const ScaleUse pre = reduces && s.prescaled ? ScaleUse::kPre : ScaleUse::kNone;
    const char* send = static_cast<const char*>(call.send);
    char* recv = static_cast<char*>(call.recv);
    auto sends = [&](int from, int to) {
      if (from == to) return false;
      if (s.kind == CollKind::kReduce) return to == s.root;
      if (s.kind == CollKind::kBroadcast) return from == s.root;
      return true;
    };
    auto count_of = [&](int r) { return varying ? s.counts[r] : s.count; };
    auto block = [&](int to) { return per_peer ? static_cast<size_t>(to) * s.count * es : 0; };
    const size_t most = varying ? *std::max_element(s.counts.begin(), s.counts.end()) : s.count;
    // 1. the header to every peer, the data to every receiver
    for (int p = 0; p < n; ++p) {
      if (p != me) KOLO_TRY(ops_.header(p));
    }
    for (int p = 0; p < n; ++p) {
      if (sends(me, p) || (own_box && p == me)) {
        KOLO_TRY(ops_.post(p, ops_.box(p, me), send + block(p), count_of(me), pre));
      }
    }
    if (most == 0) return ops_.end();
    // 2. every peer's header
    for (int r = 0; r < n; ++r) {
      if (r != me) KOLO_TRY(ops_.await_header(r));
    }
    // 3. the senders' data, reduced or copied into place
    if (reduces) {
      if (s.kind == CollKind::kReduce && me != s.root) return ops_.end();
      const void* srcs[kMaxIpcRanks];
      for (int r = 0; r < n; ++r) {
        if (r == me) continue;
        KOLO_TRY(ops_.await(r, ops_.box(me, r)));
        srcs[r] = ops_.box(me, r);
      }
      srcs[me] = send + block(me);
      if (own_box) {
        srcs[me] = ops_.box(me, me);
      } else if (pre != ScaleUse::kNone) {
        char* own = ops_.registers(s.count * es);
        KOLO_TRY(ops_.scale_copy(own, send + block(me), s.count, pre));
        srcs[me] = own;
      }
      KOLO_TRY(ops_.reduce(recv, srcs, n, s.count, s.dtype, s.op, ScaleUse::kPost));
      return ops_.end();
    }
    for (int r = 0; r < n; ++r) {
      // broadcast: the root's input; allgather, alltoall: block r of the result from rank r;
      // allgatherv: rank r's count at its displacement.
      const size_t to = varying ? s.displs[r] * es : s.kind == CollKind::kBroadcast ? 0 : r * s.count * es;
      const size_t bytes = count_of(r) * es;
      if (r == me) {
        if (s.kind != CollKind::kBroadcast || me == s.root) KOLO_TRY(copy(recv + to, send + block(me), bytes));
      } else if (sends(r, me) && bytes > 0) {
        KOLO_TRY(ops_.await(r, ops_.box(me, r)));
        KOLO_TRY(copy(recv + to, ops_.box(me, r), bytes));
      }
    }
    return ops_.end();
  }

 private:
  Status copy(void* dst, const void* src, size_t bytes) { return program_copy(ops_, dst, src, bytes); }

  Ops& ops_;
};

}  // namespace kolo
