// KOLO_CLONES: a loop built twice, for baseline x86-64 (SSE2) and for AVX2, the loader
// picking one by CPU (an ifunc). Measured on the development machine: fp32 sum of 2 over
// 256 KB (in L2) 53 -> 62 GB/s, fp16 sum 2x faster; at 64 MB both are memory-bound. No FMA
// in the list: it would let the compiler fuse a*b+c and change rounding between clones.
// Not under ThreadSanitizer: the loader runs an ifunc's resolver before TSan's runtime is
// up, and the instrumented resolver crashes the program at start (baseline code only).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define KOLO_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define KOLO_CLONES
#endif
