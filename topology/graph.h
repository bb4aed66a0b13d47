// The machine as a graph: one HostTopology per host (CPUs, PCIe switches, GPUs, NICs,
// NVSwitch, joined by links that carry a bandwidth and a latency), and a ClusterTopology
// that lists the hosts. Discovery, files and fixtures all produce this one structure; the
// planner and kolo-topo only read it.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kolo {

enum class NodeKind : int { kCpu, kPciSwitch, kGpu, kNic, kNvSwitch, kNetwork };
// kInterSocket joins CPU (NUMA) nodes; kNet joins a NIC to the host's network node.
enum class LinkKind : int { kPcie, kNvLink, kC2C, kInterSocket, kNet };

const char* node_kind_name(NodeKind kind);
const char* link_kind_name(LinkKind kind);
bool parse_node_kind(const std::string& text, NodeKind* kind);
bool parse_link_kind(const std::string& text, LinkKind* kind);

struct TopoNode {
  TopoNode() = default;
  explicit TopoNode(NodeKind k, std::string n = "", std::string bus = "")
      : kind(k), name(std::move(n)), bus_id(std::move(bus)) {}
  NodeKind kind = NodeKind::kCpu;
  std::string name;    // unique in the host: "cpu0", "gpu3", "mlx5_0", "sw2", "nvswitch"
  std::string bus_id;  // PCI "0000:17:00.0"; empty when not a PCI device or not known
  std::string model;   // "NVIDIA H100 80GB HBM3", "Intel Xeon Platinum 8480C", ...
  int index = -1;      // CPU: NUMA node id; GPU: CUDA device ordinal; NIC: order found
  int socket = -1;     // CPU: package id
  int cores = 0;       // CPU: cores in this NUMA node
  int sm = 0;          // GPU: compute capability * 10 (90 = Hopper)
  // NIC: speed per port in Gb/s (0 = unknown), port count, link layer, GPUDirect RDMA.
  double port_gbps = 0;
  int ports = 0;
  std::string link_layer;  // "InfiniBand", "Ethernet" or ""
  std::string gdr;         // "nvidia_peermem", "dma-buf" or "" (none)
};

struct TopoLink {
  TopoLink() = default;
  TopoLink(int from, int to, LinkKind k, int g = 0, int w = 0, double bw = 0)
      : a(from), b(to), kind(k), gen(g), width(w), bw_gbs(bw) {}
  int a = -1, b = -1;  // node indices; links are full duplex, figures are per direction
  LinkKind kind = LinkKind::kPcie;
  int gen = 0;    // PCIe or NVLink generation (0 = unknown)
  int width = 0;  // PCIe lanes, NVLink/UPI link count (0 = unknown)
  double bw_gbs = 0;      // GB/s per direction; 0 = unknown
  double latency_us = 0;  // one-way, nominal
};

// Whether GPU a can reach GPU b directly (cudaDeviceCanAccessPeer, cudaDeviceGetP2PAttribute).
struct PeerAccess {
  PeerAccess() = default;
  PeerAccess(int from, int to) : a(from), b(to) {}
  int a = -1, b = -1;  // node indices of the two GPUs
  bool access = false;
  bool atomics = false;
  int perf_rank = 0;  // cudaDevP2PAttrPerformanceRank: lower is better
};

class HostTopology {
 public:
  std::string host;     // host identity or name
  std::string sources;  // what filled it: "hwloc,cuda,nvml,sysfs" or "file:<path>"

  int add_node(TopoNode node);  // returns its index; the name must be unique (not checked)
  // Adds a link; a bandwidth/latency of 0 is filled in from the table in bandwidth.h.
  int add_link(TopoLink link);
  int find(const std::string& name) const;  // -1 when absent
  int find_bus(const std::string& bus_id) const;
  std::vector<int> of_kind(NodeKind kind) const;
  // Links that touch node n (indices into links()).
  const std::vector<int>& links_of(int n) const { return adjacency_[n]; }
  const std::vector<TopoNode>& nodes() const { return nodes_; }
  const std::vector<TopoLink>& links() const { return links_; }
  TopoNode& node(int n) { return nodes_[n]; }
  // A measured figure replaces the nominal one (engine/net_calibration.h).
  void set_link_bandwidth(int link, double gbs) { links_[link].bw_gbs = gbs; }
  const TopoNode& node(int n) const { return nodes_[n]; }
  std::vector<PeerAccess> peers;
  // A name not yet used: prefix followed by the first free number.
  std::string fresh_name(const std::string& prefix) const;

 private:
  std::vector<TopoNode> nodes_;
  std::vector<TopoLink> links_;
  std::vector<std::vector<int>> adjacency_;
};

// All hosts of a job, in the order of their first rank; hosts meet through their NICs.
struct ClusterTopology {
  std::vector<HostTopology> hosts;
};

}  // namespace kolo
