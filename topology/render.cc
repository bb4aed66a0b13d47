#include "topology/render.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "support/status.h"
#include "topology/bandwidth.h"
#include "topology/paths.h"

namespace kolo {
namespace {

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), v == std::floor(v) ? "%.0f" : "%.1f", v);
  return buf;
}

std::string pad(const std::string& s, size_t width) { return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' '); }

std::string link_label(const TopoLink& l) {
  std::string what;
  switch (l.kind) {
    case LinkKind::kPcie: what = l.gen > 0 ? str_cat("PCIe", l.gen) : "PCIe"; break;
    case LinkKind::kNvLink: what = l.gen > 0 ? str_cat("NVLink", l.gen) : "NVLink"; break;
    case LinkKind::kC2C: what = "C2C"; break;
    case LinkKind::kInterSocket: what = "inter-socket"; break;
    case LinkKind::kNet: what = "net"; break;
  }
  if (l.width > 0 && l.kind != LinkKind::kNet) what += str_cat(" x", l.width);
  return what + (l.bw_gbs > 0 ? str_cat(" ", fmt(l.bw_gbs), " GB/s") : " ? GB/s");
}

// The CPU a device hangs off: the closest CPU by path.
int home_cpu(const HostTopology& topo, const PathTable& paths, int n) {
  int best = -1;
  for (int c : topo.of_kind(NodeKind::kCpu)) {
    if (best < 0 || paths.path(n, c).type < paths.path(n, best).type ||
        (paths.path(n, c).type == paths.path(n, best).type && paths.path(n, c).hops < paths.path(n, best).hops)) {
      best = c;
    }
  }
  return best;
}

// Its name, or "no CPU" for a topology without one (a file may describe only devices).
std::string home_cpu_name(const HostTopology& topo, const PathTable& paths, int n) {
  int cpu = home_cpu(topo, paths, n);
  return cpu >= 0 ? topo.node(cpu).name : std::string("no CPU");
}

// NVLinks a GPU has toward another (directly, or into the NVSwitch), for "NV#".
int nvlink_count(const HostTopology& topo, int a, int b) {
  int direct = 0, a_fabric = 0, b_fabric = 0;
  for (int l : topo.links_of(a)) {
    const TopoLink& link = topo.links()[l];
    if (link.kind != LinkKind::kNvLink) continue;
    int other = link.a == a ? link.b : link.a;
    if (other == b) direct += link.width;
    if (topo.node(other).kind == NodeKind::kNvSwitch) a_fabric += link.width;
  }
  for (int l : topo.links_of(b)) {
    const TopoLink& link = topo.links()[l];
    int other = link.a == b ? link.b : link.a;
    if (link.kind == LinkKind::kNvLink && topo.node(other).kind == NodeKind::kNvSwitch) b_fabric += link.width;
  }
  return direct > 0 ? direct : std::min(a_fabric, b_fabric);
}

std::string nic_speed(const TopoNode& n) {
  std::string s = n.port_gbps > 0 ? str_cat(n.ports > 1 ? str_cat(n.ports, "x") : "", fmt(n.port_gbps), " Gb/s")
                                  : "speed unknown";
  return s;
}

// Names come from files, which are untrusted: keep quotes and backslashes out of DOT.
std::string dot_safe(std::string s) {
  for (char& c : s) {
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = '_';
  }
  return s;
}

int level(NodeKind kind) {
  switch (kind) {
    case NodeKind::kCpu: return 0;
    case NodeKind::kPciSwitch: return 1;
    case NodeKind::kGpu: case NodeKind::kNic: return 2;
    case NodeKind::kNvSwitch: case NodeKind::kNetwork: return 3;
  }
  return 0;
}

// Sockets and cores over the CPU (NUMA) nodes.
std::pair<size_t, int> count_cpus(const HostTopology& topo, const std::vector<int>& cpus) {
  std::set<int> sockets;
  int cores = 0;
  for (int c : cpus) {
    sockets.insert(topo.node(c).socket);
    cores += topo.node(c).cores;
  }
  return {sockets.size(), cores};
}

}  // namespace

