// Which CPU a rank on this machine is pinned to (kolorun --bind-to core), computed in the
// parent before fork: the child may only make async-signal-safe calls.
#pragma once

#include <sched.h>

namespace kolo {

// The local_rank-th CPU this process may run on, when there are at least local_size of
// them; false (no pinning) otherwise.
bool cpu_for_local_rank(int local_rank, int local_size, cpu_set_t* cpu);

}  // namespace kolo
