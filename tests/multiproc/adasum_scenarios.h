// The multi-process worker's Adasum scenario (KOLO_ADASUM, engine/adasum.h): results against
// an fp64 reference of Adasum's pairwise recursion, computed on every rank from every
// rank's inputs, and the errors a user can make. Checks count into worker_checks.h.
#pragma once

#include "kolo/kolo.h"

namespace adasum_scenarios {

void adasum(kolo_comm_t comm);

}  // namespace adasum_scenarios
