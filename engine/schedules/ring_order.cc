#include "engine/schedules/ring_order.h"

#include <algorithm>
#include <set>

#include "topology/paths.h"

namespace kolo {
namespace {

bool valid_hosts(const PlanContext& ctx) {
  return ctx.host_of_rank != nullptr && static_cast<int>(ctx.host_of_rank->size()) == ctx.size;
}

std::vector<int> sorted_gpus(const HostTopology& topo) {
  std::vector<int> gpus = topo.of_kind(NodeKind::kGpu);
  std::stable_sort(gpus.begin(), gpus.end(), [&](int a, int b) { return topo.node(a).index < topo.node(b).index; });
  return gpus;
}

// Greedy nearest neighbour over GPU path bandwidth: from the first rank, always go to the
// unvisited rank with the widest path (the lowest rank on ties, so NVSwitch hosts keep
// rank order). Local rank i drives GPU i, as the cost model assumes.
std::vector<int> order_in_host(const HostTopology& topo, const std::vector<int>& ranks) {
  std::vector<int> gpus = sorted_gpus(topo);
  if (gpus.size() < 2 || ranks.size() < 3) return ranks;
  PathTable paths(topo);
  auto gpu_of = [&](size_t local) { return gpus[local % gpus.size()]; };
  std::vector<bool> used(ranks.size(), false);
  std::vector<int> order{ranks[0]};
  used[0] = true;
  size_t at = 0;
  for (size_t n = 1; n < ranks.size(); ++n) {
    size_t best = ranks.size();
    double best_bw = -1;
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (used[i]) continue;
      double bw = gpu_of(at) == gpu_of(i) ? 0 : paths.path(gpu_of(at), gpu_of(i)).bw_gbs;
      if (bw > best_bw) best = i, best_bw = bw;
    }
    used[best] = true;
    order.push_back(ranks[best]);
    at = best;
  }
  return order;
}

// Distinct nearest NICs of the host's first `locals` GPUs.
int distinct_nics(const HostTopology& topo, int locals) {
  std::vector<int> gpus = sorted_gpus(topo);
  if (gpus.empty()) return 1;
  PathTable paths(topo);
  std::set<int> nics;
  for (int i = 0; i < locals; ++i) {
    std::vector<int> near = paths.nearest_nics(gpus[i % gpus.size()]);
    if (!near.empty()) nics.insert(near[i % near.size()]);
  }
  return std::max<int>(1, static_cast<int>(nics.size()));
}

}  // namespace

std::vector<std::vector<int>> ranks_by_host(const PlanContext& ctx) {
  std::vector<std::vector<int>> hosts;
  if (!valid_hosts(ctx)) {
    hosts.emplace_back();
    for (int r = 0; r < ctx.size; ++r) hosts[0].push_back(r);
    return hosts;
  }
  std::vector<int> slot;  // host index -> position in `hosts` (first-rank order)
  for (int r = 0; r < ctx.size; ++r) {
    int h = std::max(0, (*ctx.host_of_rank)[r]);
    if (h >= static_cast<int>(slot.size())) slot.resize(h + 1, -1);
    if (slot[h] < 0) slot[h] = static_cast<int>(hosts.size()), hosts.emplace_back();
    hosts[slot[h]].push_back(r);
  }
  return hosts;
}

// Everything ring_orders reads, so a cached answer is reused only for the same input
// (every rank of a communicator builds many schedules over the same topology).
static std::vector<double> fingerprint(const PlanContext& ctx) {
  std::vector<double> f{static_cast<double>(ctx.size), ctx.device_memory ? 1.0 : 0.0};
  if (ctx.host_of_rank != nullptr) f.insert(f.end(), ctx.host_of_rank->begin(), ctx.host_of_rank->end());
  f.push_back(-1);
  if (ctx.topology == nullptr || !ctx.device_memory) return f;
  for (const HostTopology& h : ctx.topology->hosts) {
    for (const TopoNode& n : h.nodes()) f.insert(f.end(), {static_cast<double>(n.kind), static_cast<double>(n.index)});
    for (const TopoLink& l : h.links()) {
      f.insert(f.end(), {static_cast<double>(l.a), static_cast<double>(l.b), static_cast<double>(l.kind), l.bw_gbs});
    }
    f.push_back(-2);
  }
  return f;
}

static std::vector<std::vector<int>> compute_ring_orders(const PlanContext& ctx) {
  std::vector<std::vector<int>> hosts = ranks_by_host(ctx);
  const bool gpu_topology = ctx.device_memory && ctx.topology != nullptr && valid_hosts(ctx) &&
                            ctx.topology->hosts.size() >= hosts.size();
  int rings = 1;
  if (gpu_topology) {
    for (auto& ranks : hosts) {
      const HostTopology& topo = ctx.topology->hosts[(*ctx.host_of_rank)[ranks[0]]];
      ranks = order_in_host(topo, ranks);
    }
    if (hosts.size() > 1) {
      rings = static_cast<int>(hosts[0].size());
      for (const auto& ranks : hosts) {
        const HostTopology& topo = ctx.topology->hosts[(*ctx.host_of_rank)[ranks[0]]];
        rings = std::min({rings, static_cast<int>(ranks.size()), distinct_nics(topo, static_cast<int>(ranks.size()))});
      }
    }
  }
  std::vector<std::vector<int>> out(rings);
  for (int k = 0; k < rings; ++k) {
    for (const auto& ranks : hosts) {
      for (size_t i = 0; i < ranks.size(); ++i) out[k].push_back(ranks[(i + k) % ranks.size()]);
    }
  }
  return out;
}

std::vector<std::vector<int>> ring_orders(const PlanContext& ctx) {
  thread_local std::vector<double> last_key;
  thread_local std::vector<std::vector<int>> last;
  std::vector<double> key = fingerprint(ctx);
  if (key != last_key || last.empty()) {
    last = compute_ring_orders(ctx);
    last_key = std::move(key);
  }
  return last;
}

}  // namespace kolo
