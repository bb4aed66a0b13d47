#include <cstdio>
#include <cstdlib>
#include <map>

#include "support/log.h"
#include "topology/bandwidth.h"
#include "topology/discover_sources.h"

#ifdef KOLO_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace kolo::discovery {

#ifndef KOLO_HAVE_HWLOC

bool add_hwloc(HostTopology*) { return false; }

#else

namespace {

std::string bus_id_of(hwloc_obj_t obj) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%01x", obj->attr->pcidev.domain, obj->attr->pcidev.bus,
                obj->attr->pcidev.dev, obj->attr->pcidev.func);
  return buf;
}

bool is_gpu(hwloc_obj_t dev) {
  unsigned cls = dev->attr->pcidev.class_id >> 8;
  return dev->attr->pcidev.vendor_id == 0x10de && cls == 0x03;
}
bool is_nic(hwloc_obj_t dev) {
  unsigned cls = dev->attr->pcidev.class_id >> 8;
  return cls == 0x02 || dev->attr->pcidev.class_id == 0x0c06;  // network, or InfiniBand (serial bus)
}

// A device's name as the OS knows it: the verbs name (mlx5_0) before the netdev (eth0).
std::string os_name(hwloc_obj_t dev) {
  std::string net;
  for (hwloc_obj_t c = dev->io_first_child; c != nullptr; c = c->next_sibling) {
    if (c->type != HWLOC_OBJ_OS_DEVICE || c->name == nullptr) continue;
    if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS) return c->name;
    if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && net.empty()) net = c->name;
  }
  return net;
}

class Walker {
 public:
  Walker(hwloc_topology_t hw, HostTopology* topo) : hw_(hw), topo_(topo) {}

  void add_cpus() {
    int count = hwloc_get_nbobjs_by_type(hw_, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < count; ++i) {
      hwloc_obj_t numa = hwloc_get_obj_by_type(hw_, HWLOC_OBJ_NUMANODE, i);
      TopoNode node{NodeKind::kCpu, "cpu" + std::to_string(numa->os_index)};
      node.index = static_cast<int>(numa->os_index);
      hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(hw_, HWLOC_OBJ_PACKAGE, numa);
      if (pkg == nullptr) pkg = hwloc_get_next_obj_covering_cpuset_by_type(hw_, numa->cpuset, HWLOC_OBJ_PACKAGE, nullptr);
      if (pkg != nullptr) {
        node.socket = static_cast<int>(pkg->os_index);
        const char* model = hwloc_obj_get_info_by_name(pkg, "CPUModel");
        if (model != nullptr) node.model = model;
      }
      node.cores = hwloc_get_nbobjs_inside_cpuset_by_type(hw_, numa->cpuset, HWLOC_OBJ_CORE);
      int id = topo_->add_node(node);
      // hwloc does not describe the interconnect: guess it from the CPU between sockets;
      // between NUMA nodes of one package (SNC, NPS) the figure stays unknown.
      TopoLink link{-1, id, LinkKind::kInterSocket};
      for (auto& [other, obj] : cpus_) {
        link.a = other;
        link.gen = link.width = 0;
        if (pkg != nullptr && topo_->node(other).socket != node.socket) {
          const char* vendor = hwloc_obj_get_info_by_name(pkg, "CPUVendor");
          const char* family = hwloc_obj_get_info_by_name(pkg, "CPUFamilyNumber");
          const char* model = hwloc_obj_get_info_by_name(pkg, "CPUModelNumber");
          guess_inter_socket(vendor ? vendor : "", family ? std::atol(family) : 0, model ? std::atol(model) : 0,
                             &link.gen, &link.width);
        }
        topo_->add_link(link);
      }
      cpus_.emplace_back(id, numa);
    }
  }

