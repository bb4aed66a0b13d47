// What both fuzz targets do with a topology that parsed: everything a user's file reaches.
#pragma once

#include "topology/json_format.h"
#include "topology/paths.h"
#include "topology/render.h"

namespace kolo {

inline void exercise(const HostTopology& topo) {
  // Paths cost O(n^2) searches; big inputs only test the parser and the writers.
  if (topo.nodes().size() <= 48) {
    PathTable paths(topo);
    for (int g : topo.of_kind(NodeKind::kGpu)) paths.nearest_nics(g);
    (void)topology_matrix(topo);
    (void)topology_summary(topo);
  }
  (void)topology_dot(topo);
  Result<HostTopology> again = topology_from_json(topology_to_json(topo));
  if (!again.ok()) __builtin_trap();  // what we write, we must read back
}

}  // namespace kolo
