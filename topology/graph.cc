#include "topology/graph.h"

#include "topology/bandwidth.h"

namespace kolo {
namespace {

constexpr const char* kNodeKindNames[] = {"cpu", "pci_switch", "gpu", "nic", "nvswitch", "network"};
constexpr const char* kLinkKindNames[] = {"pcie", "nvlink", "c2c", "inter_socket", "net"};

}  // namespace

const char* node_kind_name(NodeKind kind) { return kNodeKindNames[static_cast<int>(kind)]; }
const char* link_kind_name(LinkKind kind) { return kLinkKindNames[static_cast<int>(kind)]; }

bool parse_node_kind(const std::string& text, NodeKind* kind) {
  for (int k = 0; k < static_cast<int>(std::size(kNodeKindNames)); ++k) {
    if (text == kNodeKindNames[k]) {
      *kind = static_cast<NodeKind>(k);
      return true;
    }
  }
  return false;
}

bool parse_link_kind(const std::string& text, LinkKind* kind) {
  for (int k = 0; k < static_cast<int>(std::size(kLinkKindNames)); ++k) {
    if (text == kLinkKindNames[k]) {
      *kind = static_cast<LinkKind>(k);
      return true;
    }
  }
  return false;
}

int HostTopology::add_node(TopoNode node) {
  nodes_.push_back(std::move(node));
  adjacency_.emplace_back();
  return static_cast<int>(nodes_.size()) - 1;
}

int HostTopology::add_link(TopoLink link) {
  if (link.bw_gbs <= 0) link.bw_gbs = link_bandwidth_gbs(link.kind, link.gen, link.width);
  if (link.latency_us <= 0) link.latency_us = link_latency_us(link.kind);
  int id = static_cast<int>(links_.size());
  links_.push_back(link);
  adjacency_[link.a].push_back(id);
  if (link.b != link.a) adjacency_[link.b].push_back(id);
  return id;
}

int HostTopology::find(const std::string& name) const {
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (nodes_[n].name == name) return static_cast<int>(n);
  }
  return -1;
}

int HostTopology::find_bus(const std::string& bus_id) const {
  if (bus_id.empty()) return -1;
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (nodes_[n].bus_id == bus_id) return static_cast<int>(n);
  }
  return -1;
}

std::vector<int> HostTopology::of_kind(NodeKind kind) const {
  std::vector<int> out;
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (nodes_[n].kind == kind) out.push_back(static_cast<int>(n));
  }
  return out;
}

std::string HostTopology::fresh_name(const std::string& prefix) const {
  for (int i = 0;; ++i) {
    std::string name = prefix + std::to_string(i);
    if (find(name) < 0) return name;
  }
}

}  // namespace kolo
