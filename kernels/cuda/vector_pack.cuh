// 16 bytes of elements, moved with one vector load or store: what every kolo kernel uses
// for its aligned body (tails and misaligned pointers go one element at a time).
#pragma once

#include <cuda_runtime.h>

namespace kolo {

template <class S>
union Pack {
  static constexpr int kCount = 16 / sizeof(S);
  uint4 bits;
  S elem[kCount];
};

}  // namespace kolo
