// The compressed executor's one choice (allreduce with a wire type across hosts): the flat
// two-shot among all p ranks, or the hierarchical form (fp32 reduce-scatter in each host,
// the two-shot among the H ranks of each local index, fp32 allgather in the host). Per
// call of N fp32 bytes, w the wire type's bytes per fp32 byte, L ranks per host, net the
// NIC's rate (calibrated where the communicator measured it), local the rate between
// ranks of a host, codec one core's encode/decode rate:
//   flat          2 a_net + max(2 L (p - L) N w / (p net), (3 + 1/p) N / codec)
//   hierarchical  2 a_local + 2 (L - 1) N / (L local) + 2 a_net
//                 + max(2 (H - 1) N w / (H net), (3 + 1/H) N / (L codec))
// The NIC carries every rank of its host's bytes (the first terms of the max); the codecs
// of a chunk overlap the transfers of the ones before it (hence the max). The
// hierarchical form moves 1/L of the flat form's bytes over the network for two fp32
// passes over the host's links, so it wins where the network is the slower of the two.
#pragma once

#include <cstddef>

#include "engine/collective.h"
#include "engine/planner/cost_model.h"

namespace kolo {

struct CompressedCost {
  double flat_us = 0;
  double hierarchical_us = 0;  // 0 when the hosts are not of equal size (no such form)
};

CompressedCost predict_compressed_allreduce(const CollSpec& spec, const CostModel& model);

// Values per pipeline chunk of a compressed call over the links (1 MB of fp32): the codecs
// of one chunk run while the links carry the chunks before it. A multiple of the fp8 scale
// block (128 values), so chunks keep its grid. Recorded in the Plan (chunk_elems).
constexpr size_t kCompressedChunkValues = size_t{1} << 18;

}  // namespace kolo
