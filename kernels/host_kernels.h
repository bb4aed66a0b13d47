// Host implementations of kolo's element-wise primitives. The CUDA kernels compile the same
// functors (kernels/functors.h); these are their host twins, and what the host executor uses.
#pragma once

#include <cstddef>

#include "kernels/dtype.h"
#include "support/status.h"

namespace kolo {

constexpr int kMaxReduceInputs = 8;

// dst[i] = scale(op(srcs[0][i], ..., srcs[nsrcs-1][i])) for 1 <= nsrcs <= 8, in one pass.
// dst may be srcs[0] (in place) but must not partly overlap any source. op must not be
// kAvg (callers pass kSum and a Scale with the rank count as divisor). FLOAT16, BFLOAT16
// and FLOAT8 are computed in float32 and rounded once to nearest even.
Status reduce_into(void* dst, const void* const* srcs, int nsrcs, size_t count, DType dtype,
                   ReduceOp op, Scale scale);

// dst[i] = scale(src[i]); a plain copy when scale is the identity. dst may equal src.
Status scale_copy(void* dst, const void* src, size_t count, DType dtype, Scale scale);

// memcpy whose stores bypass the caches (non-temporal) where the CPU has them, for large
// outputs a call does not read again: an ordinary store first reads the destination line
// (write-allocate), a third more memory traffic for a copy. Ordered before return (sfence).
// dst and src must not overlap.
void stream_copy(void* dst, const void* src, size_t bytes);

// kInvalidArgument naming caller and value unless the factor is finite and divisor >= 1.
Status check_scale(const char* caller, Scale scale);

// The argument checks shared by reduce_into and the CUDA launchers, so both reject the
// same calls with the same words. caller names the function in the message. Checks nsrcs,
// dtype, op (kAvg is rejected), scale (finite factor, divisor >= 1) always; with
// count > 0 also null, misaligned (to the element size) and partly overlapping pointers.
Status check_reduce_args(const char* caller, const void* dst, const void* const* srcs,
                         int nsrcs, size_t count, DType dtype, ReduceOp op, Scale scale);

}  // namespace kolo
