// The checks the multi-process test workers share: expect() counts and reports a failed
// check and goes on; must() reports a failed kolo call and ends the rank.
#pragma once

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kolo/kolo.h"

namespace worker_checks {

// Atomic: some scenarios check from several threads (concurrent communicators).
inline std::atomic<int> g_failures{0};
inline std::atomic<int> g_checks{0};
inline int g_rank = 0;

inline void expect(bool ok, const std::string& what) {
  ++g_checks;
  if (ok) return;
  ++g_failures;
  std::fprintf(stderr, "FAIL rank %d: %s\n", g_rank, what.c_str());
}

inline void must(kolo_result_t rc, const std::string& what) {
  if (rc == KOLO_SUCCESS) return;
  std::fprintf(stderr, "FAIL rank %d: %s returned %s: %s\n", g_rank, what.c_str(), kolo_result_string(rc),
               kolo_last_error());
  std::exit(1);
}

}  // namespace worker_checks
