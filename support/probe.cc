#include "support/probe.h"

namespace kolo::probe {

#if defined(KOLO_BREAKDOWN) && KOLO_BREAKDOWN
thread_local uint64_t t_stamps[kPoints] = {};
#endif

const char* point_name(int point) {
  static const char* const names[kPoints] = {"api entry",         "api checked", "comm locked", "planned",
                                             "executor entered",  "announced",   "published",   "peer seen",
                                             "reduced",           "executor done", "comm done", "api exit"};
  return point >= 0 && point < kPoints ? names[point] : "?";
}

}  // namespace kolo::probe
