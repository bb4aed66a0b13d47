// The multi-process worker's scenarios for the one-host path's own protocols (fast boxes,
// compressed host allreduce, mismatches between the two paths). Checks count into
// worker_checks.h.
#pragma once

#include "kolo/kolo.h"

namespace one_host_scenarios {

void small_messages(kolo_comm_t comm);
void small_lane(kolo_comm_t comm);
void compressed(kolo_comm_t comm);
void compressed_scatter_gather(kolo_comm_t comm);
void compressed_special_values(kolo_comm_t comm);
// These return the process exit code: 0 when every rank got the mismatch or a peer's failure.
int mismatch_wire(kolo_comm_t comm);
int mismatch_paths(kolo_comm_t comm);
int mismatch_on_lane(kolo_comm_t comm);
int mismatch_root_runs_on(kolo_comm_t comm);

}  // namespace one_host_scenarios
