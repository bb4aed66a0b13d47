// What every kolo fuzz target uses: a check that stops the run with a message, for
// properties (round trips) that sanitizers cannot see.
#pragma once

#include <cstdio>
#include <cstdlib>

#define KOLO_FUZZ_CHECK(cond)                                                       \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)
