#include "tools/kolorun/binding.h"

namespace kolo {

bool cpu_for_local_rank(int local_rank, int local_size, cpu_set_t* cpu) {
  cpu_set_t allowed;
  CPU_ZERO(cpu);
  if (::sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || local_size > CPU_COUNT(&allowed)) return false;
  for (int c = 0, seen = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &allowed)) continue;
    if (seen++ == local_rank) {
      CPU_SET(c, cpu);
      return true;
    }
  }
  return false;
}

}  // namespace kolo