  void add_pci() {
    for (hwloc_obj_t dev = hwloc_get_next_pcidev(hw_, nullptr); dev != nullptr; dev = hwloc_get_next_pcidev(hw_, dev)) {
      bool gpu = is_gpu(dev);
      if (!gpu && !is_nic(dev)) continue;
      TopoNode node{gpu ? NodeKind::kGpu : NodeKind::kNic};
      node.bus_id = bus_id_of(dev);
      node.name = gpu ? "" : os_name(dev);
      if (node.name.empty() || topo_->find(node.name) >= 0) node.name = topo_->fresh_name(gpu ? "gpu" : "nic");
      if (!gpu) node.index = static_cast<int>(topo_->of_kind(NodeKind::kNic).size());
      int id = topo_->add_node(node);
      TopoLink up{id, parent_of(dev), LinkKind::kPcie};
      pci_link(node.bus_id, &up.gen, &up.width);
      // sysfs knows gen and width; hwloc (from an XML file, say) only their product.
      if (up.gen == 0 && dev->attr->pcidev.linkspeed > 0) up.bw_gbs = dev->attr->pcidev.linkspeed;
      topo_->add_link(up);
    }
  }

 private:
  int cpu_of(hwloc_obj_t obj) {
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(hw_, obj);
    for (auto& [id, numa] : cpus_) {
      if (anc != nullptr && anc->nodeset != nullptr && hwloc_bitmap_intersects(numa->nodeset, anc->nodeset)) return id;
    }
    return cpus_.empty() ? -1 : cpus_[0].first;
  }

  // The node a PCI object hangs off: a switch, or its CPU. Root ports (bridges right
  // under a host bridge) belong to the CPU; a bridge with the same ids as the bridge
  // above it is a downstream port of the same switch.
  int parent_of(hwloc_obj_t obj) {
    hwloc_obj_t parent = obj->parent;
    if (parent == nullptr || parent->type != HWLOC_OBJ_BRIDGE) return cpu_of(obj);
    if (parent->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) return cpu_of(obj);
    hwloc_obj_t grand = parent->parent;
    bool root_port = grand == nullptr || grand->type != HWLOC_OBJ_BRIDGE ||
                     grand->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
    if (root_port) return cpu_of(obj);
    // parent is a switch port; its switch is named after the topmost port with its ids.
    hwloc_obj_t top = parent;
    while (top->parent != nullptr && top->parent->type == HWLOC_OBJ_BRIDGE &&
           top->parent->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI &&
           top->parent->attr->pcidev.vendor_id == top->attr->pcidev.vendor_id &&
           top->parent->attr->pcidev.device_id == top->attr->pcidev.device_id &&
           top->parent->parent != nullptr && top->parent->parent->type == HWLOC_OBJ_BRIDGE &&
           top->parent->parent->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_HOST) {
      top = top->parent;
    }
    auto it = switches_.find(top);
    if (it != switches_.end()) return it->second;
    TopoNode sw{NodeKind::kPciSwitch, topo_->fresh_name("sw")};
    sw.bus_id = bus_id_of(top);
    int id = topo_->add_node(sw);
    switches_[top] = id;
    TopoLink up{id, parent_of(top), LinkKind::kPcie};
    pci_link(sw.bus_id, &up.gen, &up.width);
    if (up.gen == 0 && top->attr->pcidev.linkspeed > 0) up.bw_gbs = top->attr->pcidev.linkspeed;
    topo_->add_link(up);
    return id;
  }

  hwloc_topology_t hw_;
  HostTopology* topo_;
  std::vector<std::pair<int, hwloc_obj_t>> cpus_;
  std::map<hwloc_obj_t, int> switches_;
};

}  // namespace

bool add_hwloc(HostTopology* topo) {
  hwloc_topology_t hw;
  if (hwloc_topology_init(&hw) != 0) return false;
  hwloc_topology_set_io_types_filter(hw, HWLOC_TYPE_FILTER_KEEP_ALL);
#if HWLOC_API_VERSION >= 0x00020100
  // hwloc's GL component asks an X server for its GPUs (connecting to X11 sockets, a few ms
  // per host at every start-up); kolo finds GPUs through CUDA and sysfs. OpenCL likewise.
  hwloc_topology_set_components(hw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "gl");
  hwloc_topology_set_components(hw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "opencl");
#endif
  if (hwloc_topology_load(hw) != 0) {
    hwloc_topology_destroy(hw);
    log_warn(Subsys::kTopo, "hwloc could not load this machine's topology; using sysfs");
    return false;
  }
  Walker walker(hw, topo);
  walker.add_cpus();
  if (topo->of_kind(NodeKind::kCpu).empty()) {
    hwloc_topology_destroy(hw);
    return false;
  }
  walker.add_pci();
  hwloc_topology_destroy(hw);
  return true;
}

#endif

}  // namespace kolo::discovery
