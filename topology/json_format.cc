#include "topology/json_format.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

namespace kolo {
namespace {

// Read with the std::map-backed type (ordered_json is linear per key: slow on hostile
// files); write ordered, so files keep "format" and "version" first, like the fixtures.
using json = nlohmann::json;
using out_json = nlohmann::ordered_json;

// Bounds on what a file may ask for, so a hostile file cannot make us allocate wildly.
constexpr size_t kMaxNodes = 4096;
constexpr size_t kMaxLinks = 65536;
constexpr size_t kMaxString = 1024;
constexpr size_t kMaxHosts = 65536;

// Readers that check the type and range of one optional field; `where` names it.
Status read_string(const json& obj, const char* key, const std::string& where, std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return Status();
  if (!it->is_string()) return error(Code::kInvalidArgument, where, ".", key, ": expected a string");
  const std::string& s = it->get_ref<const std::string&>();
  if (s.size() > kMaxString) return error(Code::kInvalidArgument, where, ".", key, ": longer than ", kMaxString);
  *out = s;
  return Status();
}

Status read_number(const json& obj, const char* key, const std::string& where, double lo, double hi, double* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return Status();
  if (!it->is_number()) return error(Code::kInvalidArgument, where, ".", key, ": expected a number");
  double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) {
    return error(Code::kInvalidArgument, where, ".", key, ": ", v, " is outside [", lo, ", ", hi, "]");
  }
  *out = v;
  return Status();
}

Status read_int(const json& obj, const char* key, const std::string& where, int lo, int hi, int* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return Status();
  if (!it->is_number_integer()) return error(Code::kInvalidArgument, where, ".", key, ": expected an integer");
  long long v = it->is_number_unsigned() ? static_cast<long long>(std::min<unsigned long long>(
                                               it->get<unsigned long long>(), 1ULL << 62))
                                         : it->get<long long>();
  if (v < lo || v > hi) return error(Code::kInvalidArgument, where, ".", key, ": ", v, " is outside [", lo, ", ", hi, "]");
  *out = static_cast<int>(v);
  return Status();
}

Status read_bool(const json& obj, const char* key, const std::string& where, bool* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return Status();
  if (!it->is_boolean()) return error(Code::kInvalidArgument, where, ".", key, ": expected true or false");
  *out = it->get<bool>();
  return Status();
}

Status read_node(const json& j, const std::string& where, TopoNode* node) {
  if (!j.is_object()) return error(Code::kInvalidArgument, where, ": expected an object");
  if (!j.contains("name")) return error(Code::kInvalidArgument, where, ".name: missing");
  KOLO_TRY(read_string(j, "name", where, &node->name));
  if (node->name.empty()) return error(Code::kInvalidArgument, where, ".name: empty");
  std::string kind;
  KOLO_TRY(read_string(j, "kind", where, &kind));
  if (!parse_node_kind(kind, &node->kind)) {
    return error(Code::kInvalidArgument, where, ".kind: '", kind,
                 "' is not one of cpu, pci_switch, gpu, nic, nvswitch, network");
  }
  KOLO_TRY(read_string(j, "bus_id", where, &node->bus_id));
  KOLO_TRY(read_string(j, "model", where, &node->model));
  KOLO_TRY(read_int(j, "index", where, -1, 1 << 20, &node->index));
  KOLO_TRY(read_int(j, "socket", where, -1, 1 << 20, &node->socket));
  KOLO_TRY(read_int(j, "cores", where, 0, 1 << 20, &node->cores));
  KOLO_TRY(read_int(j, "sm", where, 0, 10000, &node->sm));
  KOLO_TRY(read_number(j, "port_gbps", where, 0, 1e6, &node->port_gbps));
  KOLO_TRY(read_int(j, "ports", where, 0, 1024, &node->ports));
  KOLO_TRY(read_string(j, "link_layer", where, &node->link_layer));
  KOLO_TRY(read_string(j, "gdr", where, &node->gdr));
  return Status();
}

Status read_endpoints(const json& j, const std::string& where, const HostTopology& topo, int* a, int* b) {
  std::string name_a, name_b;
  if (!j.contains("a") || !j.contains("b")) return error(Code::kInvalidArgument, where, ": needs both 'a' and 'b'");
  KOLO_TRY(read_string(j, "a", where, &name_a));
  KOLO_TRY(read_string(j, "b", where, &name_b));
  *a = topo.find(name_a);
  *b = topo.find(name_b);
  if (*a < 0) return error(Code::kInvalidArgument, where, ".a: no node named '", name_a, "'");
  if (*b < 0) return error(Code::kInvalidArgument, where, ".b: no node named '", name_b, "'");
  if (*a == *b) return error(Code::kInvalidArgument, where, ": a link from '", name_a, "' to itself");
  return Status();
}

Result<HostTopology> host_from_json(const json& j, const std::string& where) {
  if (!j.is_object()) return error(Code::kInvalidArgument, where, ": expected an object");
  std::string format = "kolo-topology";
  KOLO_TRY(read_string(j, "format", where, &format));
  if (format != "kolo-topology") {
    return error(Code::kInvalidArgument, where, ".format: '", format, "', expected 'kolo-topology'");
  }
  int version = 1;
  KOLO_TRY(read_int(j, "version", where, 0, 1 << 20, &version));
  if (version != 1) return error(Code::kUnsupported, where, ".version: ", version, " (this kolo reads 1)");
  HostTopology topo;
  KOLO_TRY(read_string(j, "host", where, &topo.host));
  KOLO_TRY(read_string(j, "sources", where, &topo.sources));
  auto nodes = j.find("nodes");
  if (nodes == j.end() || !nodes->is_array()) return error(Code::kInvalidArgument, where, ".nodes: missing or not an array");
  if (nodes->size() > kMaxNodes) return error(Code::kInvalidArgument, where, ".nodes: more than ", kMaxNodes);
  for (size_t i = 0; i < nodes->size(); ++i) {
    std::string at = str_cat(where, ".nodes[", i, "]");
    TopoNode node;
    KOLO_TRY(read_node((*nodes)[i], at, &node));
    if (topo.find(node.name) >= 0) return error(Code::kInvalidArgument, at, ".name: '", node.name, "' is used twice");
    topo.add_node(std::move(node));
  }
  auto links = j.find("links");
  if (links != j.end()) {
    if (!links->is_array()) return error(Code::kInvalidArgument, where, ".links: not an array");
    if (links->size() > kMaxLinks) return error(Code::kInvalidArgument, where, ".links: more than ", kMaxLinks);
    for (size_t i = 0; i < links->size(); ++i) {
      std::string at = str_cat(where, ".links[", i, "]");
      const json& lj = (*links)[i];
      if (!lj.is_object()) return error(Code::kInvalidArgument, at, ": expected an object");
      TopoLink link;
      KOLO_TRY(read_endpoints(lj, at, topo, &link.a, &link.b));
      std::string kind;
      KOLO_TRY(read_string(lj, "kind", at, &kind));
      if (!parse_link_kind(kind, &link.kind)) {
        return error(Code::kInvalidArgument, at, ".kind: '", kind, "' is not one of pcie, nvlink, c2c, inter_socket, net");
      }
      KOLO_TRY(read_int(lj, "gen", at, 0, 64, &link.gen));
      KOLO_TRY(read_int(lj, "width", at, 0, 1024, &link.width));
      KOLO_TRY(read_number(lj, "bw_gbs", at, 0, 1e6, &link.bw_gbs));
      KOLO_TRY(read_number(lj, "latency_us", at, 0, 1e6, &link.latency_us));
      topo.add_link(link);
    }
  }
  auto peers = j.find("peers");
  if (peers != j.end()) {
    if (!peers->is_array()) return error(Code::kInvalidArgument, where, ".peers: not an array");
    if (peers->size() > kMaxLinks) return error(Code::kInvalidArgument, where, ".peers: more than ", kMaxLinks);
    for (size_t i = 0; i < peers->size(); ++i) {
      std::string at = str_cat(where, ".peers[", i, "]");
      const json& pj = (*peers)[i];
      if (!pj.is_object()) return error(Code::kInvalidArgument, at, ": expected an object");
      PeerAccess p;
      KOLO_TRY(read_endpoints(pj, at, topo, &p.a, &p.b));
      KOLO_TRY(read_bool(pj, "access", at, &p.access));
      KOLO_TRY(read_bool(pj, "atomics", at, &p.atomics));
      KOLO_TRY(read_int(pj, "perf_rank", at, -1000, 1000, &p.perf_rank));
      topo.peers.push_back(p);
    }
  }
  return topo;
}

// Bytes in the UTF-8 sequence at s[i] (RFC 3629, as the JSON reader checks it), 0 when
// none starts there.
size_t utf8_length(const std::string& s, size_t i) {
  auto at = [&](size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u; };
  auto cont = [&](size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) { return at(k) >= lo && at(k) <= hi; };
  const unsigned c = at(i);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (c == 0xE0) return cont(i + 1, 0xA0) && cont(i + 2) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(i + 1) && cont(i + 2) ? 3 : 0;
  if (c == 0xED) return cont(i + 1, 0x80, 0x9F) && cont(i + 2) ? 3 : 0;
  if (c == 0xF0) return cont(i + 1, 0x90) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  if (c == 0xF4) return cont(i + 1, 0x80, 0x8F) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  return 0;
}

// What we write, we must read back: strings longer than the reader takes are cut, on a
// character boundary, and a byte that is not valid UTF-8 (an NCCL XML file's attribute
// may hold anything) becomes '?': the JSON writer would make it a three-byte U+FFFD,
// and a string within the limit here would come back longer than it.
std::string clip(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_length(s, i);
    if (out.size() + std::max<size_t>(n, 1) > kMaxString) break;
    if (n == 0) out += '?';
    else out.append(s, i, n);
    i += std::max<size_t>(n, 1);
  }
  return out;
}