std::string topology_summary(const HostTopology& topo) {
  PathTable paths(topo);
  std::string out = str_cat("host ", topo.host, (topo.sources.empty() ? "" : " (from " + topo.sources + ")"), "\n");
  std::vector<int> cpus = topo.of_kind(NodeKind::kCpu);
  auto [sockets, cores] = count_cpus(topo, cpus);
  out += str_cat("CPUs: ", sockets, " socket(s), ", cpus.size(), " NUMA node(s), ", cores, " cores\n");
  for (int c : cpus) {
    const TopoNode& n = topo.node(c);
    out += str_cat("  ", pad(n.name, 8), "NUMA ", n.index, ", socket ", n.socket, ", ", n.cores, " cores",
                   n.model.empty() ? "" : ", " + n.model, "\n");
  }
  for (const TopoLink& l : topo.links()) {
    if (l.kind == LinkKind::kInterSocket) {
      out += str_cat("  ", topo.node(l.a).name, " <-> ", topo.node(l.b).name, ": ", link_label(l), "\n");
    }
  }
  std::vector<int> gpus = topo.of_kind(NodeKind::kGpu);
  out += str_cat("GPUs: ", gpus.size(), gpus.empty() ? " (no CUDA device found)" : "", "\n");
  for (int g : gpus) {
    const TopoNode& n = topo.node(g);
    int up = -1;
    for (int l : topo.links_of(g)) {
      if (topo.links()[l].kind == LinkKind::kPcie) up = l;
    }
    out += str_cat("  ", pad(n.name, 8), pad(n.bus_id, 14), n.model.empty() ? "GPU" : n.model,
                   n.sm > 0 ? str_cat(" sm", n.sm) : "", up >= 0 ? ", " + link_label(topo.links()[up]) : "",
                   ", on ", home_cpu_name(topo, paths, g), "\n");
  }
  std::vector<int> nics = topo.of_kind(NodeKind::kNic);
  out += str_cat("NICs: ", nics.size(), "\n");
  for (int c : nics) {
    const TopoNode& n = topo.node(c);
    out += str_cat("  ", pad(n.name, 8), pad(n.bus_id, 14), n.link_layer.empty() ? "" : n.link_layer + ", ",
                   nic_speed(n), n.gdr.empty() ? "" : ", GPUDirect RDMA (" + n.gdr + ")", ", on ",
                   home_cpu_name(topo, paths, c), "\n");
  }
  out += str_cat("PCIe switches: ", topo.of_kind(NodeKind::kPciSwitch).size(),
                 "; NVSwitch: ", topo.of_kind(NodeKind::kNvSwitch).empty() ? "no" : "yes", "\n");
  return out;
}

std::string topology_one_line(const HostTopology& topo) {
  std::vector<int> cpus = topo.of_kind(NodeKind::kCpu);
  auto [sockets, cores] = count_cpus(topo, cpus);
  std::string out = str_cat(topo.host, ": ", sockets, " socket(s), ", cpus.size(), " NUMA, ", cores, " cores");
  std::vector<int> gpus = topo.of_kind(NodeKind::kGpu);
  if (!gpus.empty()) {
    const TopoNode& g = topo.node(gpus[0]);
    out += str_cat(", ", gpus.size(), " GPU(s) ", g.model.empty() ? "" : g.model + " ", g.sm > 0 ? str_cat("sm", g.sm) : "");
    if (gpus.size() > 1) {
      Path p = paths_from(topo, gpus[0])[gpus[1]];
      out += str_cat(" (", path_type_name(p.type), " ", fmt(p.bw_gbs), " GB/s)");
    }
  }
  std::map<std::string, int> kinds;
  for (int n : topo.of_kind(NodeKind::kNic)) {
    const TopoNode& nic = topo.node(n);
    kinds[nic_speed(nic) + (nic.link_layer.empty() ? "" : " " + nic.link_layer) + (nic.gdr.empty() ? "" : " GDR")]++;
  }
  for (auto& [what, count] : kinds) out += str_cat(", ", count, " NIC(s) ", what);
  return out;
}

std::string topology_matrix(const HostTopology& topo) {
  PathTable paths(topo);
  std::vector<int> devs = topo.of_kind(NodeKind::kGpu);
  std::vector<int> nics = topo.of_kind(NodeKind::kNic);
  devs.insert(devs.end(), nics.begin(), nics.end());
  if (devs.empty()) return "no GPU or NIC: no matrix\n";
  auto label = [&](int n) {
    // Column names as nvidia-smi topo -m writes them.
    if (topo.node(n).kind == NodeKind::kGpu) {
      int i = topo.node(n).index;
      return i >= 0 ? str_cat("GPU", i) : topo.node(n).name;
    }
    return str_cat("NIC", std::find(nics.begin(), nics.end(), n) - nics.begin());
  };
  std::string head = pad("", 8), types, bws;
  for (int d : devs) head += pad(label(d), 8);
  types = head + "NUMA affinity\n";
  bws = "Bottleneck bandwidth, GB/s per direction (? = a link on the path has no known figure):\n" + head + "\n";
  for (int a : devs) {
    types += pad(label(a), 8);
    bws += pad(label(a), 8);
    for (int b : devs) {
      const Path& p = paths.path(a, b);
      std::string t = a == b ? "X" : path_type_name(p.type);
      if (p.type == PathType::kNvl && topo.node(a).kind == NodeKind::kGpu && topo.node(b).kind == NodeKind::kGpu) {
        t = str_cat("NV", nvlink_count(topo, a, b));
      }
      types += pad(t, 8);
      bws += pad(a == b ? "X" : p.bw_gbs > 0 ? fmt(p.bw_gbs) : "?", 8);
    }
    int cpu = home_cpu(topo, paths, a);
    types += (cpu >= 0 ? std::to_string(topo.node(cpu).index) : std::string("?")) + "\n";
    bws += "\n";
  }
  std::string out = types + "\n" + bws;
  if (!topo.of_kind(NodeKind::kGpu).empty() && !nics.empty()) {
    out += "\nNearest NICs:\n";
    for (int g : topo.of_kind(NodeKind::kGpu)) {
      out += "  " + pad(topo.node(g).name, 8);
      for (int n : paths.nearest_nics(g)) out += str_cat(topo.node(n).name, " (", path_type_name(paths.path(g, n).type), ") ");
      out += "\n";
    }
  }
  out += "\nLegend:\n  X = self, NV# = NVLink (# links), NVB = NVLink through a GPU, C2C = NVLink-C2C,\n"
         "  PIX = one PCIe switch, PXB = several PCIe switches, PHB = through a CPU's host bridge,\n"
         "  SYS = across the inter-socket interconnect\n";
  if (!nics.empty()) {
    out += "NIC legend:\n";
    for (size_t i = 0; i < nics.size(); ++i) out += str_cat("  NIC", i, ": ", topo.node(nics[i]).name, "\n");
  }
  return out;
}

