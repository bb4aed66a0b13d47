// Adasum allreduce (Horovod's op=Adasum; kernels/adasum_math.h has the arithmetic) over a
// communicator, on host memory, in place. Ranks are paired as Horovod pairs them: at
// distance 1, 2, 4, ... the lower rank's vector is `a` and the higher one's `b`, so with a
// power-of-two size the result is Horovod's binary tree, adasum(adasum(g0, g1),
// adasum(g2, g3)) and so on. Any other size n works too (Horovod refuses it on CPU): with
// p the largest power of two below n, rank p + i first folds into rank i (adasum(g_i,
// g_{p+i})), the p ranks run the tree, and rank i hands the result back to rank p + i.
//
// Each step exchanges whole vectors with the partner (recursive doubling), so both compute
// the same combination from the same a and b in the same order: every rank ends with the
// same bits. That moves log2(p) vectors per rank where Horovod's halving-doubling moves
// about two; fine for the gradient sizes a host buffer carries, and written down as the
// place to start if Adasum on large tensors is ever slow.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/communicator.h"

namespace kolo {

// segments: the element counts of the tensors packed one after another in data (fused
// tensors); each gets its own coefficients, as if reduced alone. Empty: one tensor of
// count elements. Every rank must call with the same count, dtype and segments: a call
// that differs fails on every rank. dtype: FLOAT16, BFLOAT16, FLOAT32 or FLOAT64.
Status adasum_allreduce(Communicator& comm, void* data, size_t count, DType dtype,
                        const std::vector<size_t>& segments = {});

}  // namespace kolo