out_json host_to_json(const HostTopology& topo) {
  out_json j;
  j["format"] = "kolo-topology";
  j["version"] = 1;
  j["host"] = clip(topo.host);
  if (!topo.sources.empty()) j["sources"] = clip(topo.sources);
  out_json nodes = out_json::array();
  for (const TopoNode& n : topo.nodes()) {
    out_json o;
    o["name"] = clip(n.name);
    o["kind"] = node_kind_name(n.kind);
    // Only what is set, so files stay short enough to read and write by hand.
    if (!n.bus_id.empty()) o["bus_id"] = clip(n.bus_id);
    if (!n.model.empty()) o["model"] = clip(n.model);
    if (n.index >= 0) o["index"] = n.index;
    if (n.socket >= 0) o["socket"] = n.socket;
    if (n.cores > 0) o["cores"] = n.cores;
    if (n.sm > 0) o["sm"] = n.sm;
    if (n.port_gbps > 0) o["port_gbps"] = n.port_gbps;
    if (n.ports > 0) o["ports"] = n.ports;
    if (!n.link_layer.empty()) o["link_layer"] = clip(n.link_layer);
    if (!n.gdr.empty()) o["gdr"] = clip(n.gdr);
    nodes.push_back(std::move(o));
  }
  j["nodes"] = std::move(nodes);
  out_json links = out_json::array();
  for (const TopoLink& l : topo.links()) {
    out_json o;
    o["a"] = clip(topo.node(l.a).name);
    o["b"] = clip(topo.node(l.b).name);
    o["kind"] = link_kind_name(l.kind);
    if (l.gen > 0) o["gen"] = l.gen;
    if (l.width > 0) o["width"] = l.width;
    o["bw_gbs"] = l.bw_gbs;
    o["latency_us"] = l.latency_us;
    links.push_back(std::move(o));
  }
  j["links"] = std::move(links);
  if (!topo.peers.empty()) {
    out_json peers = out_json::array();
    for (const PeerAccess& p : topo.peers) {
      peers.push_back({{"a", clip(topo.node(p.a).name)}, {"b", clip(topo.node(p.b).name)}, {"access", p.access},
                       {"atomics", p.atomics}, {"perf_rank", p.perf_rank}});
    }
    j["peers"] = std::move(peers);
  }
  return j;
}