std::string topology_dot(const HostTopology& topo) {
  std::string out = "graph topology {\n  graph [label=\"" + dot_safe(topo.host) + "\", fontname=Helvetica, rankdir=LR, nodesep=0.15, ranksep=1.2];\n"
                    "  node [fontname=Helvetica, fontsize=10, style=filled];\n  edge [fontname=Helvetica, fontsize=8];\n";
  for (size_t i = 0; i < topo.nodes().size(); ++i) {
    const TopoNode& n = topo.node(static_cast<int>(i));
    std::string shape, color, text = dot_safe(n.name);
    switch (n.kind) {
      case NodeKind::kCpu: shape = "box"; color = "lightsteelblue"; text += str_cat("\\nNUMA ", n.index, ", ", n.cores, " cores"); break;
      case NodeKind::kPciSwitch: shape = "ellipse"; color = "gray90"; text += "\\nPCIe switch"; break;
      case NodeKind::kGpu: shape = "box"; color = "palegreen"; if (!n.model.empty()) text += "\\n" + dot_safe(n.model); break;
      case NodeKind::kNic: shape = "hexagon"; color = "lightgoldenrod"; text += "\\n" + nic_speed(n); break;
      case NodeKind::kNvSwitch: shape = "octagon"; color = "darkseagreen"; text += "\\nNVSwitch fabric"; break;
      case NodeKind::kNetwork: shape = "doublecircle"; color = "white"; text = "network"; break;
    }
    out += str_cat("  n", i, " [label=\"", text, "\", shape=", shape, ", fillcolor=", color, "];\n");
  }
  // Keep each PCIe switch with the devices under it, CPUs in one column, fabrics in another:
  // dot then draws the tree without crossings.
  for (int sw : topo.of_kind(NodeKind::kPciSwitch)) {
    std::string members;
    for (int l : topo.links_of(sw)) {
      const TopoLink& link = topo.links()[l];
      int other = link.a == sw ? link.b : link.a;
      NodeKind k = topo.node(other).kind;
      if (link.kind == LinkKind::kPcie && (k == NodeKind::kGpu || k == NodeKind::kNic)) members += str_cat(" n", other, ";");
    }
    if (!members.empty()) out += str_cat("  subgraph cluster_", sw, " { style=\"rounded,dashed\"; color=gray70; label=\"\"; n", sw, ";", members, " }\n");
  }
  for (NodeKind kind : {NodeKind::kCpu, NodeKind::kNvSwitch}) {
    std::string same;
    for (int n : topo.of_kind(kind)) same += str_cat(" n", n, ";");
    if (kind == NodeKind::kNvSwitch) {
      for (int n : topo.of_kind(NodeKind::kNetwork)) same += str_cat(" n", n, ";");
    }
    if (!same.empty()) out += "  { rank=same;" + same + " }\n";
  }
  for (const TopoLink& l : topo.links()) {
    const char* color = l.kind == LinkKind::kNvLink ? "forestgreen" : l.kind == LinkKind::kPcie ? "gray30"
                        : l.kind == LinkKind::kNet   ? "goldenrod4" : "steelblue";
    double pen = l.bw_gbs > 0 ? std::clamp(std::log2(l.bw_gbs) / 2.0, 1.0, 5.0) : 1.0;
    // Upper end first (CPU, then switches, devices, fabrics), so dot lays CPUs out on the left.
    bool flip = level(topo.node(l.b).kind) < level(topo.node(l.a).kind);
    out += str_cat("  n", flip ? l.b : l.a, " -- n", flip ? l.a : l.b, " [label=\"", link_label(l), "\", color=", color, ", penwidth=", fmt(pen),
                   l.kind == LinkKind::kInterSocket ? ", constraint=false" : "", "];\n");
  }
  return out + "}\n";
}

}  // namespace kolo
