#include "topology/paths.h"

#include <algorithm>
#include <queue>
#include <tuple>

#include "topology/bandwidth.h"

namespace kolo {
namespace {

constexpr const char* kPathNames[] = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PHB", "SYS", "NET", "DIS"};

// The search runs over states, not nodes, because the type of a hop depends on how the
// path got there: switches crossed (0, 1, 2+), GPUs forwarded through (0, 1), CPUs
// visited (0..2) and whether the last hop was NVLink.
struct State {
  int node, switches, gpus, cpus, nvlink;
};
constexpr int kStatesPerNode = 3 * 2 * 3 * 2;
int state_id(const State& s) { return ((s.node * 3 + s.switches) * 2 + s.gpus) * 6 + s.cpus * 2 + s.nvlink; }

// The hop from state `at` along `link` to node `to`, or false when not allowed.
bool step(const HostTopology& topo, int source, const State& at, const TopoLink& link, int to, State* next,
          PathType* type) {
  const TopoNode& here = topo.node(at.node);
  const TopoNode& there = topo.node(to);
  bool transit = at.node != source;
  if (transit && (here.kind == NodeKind::kNic || here.kind == NodeKind::kNetwork)) return false;
  if (transit && here.kind == NodeKind::kGpu && !(at.nvlink && link.kind == LinkKind::kNvLink)) return false;
  *next = State{to, at.switches, at.gpus, at.cpus, link.kind == LinkKind::kNvLink ? 1 : 0};
  if (there.kind == NodeKind::kCpu && ++next->cpus > 2) return false;
  switch (link.kind) {
    case LinkKind::kNvLink:
      if (transit && here.kind == NodeKind::kGpu && ++next->gpus > 1) return false;
      *type = next->gpus > 0 ? PathType::kNvb : PathType::kNvl;
      return true;
    case LinkKind::kC2C:
      *type = PathType::kC2C;
      return true;
    case LinkKind::kPcie:
      if (here.kind == NodeKind::kCpu || there.kind == NodeKind::kCpu) {
        *type = PathType::kPhb;
        return true;
      }
      if (there.kind == NodeKind::kPciSwitch) next->switches = std::min(2, next->switches + 1);
      *type = next->switches >= 2 ? PathType::kPxb : PathType::kPix;
      return true;
    case LinkKind::kInterSocket:
      *type = PathType::kSys;
      return true;
    case LinkKind::kNet:
      *type = PathType::kNet;
      return true;
  }
  return false;
}

// Widest path from `source` to every node using only hops of type <= limit.
// best[node] gets the widest (then lowest-latency) path found; bw -1 = unreachable.
void widest(const HostTopology& topo, int source, PathType limit, std::vector<Path>* best) {
  size_t n = topo.nodes().size();
  std::vector<double> width(n * kStatesPerNode, -1);
  std::vector<double> latency(n * kStatesPerNode, 0);
  std::vector<int> hops(n * kStatesPerNode, 0);
  std::vector<char> done(n * kStatesPerNode, 0);
  using Item = std::tuple<double, double, int>;  // width, -latency, state
  std::priority_queue<Item> queue;
  std::vector<State> states(n * kStatesPerNode);
  State start{source, 0, 0, topo.node(source).kind == NodeKind::kCpu ? 1 : 0, 0};
  int start_id = state_id(start);
  states[start_id] = start;
  width[start_id] = 1e30;
  queue.emplace(1e30, 0.0, start_id);
  best->assign(n, Path{});
  for (Path& p : *best) p.bw_gbs = -1;
  while (!queue.empty()) {
    auto [w, neg_lat, id] = queue.top();
    queue.pop();
    if (done[id]) continue;
    done[id] = 1;
    const State& at = states[id];
    Path& mine = (*best)[at.node];
    if (w > mine.bw_gbs || (w == mine.bw_gbs && -neg_lat < mine.latency_us)) {
      mine.bw_gbs = w;
      mine.latency_us = -neg_lat;
      mine.hops = hops[id];
    }
    for (int l : topo.links_of(at.node)) {
      const TopoLink& link = topo.links()[l];
      int to = link.a == at.node ? link.b : link.a;
      State next;
      PathType type;
      if (!step(topo, source, at, link, to, &next, &type) || type > limit) continue;
      int next_id = state_id(next);
      double next_w = std::min(w, link.bw_gbs);
      double next_lat = -neg_lat + link.latency_us;
      if (done[next_id] || next_w < width[next_id] ||
          (next_w == width[next_id] && next_lat >= latency[next_id])) {
        continue;
      }
      width[next_id] = next_w;
      latency[next_id] = next_lat;
      hops[next_id] = hops[id] + 1;
      states[next_id] = next;
      queue.emplace(next_w, -next_lat, next_id);
    }
  }
}

}  // namespace

const char* path_type_name(PathType type) { return kPathNames[static_cast<int>(type)]; }

std::vector<Path> paths_from(const HostTopology& topo, int source) {
  size_t n = topo.nodes().size();
  std::vector<Path> row(n);
  std::vector<Path> found;
  std::vector<char> resolved(n, 0);
  row[source] = Path{PathType::kLoc, 0, 0, 0};
  resolved[source] = 1;
  size_t left = n - 1;
  // The closest type first: the first limit under which a node is reachable is its type.
  for (int t = static_cast<int>(PathType::kNvl); t <= static_cast<int>(PathType::kNet) && left > 0; ++t) {
    widest(topo, source, static_cast<PathType>(t), &found);
    for (size_t d = 0; d < n; ++d) {
      if (resolved[d] || found[d].bw_gbs < 0) continue;
      Path p = found[d];
      p.type = static_cast<PathType>(t);
      if (p.bw_gbs >= 1e29) p.bw_gbs = 0;
      row[d] = p;
      resolved[d] = 1;
      --left;
    }
  }
  return row;
}

std::vector<int> PathTable::nearest_nics(int gpu) const {
  std::vector<int> nics = topo_.of_kind(NodeKind::kNic);
  if (nics.empty()) return nics;
  auto better = [&](int a, int b) {
    const Path& pa = path(gpu, a);
    const Path& pb = path(gpu, b);
    if (pa.type != pb.type) return pa.type < pb.type;
    return pa.bw_gbs > pb.bw_gbs;
  };
  std::stable_sort(nics.begin(), nics.end(), better);
  PathType closest = path(gpu, nics[0]).type;
  if (closest == PathType::kDis) return {};
  std::vector<int> out;
  for (int nic : nics) {
    if (path(gpu, nic).type == closest) out.push_back(nic);
  }
  return out;
}

namespace {

// The best bandwidth from a device out of its host: max over NICs of min(path, port).
double egress_gbs(const HostTopology& topo, int node) {
  std::vector<Path> from = paths_from(topo, node);
  double best = 0;
  for (int nic : topo.of_kind(NodeKind::kNic)) {
    const TopoNode& n = topo.node(nic);
    double port = net_gbs(n.port_gbps * std::max(1, n.ports));
    const Path& p = from[nic];
    if (p.type == PathType::kDis) continue;
    double bw = node == nic ? port : std::min(port, p.bw_gbs);
    best = std::max(best, bw);
  }
  return best;
}

}  // namespace

Path cluster_path(const ClusterTopology& cluster, int host_a, int node_a, int host_b, int node_b) {
  if (host_a == host_b) return paths_from(cluster.hosts[host_a], node_a)[node_b];
  Path p;
  p.type = PathType::kNet;
  p.bw_gbs = std::min(egress_gbs(cluster.hosts[host_a], node_a), egress_gbs(cluster.hosts[host_b], node_b));
  p.latency_us = 2 * link_latency_us(LinkKind::kNet);
  p.hops = 2;
  return p;
}

}  // namespace kolo
