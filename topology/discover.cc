#include "topology/discover.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/env.h"
#include "support/log.h"
#include "topology/bandwidth.h"
#include "topology/discover_sources.h"
#include "topology/host_identity.h"
#include "topology/json_format.h"
#include "topology/nccl_xml.h"

namespace kolo {

namespace discovery {

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

void pci_link(const std::string& bus_id, int* gen, int* width) {
  std::string dir = "/sys/bus/pci/devices/" + bus_id + "/";
  // "32.0 GT/s PCIe"; virtual devices have no PCIe capability and say "Unknown" or nothing.
  double gts = std::atof(read_line(dir + "current_link_speed").c_str());
  *gen = pcie_gen_for_gts(gts);
  *width = std::atoi(read_line(dir + "current_link_width").c_str());
  if (*width < 0 || *width > 32) *width = 0;
}

int cpu_for_bus(const HostTopology& topo, const std::string& bus_id) {
  std::vector<int> cpus = topo.of_kind(NodeKind::kCpu);
  if (cpus.empty()) return -1;
  int numa = std::atoi(read_line("/sys/bus/pci/devices/" + bus_id + "/numa_node").c_str());
  for (int c : cpus) {
    if (topo.node(c).index == numa) return c;
  }
  return cpus[0];
}

void add_cpus_from_sysfs(HostTopology* topo) {
  std::error_code ec;
  std::vector<int> ids;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/devices/system/node", ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("node", 0) == 0 && name.size() > 4 && std::isdigit(static_cast<unsigned char>(name[4]))) {
      ids.push_back(std::atoi(name.c_str() + 4));
    }
  }
  if (ids.empty()) ids.push_back(0);
  std::sort(ids.begin(), ids.end());
  for (int id : ids) {
    TopoNode node{NodeKind::kCpu, "cpu" + std::to_string(id)};
    node.index = id;
    if (ids.size() == 1) node.cores = static_cast<int>(std::thread::hardware_concurrency());
    int n = topo->add_node(node);
    for (int other : topo->of_kind(NodeKind::kCpu)) {
      if (other != n) topo->add_link(TopoLink{other, n, LinkKind::kInterSocket});
    }
  }
}

}  // namespace discovery

HostTopology discover_machine() {
  HostTopology topo;
  topo.host = host_identity();
  std::string sources;
  if (discovery::add_hwloc(&topo)) {
    sources = "hwloc";
  } else {
    discovery::add_cpus_from_sysfs(&topo);
    sources = "sysfs";
  }
  std::string gpus = discovery::add_gpus(&topo);
  if (!gpus.empty()) sources += "," + gpus;
  discovery::add_nics(&topo);
  if (sources.find("sysfs") == std::string::npos) sources += ",sysfs";
  topo.sources = sources;
  return topo;
}

Result<HostTopology> load_topology_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error(Code::kInvalidArgument, "cannot open topology file '", path, "'");
  std::ostringstream text;
  text << in.rdbuf();
  std::string body = text.str();
  size_t first = body.find_first_not_of(" \t\r\n");
  bool xml = first != std::string::npos && body[first] == '<';
  Result<HostTopology> topo = xml ? topology_from_nccl_xml(body) : topology_from_json(body);
  if (!topo.ok()) return topo.status().with_context(path + ": ");
  if (topo.value().host.empty()) topo.value().host = host_identity();
  topo.value().sources = "file:" + path;
  return topo;
}

Status save_topology_file(const HostTopology& topo, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << topology_to_json(topo);
  out.close();
  if (!out) return error(Code::kSystem, "cannot write topology file '", path, "'");
  return Status();
}

Result<HostTopology> host_topology() {
  std::string file = env_string("KOLO_TOPO_FILE");
  Result<HostTopology> topo = file.empty() ? Result<HostTopology>(discover_machine()) : load_topology_file(file);
  if (!topo.ok()) return topo.status().with_context("KOLO_TOPO_FILE: ");
  std::string dump = env_string("KOLO_TOPO_DUMP_FILE");
  if (!dump.empty()) {
    Status saved = save_topology_file(topo.value(), dump);
    if (!saved.ok()) log_warn(Subsys::kTopo, saved.message());  // a dump is a convenience, not a reason to fail
  }
  return topo;
}

}  // namespace kolo
