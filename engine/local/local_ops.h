// The one-host executor's vocabulary: the counters its ranks publish in shared memory, and
// the ops policy its programs (local_programs.h) are written over. A policy provides
//
//   geometry   int size(), index(), global_rank(int), index_of(int); uint32_t slots();
//              size_t slot_bytes(); char* slot(int index, uint64_t chunk);
//   data       Status copy(void* dst, const void* src, size_t bytes);
//              Status copy_out(void* dst, const void* src, size_t bytes);  (into the
//                     call's output, which the call does not read again)
//              Status scale_copy(void* dst, const void* src, size_t count, DType, ScaleUse);
//              Status reduce(void* dst, const void* const* srcs, int n, size_t count, DType,
//                            ReduceOp, ScaleUse);             (1 <= n <= kMaxReduceInputs)
//              Status reduce_out(...);  (the same, into the call's output: see copy_out)
//              char* scratch(size_t bytes);                    (private to this rank)
//   progress   void publish(int counter, uint64_t value);
//              Status wait_for(int index, int counter, uint64_t at_least, const char* what);
//              Status wait_for_all(int counter, uint64_t at_least, const char* what);
//   agreement  Status check_peers(int only_index);  (the peers run the same call; -1: all)
//
// HostOps (local_executor.cc) does it on the CPU over a SharedDomain; RecordOps
// (local_program.cc) writes the steps down as a Schedule for the verifier, the simulator
// and kolo-plan. ScaleUse names which of the call's factors a copy or reduce applies, so
// a recording says which, and the host resolves it.
#pragma once

#include "engine/collective.h"
#include "engine/schedules/schedule.h"

namespace kolo {

// Monotonic per-rank counters (SharedDomain counters 0..2).
enum LocalCounter : int {
  kPosted = 0,    // chunks whose input this rank has copied into its slot
  kReduced = 1,   // chunks whose slice this rank has reduced (two-phase collectives)
  kConsumed = 2,  // chunks this rank has finished reading from every slot
  kBarrier = 3,   // device slot programs: barriers this rank has reached (device_slot_programs.h)
};

}  // namespace kolo
