// The multi-process worker's scenarios on device buffers (the emulated device in CI):
// stream order, compressed allreduce, registered buffers, a rank killed with calls queued. Checks count into
// worker_checks.h.
#pragma once

#include "kolo/kolo.h"

namespace device_scenarios {

void device_stream(kolo_comm_t comm);
void device_compressed(kolo_comm_t comm);
void device_registered(kolo_comm_t comm);
void device_group(kolo_comm_t comm);
void device_big_group(kolo_comm_t comm);
void device_shared_buffers(kolo_comm_t comm);
// The process exit code (the last rank kills itself).
int device_kill(kolo_comm_t comm);

}  // namespace device_scenarios
