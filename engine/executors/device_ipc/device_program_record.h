// The device_ipc executor's zero-copy, compressed and flagged programs made visible: the
// program templates the executor runs (zero_copy_program.h, compressed_program.h,
// flagged_program.h) run here over ops that write every copy, reduce, barrier and flag
// down as a Schedule step, for the verifier. The slot programs' recording is
// record_device_programs (engine/local/local_program.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/collective.h"
#include "engine/schedules/schedule.h"

namespace kolo {

// Every rank's zero-copy program for spec on `ranks` ranks (allreduce two-shot, reduce,
// broadcast, allgather(v), reduce_scatter): the peers' inputs and outputs read in place
// are the verifier's rank_buffer slices, barriers are kSignal/kWait of the kBarrier
// counter. drop_barrier: the program without its barrier of that number (1-based) on every
// rank, for a test that the verifier notices; -1 for none.
std::vector<Schedule> record_zero_copy_programs(const CollSpec& spec, int ranks, int64_t drop_barrier = -1);

// Every rank's compressed allreduce (spec.wire set; algorithm kOneShot or kTwoShot) in
// chunks of chunk_values FLOAT32 values through two slots per rank (kBufStaging). A wire
// buffer of k values is recorded as k FLOAT32 cells: the verifier follows the values, not
// their codes (the codes' layout is the program's: each share has a stride of its own).
// drop_barrier as above.
std::vector<Schedule> record_compressed_programs(const CollSpec& spec, int ranks, Algorithm algorithm,
                                                 size_t chunk_values, int64_t drop_barrier = -1);

// Every rank's flagged program (allreduce, with a wire type too, reduce, broadcast,
// allgather(v), reduce_scatter, alltoall), `calls` calls in a row, so that the boxes of
// one parity are reused (call v and v + 2). Boxes are staging slots (2 * ranks per rank: a
// box per parity and sender, slot parity * ranks + sender), a box's flag is its sender's
// counter flag_counter(receiver, parity) (engine/verifier/verifier.h): the header raises
// it to 2v, the data to 2v + 1. The calls before the last write their results into
// scratch (the same call again in place would reduce its own result); the last one into
// the output, which the verifier checks. parities: 1 records the boxes of one parity only
// (a broken protocol, for a test that the verifier notices).
std::vector<Schedule> record_flagged_programs(const CollSpec& spec, int ranks, int calls = 3, int parities = 2);

}  // namespace kolo
