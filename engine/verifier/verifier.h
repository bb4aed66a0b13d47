// Symbolic verifier for schedules: proves, without running anything, that every rank's
// schedule of one collective computes the right result. It simulates all ranks together
// over symbolic values (which ranks' contributions of which input element a byte holds,
// and whether the pre/post-scale was applied), with eager sends, and checks:
//   - structure: slices inside their buffers, reduce has 1..8 sources, deps point back;
//   - races: two steps of a rank touching the same bytes (one writing) are ordered by deps
//     (or by a message chain through other ranks: a recv writes only after its send started);
//   - matching: every recv meets exactly one send (from, to, tag) of the same size, no
//     rank gets stuck, no send is left over;
//   - no read of bytes never written (scratch, or output not aliased to the input);
//   - results per collective (every contribution exactly once, element i from element i,
//     pre-scale once before combining, post-scale once at the end).
// One-host programs (engine/local/: kSignal/kWait steps, the shared kBufStaging slots) are
// proven the same way, with races across ranks judged by the happens-before order their
// counters give (a wait comes after the signal that released it); verifier_shared.h.
// Programs that read their peers' buffers in place (the device_ipc zero-copy program) name
// them as rank_buffer(q, b); a rank's buffers are its caller's before its first step and
// after its last, so every other rank's access to them must come after the one and before
// the other. Failures are kInternal with the collective, p, rank, step and what is wrong.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/collective.h"
#include "engine/schedules/schedule.h"
#include "support/status.h"

namespace kolo {

// One-host programs only: buffer rank_buffer(q, b) of a slice is rank q's input (b =
// kBufInput) or output (b = kBufOutput), read or written by any rank (schedule.h names a
// rank's own buffers only).
constexpr int kBufRanks = kBufStaging + 1;
constexpr int rank_buffer(int rank, int buffer) { return kBufRanks + 2 * rank + buffer; }

// One-host programs' counters per rank: 0..3 the one-host executor's (engine/local/local_ops.h),
// then the device_ipc flagged protocol's box flags (flagged_program.h): counter
// flag_counter(to, parity) of a rank is the flag of its box of that parity at rank `to`.
constexpr int kFlagRanks = 8;  // kMaxIpcRanks
constexpr int flag_counter(int to, int parity) { return 4 + 2 * to + parity; }
constexpr int kProgramCounters = flag_counter(kFlagRanks, 0);

// Verifies given schedules (one per rank; schedules.size() is the rank count). The spec
// is the call as every rank sees it; for allgatherv, rank r's count is spec.counts[r].
Status verify_schedules(const CollSpec& spec, const std::vector<Schedule>& schedules);

}  // namespace kolo