Result<json> parse(std::string_view text) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    // nlohmann's message carries the line and column ("at line 3, column 7").
    return error(Code::kInvalidArgument, "malformed JSON: ", e.what());
  }
}

// Names from NCCL XML, hwloc or sysfs need not be UTF-8; JSON must be. Replace, don't throw.
std::string dump(const out_json& j) { return j.dump(1, ' ', false, out_json::error_handler_t::replace) + "\n"; }

}  // namespace

std::string topology_to_json(const HostTopology& topo) { return dump(host_to_json(topo)); }

Result<HostTopology> topology_from_json(std::string_view text) {
  Result<json> j = parse(text);
  if (!j.ok()) return j.status();
  try {
    return host_from_json(j.value(), "topology");
  } catch (const json::exception& e) {
    return error(Code::kInvalidArgument, "topology: ", e.what());
  }
}

std::string cluster_to_json(const ClusterTopology& cluster) {
  out_json j;
  j["format"] = "kolo-cluster";
  j["version"] = 1;
  out_json hosts = out_json::array();
  for (const HostTopology& h : cluster.hosts) hosts.push_back(host_to_json(h));
  j["hosts"] = std::move(hosts);
  return dump(j);
}

Result<ClusterTopology> cluster_from_json(std::string_view text) {
  Result<json> j = parse(text);
  if (!j.ok()) return j.status();
  try {
    const json& root = j.value();
    if (!root.is_object()) return error(Code::kInvalidArgument, "cluster: expected an object");
    std::string format;
    KOLO_TRY(read_string(root, "format", "cluster", &format));
    if (format != "kolo-cluster") return error(Code::kInvalidArgument, "cluster.format: '", format, "', expected 'kolo-cluster'");
    auto hosts = root.find("hosts");
    if (hosts == root.end() || !hosts->is_array()) return error(Code::kInvalidArgument, "cluster.hosts: missing or not an array");
    if (hosts->size() > kMaxHosts) return error(Code::kInvalidArgument, "cluster.hosts: more than ", kMaxHosts);
    ClusterTopology cluster;
    for (size_t i = 0; i < hosts->size(); ++i) {
      Result<HostTopology> host = host_from_json((*hosts)[i], str_cat("cluster.hosts[", i, "]"));
      if (!host.ok()) return host.status();
      cluster.hosts.push_back(host.take());
    }
    return cluster;
  } catch (const json::exception& e) {
    return error(Code::kInvalidArgument, "cluster: ", e.what());
  }
}

}  // namespace kolo
