#include "topology/nccl_xml.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <string>

#include "topology/bandwidth.h"

#ifdef KOLO_HAVE_PUGIXML
#include <pugixml.hpp>
#endif

namespace kolo {

#ifndef KOLO_HAVE_PUGIXML

Result<HostTopology> topology_from_nccl_xml(std::string_view) {
  return error(Code::kUnsupported, "this kolo was built without pugixml: NCCL topology XML cannot be read");
}

#else

namespace {

constexpr int kMaxDepth = 64;
constexpr size_t kMaxNodes = 4096;

struct PendingNvLink {
  int gpu;
  std::string target;
  int count;
  long tclass;
  int line;
};

class Importer {
 public:
  explicit Importer(std::string_view text) : text_(text) {}

  Result<HostTopology> run(const pugi::xml_document& doc) {
    pugi::xml_node system = doc.child("system");
    if (!system) return error(Code::kInvalidArgument, "NCCL XML: no <system> element");
    topo_.sources = "nccl-xml";
    network_ = topo_.add_node(TopoNode{NodeKind::kNetwork, "net"});
    std::vector<int> cpus;
    for (pugi::xml_node cpu : system.children("cpu")) {
      TopoNode node{NodeKind::kCpu};
      KOLO_TRY(read_int(cpu, "numaid", -1, 1 << 20, &node.index));
      if (node.index < 0) node.index = static_cast<int>(cpus.size());
      node.name = topo_.find(str_cat("cpu", node.index)) < 0 ? str_cat("cpu", node.index) : topo_.fresh_name("cpu");
      node.model = cpu.attribute("vendor").as_string();
      node.socket = node.index;
      int id = topo_.add_node(node);
      // NCCL's XML does not name the interconnect: guess it from the CPU, as NCCL does.
      TopoLink upi{-1, id, LinkKind::kInterSocket};
      guess_inter_socket(cpu.attribute("vendor").as_string(), std::strtol(cpu.attribute("familyid").as_string(), nullptr, 0),
                         std::strtol(cpu.attribute("modelid").as_string(), nullptr, 0), &upi.gen, &upi.width);
      for (int other : cpus) {
        upi.a = other;
        topo_.add_link(upi);
      }
      cpus.push_back(id);
      KOLO_TRY(walk(cpu, id, id, 1));
    }
    KOLO_TRY(add_nvlinks());
    return std::move(topo_);
  }

 private:
  int line_of(const pugi::xml_node& node) const {
    ptrdiff_t offset = node.offset_debug();
    if (offset < 0 || static_cast<size_t>(offset) > text_.size()) return 0;
    return 1 + static_cast<int>(std::count(text_.begin(), text_.begin() + offset, '\n'));
  }

  Status bad(const pugi::xml_node& node, const std::string& what) const {
    return error(Code::kInvalidArgument, "NCCL XML line ", line_of(node), ": <", node.name(), "> ", what);
  }

  // An optional integer attribute (decimal, or hex with 0x); absent leaves *out alone.
  Status read_long(const pugi::xml_node& node, const char* name, long lo, long hi, long* out) const {
    pugi::xml_attribute attr = node.attribute(name);
    if (!attr) return Status();
    const char* text = attr.value();
    errno = 0;
    char* end = nullptr;
    long v = std::strtol(text, &end, 0);
    if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) {
      return bad(node, str_cat("attribute ", name, "='", text, "' is not an integer in [", lo, ", ", hi, "]"));
    }
    *out = v;
    return Status();
  }
  Status read_int(const pugi::xml_node& node, const char* name, int lo, int hi, int* out) const {
    long v = *out;
    KOLO_TRY(read_long(node, name, lo, hi, &v));
    *out = static_cast<int>(v);
    return Status();
  }

  Status add_node_checked(TopoNode node, int* id) {
    if (topo_.nodes().size() >= kMaxNodes) return error(Code::kInvalidArgument, "NCCL XML: more than ", kMaxNodes, " devices");
    *id = topo_.add_node(std::move(node));
    return Status();
  }

  Status walk(const pugi::xml_node& parent, int parent_id, int cpu, int depth) {
    if (depth > kMaxDepth) return bad(parent, str_cat("nested deeper than ", kMaxDepth));
    for (pugi::xml_node child : parent.children()) {
      std::string tag = child.name();
      if (tag == "pci") {
        KOLO_TRY(add_pci(child, parent_id, cpu, depth));
      } else if (tag == "nic") {
        KOLO_TRY(add_nets(child, parent_id, TopoLink{-1, -1, LinkKind::kPcie}));
      }
    }
    return Status();
  }

