// The one-host executor's programs made visible: the same LocalPrograms code that runs on
// the host (local_executor.cc) runs here over RecordOps, which writes every copy, reduce,
// counter publish and wait down as a Schedule step (staging slots as kBufStaging,
// progress as kSignal/kWait; schedule.h). The verifier proves these programs, the
// simulator times them, kolo-plan prints them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/collective.h"
#include "engine/schedules/schedule.h"

namespace kolo {

// Every rank's program for spec on `ranks` ranks of one host (all ranks in one domain, rank
// = index), with `algorithm` (kOneShot/kTwoShot for allreduce and reduce; ignored
// otherwise), staging slots of slot_bytes, `slots` per rank, counters starting at zero.
// spec is as the executor gets it: op is not kAvg; prescaled/postscaled say whether the
// call has factors (the steps name which factor they apply either way).
std::vector<Schedule> record_local_programs(const CollSpec& spec, int ranks, Algorithm algorithm, size_t slot_bytes,
                                            uint32_t slots);

// The device_ipc executor's slot programs (device_slot_programs.h) the same way (its other
// programs: engine/executors/device_ipc/device_program_record.h): two slots
// of slot_bytes per rank (the `in` and `out` halves), barriers as kSignal/kWait of the
// kBarrier counter; algorithm: kOneShot, kTwoShot or kRing for allreduce. drop_barrier:
// the program without its barrier of that number (1-based) on every rank, for a test that
// the verifier notices; -1 for none.
std::vector<Schedule> record_device_programs(const CollSpec& spec, int ranks, Algorithm algorithm, size_t slot_bytes,
                                             int64_t drop_barrier = -1);

}  // namespace kolo
