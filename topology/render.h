// Ways to show a topology to a person: a summary, a one-line summary (for the log), a
// GPU/NIC matrix in the manner of `nvidia-smi topo -m`, and Graphviz DOT.
#pragma once

#include <string>

#include "topology/graph.h"

namespace kolo {

std::string topology_summary(const HostTopology& topo);
std::string topology_one_line(const HostTopology& topo);
// Path types (NV# for NVLink, as nvidia-smi writes it), bottleneck bandwidths, nearest NICs.
std::string topology_matrix(const HostTopology& topo);
std::string topology_dot(const HostTopology& topo);

}  // namespace kolo
