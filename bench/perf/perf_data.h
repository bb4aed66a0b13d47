// Test data for kolo-perf: values chosen so that every reduction order gives one exact
// answer, written into and read back from buffers of any kolo dtype.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kolo/kolo.h"

namespace kolo_perf {

size_t dtype_bytes(kolo_dtype_t dtype);
const char* dtype_label(kolo_dtype_t dtype);  // nccl-tests names: float, half, ...
// The element-wise ops (KOLO_SUM..KOLO_AVG), which the benchmark and the soak check value
// by value; KOLO_ADASUM is not one (tests/multiproc/adasum_scenarios.cc checks it).
constexpr int kElementwiseOps = KOLO_ADASUM;
const char* op_label(kolo_op_t op);
bool parse_dtype(const std::string& text, kolo_dtype_t* out);
bool parse_op(const std::string& text, kolo_op_t* out);

void store_value(void* buffer, size_t index, kolo_dtype_t dtype, double value);
double load_value(const void* buffer, size_t index, kolo_dtype_t dtype);
// The value `value` becomes once stored in dtype (rounding, saturation).
double as_dtype(double value, kolo_dtype_t dtype);

// Rank `rank`'s contribution at element `index` for a reduction with `op`.
double input_value(kolo_op_t op, kolo_dtype_t dtype, int rank, size_t index);
// The exact result of reducing input_value over `nranks` ranks (AVG: the exact mean).
double expected_reduction(kolo_op_t op, kolo_dtype_t dtype, int nranks, size_t index);
// True when got equals the expected value bit for bit after rounding to dtype, or, for
// float AVG, within 2 units in the last place.
bool matches(double got, double expected, kolo_op_t op, kolo_dtype_t dtype);

// Compressed allreduce (kolo-perf --wire): rank `rank`'s fp32 input at `index`, magnitudes
// in [0.5, 2) with varying signs (values that a wire type rounds, unlike the exact small
// integers above), and the unit roundoff of the wire type (half 2^-11, bfloat16 2^-8,
// f8e4m3 2^-4, f8e5m2 2^-3).
float wire_input_value(int rank, size_t index);
double wire_unit_roundoff(kolo_dtype_t wire);

}  // namespace kolo_perf
