// The arithmetic of Adasum (adaptive summation; Maleki et al., "Scaling Distributed
// Training with Adaptive Summation", MLSys 2021; Horovod's op=Adasum) on host memory:
// what two ranks' gradients a and b combine into,
//   adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b,
// a sum where they are orthogonal and an average where they are parallel. The dot
// product and norms are accumulated in fp64 whatever the data type, as Horovod does. The
// collective that pairs ranks up is engine/adasum.h.
#pragma once

#include <cstddef>

#include "kernels/dtype.h"
#include "support/status.h"

namespace kolo {

// The types Adasum is defined for (gradients): FLOAT16, BFLOAT16, FLOAT32, FLOAT64.
bool adasum_dtype(DType dtype);

struct AdasumDots {
  double dot = 0;      // a . b
  double a_norm2 = 0;  // |a|^2
  double b_norm2 = 0;  // |b|^2
};

// a . b, |a|^2 and |b|^2 over count elements, in fp64, always in the same order: two
// ranks that compute it from the same a and b get the same bits.
Status adasum_dots(const void* a, const void* b, size_t count, DType dtype, AdasumDots* out);

struct AdasumCoefficients {
  double a = 1;
  double b = 1;
};
// 1 - a.b / (2 |x|^2) for each side; 1 where |x|^2 is below sqrt(DBL_MIN) (a zero
// gradient, such as a joined rank's, leaves the other one as it is).
AdasumCoefficients adasum_coefficients(const AdasumDots& dots);

// dst[i] = c.a * a[i] + c.b * b[i], computed in fp64 and rounded once to dtype (through
// float32 for the 16-bit types). dst may be a or b.
Status adasum_combine(void* dst, const void* a, const void* b, size_t count, DType dtype, AdasumCoefficients c);

}  // namespace kolo
