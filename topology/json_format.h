// kolo's topology file format (JSON): what KOLO_TOPO_FILE reads, KOLO_TOPO_DUMP_FILE and
// kolo-topo --json write, and the fixtures use. Files are untrusted: every field is
// checked, and an error names the field ("links[3].b: no node named 'gpu9'").
//
//   {"format": "kolo-topology", "version": 1, "host": "dgx01",
//    "nodes": [{"name": "gpu0", "kind": "gpu", "bus_id": "0000:18:00.0", "sm": 90}, ...],
//    "links": [{"a": "gpu0", "b": "sw0", "kind": "pcie", "gen": 5, "width": 16}, ...]}
//
// A link without "bw_gbs" or "latency_us" gets the figure from bandwidth.h.
// A cluster file is {"format": "kolo-cluster", "version": 1, "hosts": [<host>, ...]}.
#pragma once

#include <string>
#include <string_view>

#include "support/status.h"
#include "topology/graph.h"

namespace kolo {

std::string topology_to_json(const HostTopology& topo);
Result<HostTopology> topology_from_json(std::string_view text);
std::string cluster_to_json(const ClusterTopology& cluster);
Result<ClusterTopology> cluster_from_json(std::string_view text);

}  // namespace kolo
