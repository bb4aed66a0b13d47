// The topology of this host: read from KOLO_TOPO_FILE when set, otherwise discovered
// (hwloc, CUDA, NVML, sysfs/ibverbs; each optional), and written to KOLO_TOPO_DUMP_FILE
// when set. On a machine without GPUs or HCAs this returns CPUs, NUMA nodes and NICs.
#pragma once

#include <string>

#include "support/status.h"
#include "topology/graph.h"

namespace kolo {

// Discovery alone (ignores the environment). Never fails: what a source cannot see is absent.
HostTopology discover_machine();
// KOLO_TOPO_FILE, or discovery; then KOLO_TOPO_DUMP_FILE. Errors only for a bad file.
Result<HostTopology> host_topology();

// A kolo JSON file or an NCCL topology XML file (told apart by the first character).
Result<HostTopology> load_topology_file(const std::string& path);
Status save_topology_file(const HostTopology& topo, const std::string& path);

}  // namespace kolo
