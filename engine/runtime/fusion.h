// Tensor fusion: which ready allreduces run together. Allreduces with the same dtype, op,
// scales, wire type and memory (host or device) are packed, in response order, into groups of at most `threshold` bytes; a
// request larger than the threshold (or a grouped enqueue) is a group of its own. Every
// rank plans from the same response list and threshold, so the groups agree everywhere.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/runtime/message.h"

namespace kolo::runtime {

// Indices into `ready` of its allreduces, one vector per fused collective, in the order of
// their first member. Error responses and other operations are left out.
std::vector<std::vector<size_t>> plan_fusion(const std::vector<Response>& ready, size_t threshold);

}  // namespace kolo::runtime
