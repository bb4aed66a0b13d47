// Which rings the ring algorithms use: ranks grouped by host (hosts in the order of their
// first rank), and inside a host ordered so that neighbours share the fastest links (GPU
// paths from the topology; rank order for host memory). With several hosts whose GPUs
// reach different NICs, there is one ring per NIC: ring k rotates every host's order by
// k, so each ring leaves a host from a different rank (and NIC), as NCCL's channels do.
#pragma once

#include <vector>

#include "engine/schedules/algorithms.h"

namespace kolo {

// At least one ring; each is a permutation of 0..ctx.size-1.
std::vector<std::vector<int>> ring_orders(const PlanContext& ctx);

// The ranks of each host, in the order ring_orders puts them (hosts by first rank).
std::vector<std::vector<int>> ranks_by_host(const PlanContext& ctx);

}  // namespace kolo
