// HCAs and network interfaces from sysfs (what ibv_query_port reports is there too), and
// whether GPUDirect RDMA can work: nvidia_peermem loaded, or dma-buf registration in the
// installed libibverbs (looked up with dlopen, so libibverbs is never required).
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

#include "topology/bandwidth.h"
#include "topology/discover_sources.h"

namespace kolo::discovery {
namespace {

namespace fs = std::filesystem;

bool looks_like_bdf(const std::string& s) { return s.size() == 12 && s[4] == ':' && s[7] == ':' && s[10] == '.'; }

// The PCI address behind a class device ("/sys/class/net/eth0" -> "0000:00:03.0"); virtio
// puts a virtioN device between the two.
std::string pci_bus_of(const fs::path& class_dev) {
  std::error_code ec;
  fs::path dev = fs::canonical(class_dev / "device", ec);
  if (ec) return "";
  for (int up = 0; up < 2 && !dev.empty(); ++up, dev = dev.parent_path()) {
    if (looks_like_bdf(dev.filename().string())) return dev.filename().string();
  }
  return "";
}

std::string gdr_support() {
  std::error_code ec;
  if (fs::exists("/sys/module/nvidia_peermem", ec) || fs::exists("/sys/kernel/mm/memory_peers/nv_mem", ec)) {
    return "nvidia_peermem";
  }
  if (!fs::exists("/sys/module/nvidia", ec)) return "";
  void* verbs = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (verbs == nullptr) return "";
  bool dmabuf = dlsym(verbs, "ibv_reg_dmabuf_mr") != nullptr;
  dlclose(verbs);
  return dmabuf ? "dma-buf" : "";
}

int nic_for(HostTopology* topo, const std::string& bus, const std::string& name) {
  int n = topo->find_bus(bus);
  if (n >= 0) return topo->node(n).kind == NodeKind::kNic ? n : -1;
  // Not in the PCI tree hwloc gave us: hang it off its CPU with an unknown link.
  TopoNode node{NodeKind::kNic, topo->find(name) < 0 ? name : topo->fresh_name("nic"), bus};
  node.index = static_cast<int>(topo->of_kind(NodeKind::kNic).size());
  n = topo->add_node(node);
  int gen = 0, width = 0;
  pci_link(bus, &gen, &width);
  topo->add_link(TopoLink{n, cpu_for_bus(*topo, bus), LinkKind::kPcie, gen, width});
  return n;
}

void add_hcas(HostTopology* topo) {
  std::error_code ec;
  std::string gdr = topo->of_kind(NodeKind::kGpu).empty() ? "" : gdr_support();
  for (const auto& entry : fs::directory_iterator("/sys/class/infiniband", ec)) {
    std::string bus = pci_bus_of(entry.path());
    std::string name = entry.path().filename().string();
    int n = bus.empty() ? -1 : nic_for(topo, bus, name);
    if (n < 0) continue;
    TopoNode& nic = topo->node(n);
    if (topo->find(name) < 0) nic.name = name;
    nic.ports = 0;
    for (const auto& port : fs::directory_iterator(entry.path() / "ports", ec)) {
      ++nic.ports;
      // "400 Gb/sec (4X NDR)"
      double rate = std::atof(read_line((port.path() / "rate").string()).c_str());
      if (rate > nic.port_gbps) nic.port_gbps = rate;
      std::string layer = read_line((port.path() / "link_layer").string());
      if (!layer.empty()) nic.link_layer = layer;
    }
    nic.gdr = gdr;
  }
}

void add_netdevs(HostTopology* topo) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/sys/class/net", ec)) {
    std::string bus = pci_bus_of(entry.path());
    if (bus.empty()) continue;  // lo, bridges, veths, ifb: not hardware
    std::string name = entry.path().filename().string();
    int n = nic_for(topo, bus, name);
    if (n < 0) continue;
    TopoNode& nic = topo->node(n);
    if (!nic.link_layer.empty()) continue;  // an HCA's netdev (ib0, or RoCE): verbs said it all
    nic.link_layer = read_line((entry.path() / "type").string()) == "32" ? "InfiniBand" : "Ethernet";
    nic.ports = 1;
    // Mb/s; virtio and down links report -1 or nothing: unknown.
    double mbps = std::atof(read_line((entry.path() / "speed").string()).c_str());
    if (mbps > 0) nic.port_gbps = mbps / 1000.0;
  }
}

}  // namespace

void add_nics(HostTopology* topo) {
  add_hcas(topo);
  add_netdevs(topo);
  std::vector<int> nics = topo->of_kind(NodeKind::kNic);
  if (nics.empty()) return;
  int net = topo->find("net");
  if (net < 0) net = topo->add_node(TopoNode{NodeKind::kNetwork, "net"});
  for (int n : nics) {
    const TopoNode& nic = topo->node(n);
    topo->add_link(TopoLink{n, net, LinkKind::kNet, 0, std::max(1, nic.ports), net_gbs(nic.port_gbps * std::max(1, nic.ports))});
  }
}

}  // namespace kolo::discovery
