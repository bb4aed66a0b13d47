// Paths between the devices of a host, typed as NCCL types them (LOC, NVL, NVB, C2C,
// PIX, PXB, PHB, SYS, NET) with the bottleneck bandwidth of the best path, and each
// GPU's nearest NICs. The planner reads these; kolo-topo prints them.
#pragma once

#include <string>
#include <vector>

#include "topology/graph.h"

namespace kolo {

// Ordered from closest to farthest, as NCCL orders its PATH_* values.
enum class PathType : int {
  kLoc,  // the same device
  kNvl,  // NVLink, directly or through NVSwitch
  kNvb,  // NVLink through one intermediate GPU
  kC2C,  // NVLink-C2C (Grace Hopper CPU <-> GPU)
  kPix,  // through at most one PCIe switch
  kPxb,  // through several PCIe switches, not through a CPU
  kPhb,  // through a PCIe host bridge (a CPU)
  kSys,  // across the inter-socket interconnect (UPI, xGMI)
  kNet,  // across the network (another host)
  kDis,  // no path
};

const char* path_type_name(PathType type);

struct Path {
  PathType type = PathType::kDis;
  double bw_gbs = 0;  // bottleneck GB/s per direction; 0 = a link on it has no known figure
  double latency_us = 0;
  int hops = 0;
};

// Paths from one node to every node: for each, the closest path type and the widest path
// of that type. GPUs forward only NVLink to NVLink (at most one: NVB); NICs and the
// network node never forward; a path crosses at most two CPUs.
std::vector<Path> paths_from(const HostTopology& topo, int source);

// All pairs, each row computed when first asked for (big files cost only what is shown).
class PathTable {
 public:
  explicit PathTable(const HostTopology& topo) : topo_(topo), paths_(topo.nodes().size()) {}
  const Path& path(int from, int to) const {
    if (paths_[from].empty()) paths_[from] = paths_from(topo_, from);
    return paths_[from][to];
  }
  // NICs with the closest path type from this GPU, widest first (ties all returned).
  std::vector<int> nearest_nics(int gpu) const;

 private:
  const HostTopology& topo_;
  mutable std::vector<std::vector<Path>> paths_;
};

// A path between devices on two hosts: NET, limited by the slower side's best NIC
// (the NIC's port speed and the device's path to it).
Path cluster_path(const ClusterTopology& cluster, int host_a, int node_a, int host_b, int node_b);

}  // namespace kolo
