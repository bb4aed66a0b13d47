// Runs a Schedule on host memory: posts sends and receives on the fabric's links as soon
// as their dependencies are done, runs reduces and copies with the kernels' host
// functions, and waits with a deadline. Any failure is returned with the step and peer,
// and closes the fabric (the communicator is unusable after a failure).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/schedules/schedule.h"
#include "support/clock.h"
#include "support/status.h"
#include "transport/fabric.h"

namespace kolo {

// The memory and factors of one call of a schedule.
struct CallBinding {
  const void* input = nullptr;
  void* output = nullptr;
  Scale prescale;
  Scale postscale;
  uint64_t tag_base = 0;  // added to every step tag of this call (unique per call)
};

Status execute_schedule(const Schedule& schedule, Fabric& fabric, const std::vector<CallBinding>& calls,
                        char* scratch, const Deadline& deadline);

}  // namespace kolo