  Status add_pci(const pugi::xml_node& pci, int parent_id, int cpu, int depth) {
    long cls = 0;
    KOLO_TRY(read_long(pci, "class", 0, 0xffffff, &cls));
    TopoLink up{-1, parent_id, LinkKind::kPcie};
    KOLO_TRY(read_int(pci, "link_width", 0, 32, &up.width));
    std::string speed = pci.attribute("link_speed").as_string();
    if (!speed.empty()) {
      char* end = nullptr;
      double gts = std::strtod(speed.c_str(), &end);
      if (end == speed.c_str()) return bad(pci, str_cat("attribute link_speed='", speed, "' does not start with a number"));
      up.gen = pcie_gen_for_gts(gts);
    }
    std::string busid = pci.attribute("busid").as_string();
    if (busid.size() > 64) return bad(pci, "attribute busid is too long");
    if (pugi::xml_node gpu = pci.child("gpu")) {
      TopoNode node{NodeKind::kGpu};
      node.bus_id = busid;
      KOLO_TRY(read_int(gpu, "dev", 0, 1 << 20, &node.index));
      KOLO_TRY(read_int(gpu, "sm", 0, 10000, &node.sm));
      node.name = topo_.fresh_name("gpu");
      int id = -1;
      KOLO_TRY(add_node_checked(node, &id));
      up.a = id;
      topo_.add_link(up);
      for (pugi::xml_node nv : gpu.children("nvlink")) {
        PendingNvLink p{id, nv.attribute("target").as_string(), 0, 0, line_of(nv)};
        KOLO_TRY(read_int(nv, "count", 0, 1024, &p.count));
        KOLO_TRY(read_long(nv, "tclass", 0, 0xffffff, &p.tclass));
        pending_.push_back(std::move(p));
      }
      return Status();
    }
    if (pugi::xml_node nic = pci.child("nic")) return add_nets(nic, parent_id, up, busid);
    if ((cls >> 8) == 0x0604) {  // a PCI bridge: a switch (port), as NCCL counts them
      TopoNode node{NodeKind::kPciSwitch};
      node.bus_id = busid;
      node.name = topo_.fresh_name("sw");
      int id = -1;
      KOLO_TRY(add_node_checked(node, &id));
      up.a = id;
      topo_.add_link(up);
      return walk(pci, id, cpu, depth + 1);
    }
    return Status();  // storage, NVSwitch management functions, ...: not part of the model
  }

  Status add_nets(const pugi::xml_node& nic, int parent_id, TopoLink up, const std::string& busid = "") {
    up.b = parent_id;
    for (pugi::xml_node net : nic.children("net")) {
      TopoNode node{NodeKind::kNic};
      node.bus_id = busid;
      node.name = net.attribute("name").as_string();
      if (node.name.empty() || node.name.size() > 64 || topo_.find(node.name) >= 0) node.name = topo_.fresh_name("nic");
      long speed = 0;  // Mb/s
      KOLO_TRY(read_long(net, "speed", 0, 100000000, &speed));
      node.port_gbps = speed / 1000.0;
      node.ports = 1;
      int gdr = 0;
      KOLO_TRY(read_int(net, "gdr", 0, 1, &gdr));
      if (gdr) node.gdr = "nvidia_peermem";
      node.index = static_cast<int>(topo_.of_kind(NodeKind::kNic).size());
      int id = -1;
      KOLO_TRY(add_node_checked(node, &id));
      up.a = id;
      topo_.add_link(up);
      topo_.add_link(TopoLink{id, network_, LinkKind::kNet, 0, 1, net_gbs(node.port_gbps)});
    }
    return Status();
  }

  // NCCL lists one <nvlink> per remote chip (six NVSwitches on a DGX A100) and each GPU
  // pair from both sides; kolo wants one link per pair with the links summed.
  Status add_nvlinks() {
    int nvswitch = -1;
    std::map<std::pair<int, int>, int> count;
    for (const PendingNvLink& p : pending_) {
      int target;
      if ((p.tclass >> 8) == 0x0680) {  // NVSwitch: all of them are one node, as in NCCL
        if (nvswitch < 0) nvswitch = topo_.add_node(TopoNode{NodeKind::kNvSwitch, "nvswitch"});
        target = nvswitch;
      } else {
        target = topo_.find_bus(p.target);
        if (target < 0 || topo_.node(target).kind != NodeKind::kGpu) {
          return error(Code::kInvalidArgument, "NCCL XML line ", p.line, ": <nvlink> target='", p.target,
                       "' is not the busid of a GPU in this file");
        }
        if (target == p.gpu) return error(Code::kInvalidArgument, "NCCL XML line ", p.line, ": <nvlink> to its own GPU");
      }
      count[{p.gpu, target}] += p.count;
    }
    for (auto [pair, links] : count) {
      auto [gpu, target] = pair;
      bool gpu_pair = topo_.node(target).kind == NodeKind::kGpu;
      if (gpu_pair && target < gpu && count.count({target, gpu})) continue;  // the other side said it
      int gen = nvlink_gen_for_sm(topo_.node(gpu).sm);
      topo_.add_link(TopoLink{gpu, target, LinkKind::kNvLink, gen, std::min(links, 1024)});
    }
    return Status();
  }

  std::string_view text_;
  HostTopology topo_;
  int network_ = -1;
  std::vector<PendingNvLink> pending_;
};

}  // namespace

Result<HostTopology> topology_from_nccl_xml(std::string_view text) {
  pugi::xml_document doc;
  pugi::xml_parse_result parsed = doc.load_buffer(text.data(), text.size());
  if (!parsed) {
    size_t offset = std::min(static_cast<size_t>(std::max<ptrdiff_t>(parsed.offset, 0)), text.size());
    int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + offset, '\n'));
    return error(Code::kInvalidArgument, "NCCL XML line ", line, ": ", parsed.description());
  }
  return Importer(text).run(doc);
}

#endif

}  // namespace kolo
