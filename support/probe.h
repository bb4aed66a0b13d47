// Phase probes of the breakdown benchmark (bench/perf/kolo_breakdown.cc, issue 52): in a
// build configured with -DKOLO_BREAKDOWN=ON, KOLO_PROBE(point) stamps the CPU's timestamp
// counter at that point of a call into a per-thread array; in every other build it is
// nothing at all, so the points cost the library nothing.
#pragma once

#include <cstdint>

#include "support/clock.h"

namespace kolo::probe {

// The points of a small host call, in the order one passes them.
enum Point : int {
  kApiEntry,         // kolo_allreduce_ex entered
  kApiChecked,       // arguments checked, the call built and its buffers classified
  kCommLocked,       // the communicator holds the call lock (the flight recorder's entry taken)
  kPlanned,          // the Plan found (memo or plan()), compression checked, the tag numbered
  kExecutorEntered,  // the deadline made, the executor's run entered
  kAnnounced,        // the call's signature set (the fast boxes publish it after posting; mismatch detection)
  kPublished,        // this rank's fast box written and published
  kPeerSeen,         // the peer's box seen
  kReduced,          // the boxes reduced into the output
  kExecutorDone,     // back in the runner
  kCommDone,         // back in the communicator, the flight recorder's exit taken
  kApiExit,          // about to return to the caller
  kPoints
};
const char* point_name(int point);

#if defined(KOLO_BREAKDOWN) && KOLO_BREAKDOWN
extern thread_local uint64_t t_stamps[kPoints];
inline void stamp(Point point) { t_stamps[point] = cpu_ticks(); }
#define KOLO_PROBE(point) ::kolo::probe::stamp(::kolo::probe::point)
constexpr bool kEnabled = true;
#else
#define KOLO_PROBE(point) ((void)0)
constexpr bool kEnabled = false;
#endif

}  // namespace kolo::probe
