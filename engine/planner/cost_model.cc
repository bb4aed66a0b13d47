#include "engine/planner/cost_model.h"

#include <algorithm>

#include "support/status.h"
#include "topology/bandwidth.h"
#include "topology/paths.h"

namespace kolo {
namespace {

// A NIC's port speed in GB/s: its net link's figure, else port speed times ports.
double nic_gbs(const HostTopology& topo, int nic) {
  for (int l : topo.links_of(nic)) {
    const TopoLink& link = topo.links()[l];
    if (link.kind == LinkKind::kNet && link.bw_gbs > 0) return link.bw_gbs;
  }
  const TopoNode& n = topo.node(nic);
  return net_gbs(n.port_gbps * std::max(1, n.ports));
}

std::vector<int> sorted_gpus(const HostTopology& topo) {
  std::vector<int> gpus = topo.of_kind(NodeKind::kGpu);
  std::stable_sort(gpus.begin(), gpus.end(), [&](int a, int b) { return topo.node(a).index < topo.node(b).index; });
  return gpus;
}

}  // namespace

CostModel::CostModel(const PlanContext& ctx, const PlannerParams& params)
    : params_(params), topo_(ctx.topology), p_(std::max(1, ctx.size)) {
  place_.resize(p_);
  std::vector<int> seen;  // ranks seen so far per host
  for (int r = 0; r < p_; ++r) {
    int h = ctx.host_of_rank != nullptr && r < static_cast<int>(ctx.host_of_rank->size()) ? (*ctx.host_of_rank)[r] : 0;
    if (topo_ != nullptr && (h < 0 || h >= static_cast<int>(topo_->hosts.size()))) h = 0;
    h = std::max(h, 0);
    if (h >= static_cast<int>(seen.size())) seen.resize(h + 1, 0);
    place_[r].host = h;
    place_[r].local = seen[h]++;
  }
  hosts_ = static_cast<int>(seen.size());
  const bool have_topo = topo_ != nullptr && !topo_->hosts.empty();
  device_ = ctx.device_memory && have_topo;
  for (int h = 0; have_topo && h < hosts_; ++h) {
    if (sorted_gpus(topo_->hosts[h]).empty()) device_ = false;
  }
  // Host memory: processes beyond the host's cores share them (the 2-core machine runs
  // up to 5 ranks), which slows both their copies and their transport.
  slowdown_.assign(hosts_, 1.0);
  for (int h = 0; h < hosts_; ++h) {
    int cores = 0;
    if (have_topo) {
      for (int c : topo_->hosts[h].of_kind(NodeKind::kCpu)) cores += topo_->hosts[h].node(c).cores;
    }
    if (cores <= 0) cores = params_.host_cores_default;
    if (!device_) slowdown_[h] = std::max(1.0, static_cast<double>(seen[h]) / cores);
  }
  if (!have_topo) return;
  // Devices and NICs: local rank i drives the i-th GPU and its nearest NIC (host memory:
  // the host's NICs in turn). Each (host, NIC) is one shared resource.
  std::vector<std::vector<int>> nic_ids(hosts_);
  gpu_paths_.resize(hosts_);
  for (int h = 0; h < hosts_; ++h) {
    const HostTopology& topo = topo_->hosts[h];
    nic_ids[h].assign(topo.nodes().size(), -1);
    if (device_) {
      std::vector<int> gpus = sorted_gpus(topo);
      gpu_paths_[h].assign(topo.nodes().size(), {});
      for (int g : gpus) {
        std::vector<Path> from = paths_from(topo, g);
        gpu_paths_[h][g].assign(topo.nodes().size(), {});
        for (int o : gpus) {
          gpu_paths_[h][g][o] = {from[o].bw_gbs, from[o].type == PathType::kNvl || from[o].type == PathType::kNvb};
        }
      }
    }
  }
  for (int r = 0; r < p_; ++r) {
    Place& pl = place_[r];
    const HostTopology& topo = topo_->hosts[pl.host];
    std::vector<int> nics;
    if (device_) {
      std::vector<int> gpus = sorted_gpus(topo);
      pl.gpu = gpus[pl.local % gpus.size()];
      nics = PathTable(topo).nearest_nics(pl.gpu);
    } else {
      nics = topo.of_kind(NodeKind::kNic);
    }
    if (nics.empty()) continue;
    pl.nic = nics[pl.local % nics.size()];
    pl.nic_gbs = nic_gbs(topo, pl.nic);
    int& id = nic_ids[pl.host][pl.nic];
    if (id < 0) id = nics_++;
    pl.nic_id = id;
  }
}

LinkCost CostModel::link(int a, int b) const {
  const Place& pa = place_[a];
  const Place& pb = place_[b];
  LinkCost c;
  if (pa.host == pb.host) {
    if (device_) {
      const GpuPath& path = gpu_paths_[pa.host][pa.gpu][pb.gpu];
      const LinkParams& lp = path.nvlink ? params_.nvlink : params_.pcie;
      c.alpha_us = lp.alpha_us;
      c.gbs = path.gbs > 0 ? path.gbs * lp.efficiency : lp.gbs;
    } else {
      const double slow = slowdown_[pa.host];
      c.alpha_us = params_.host_local.alpha_us * slow;
      c.gbs = params_.host_local.gbs / slow;
    }
    return c;
  }
  const LinkParams& lp = device_ ? params_.gpu_net : params_.host_net;
  c.alpha_us = lp.alpha_us;
  double nic = std::min(pa.nic_gbs, pb.nic_gbs);
  c.gbs = nic > 0 ? nic * lp.efficiency : lp.gbs;
  if (!device_) c.gbs = std::min(c.gbs, params_.host_local.gbs / std::max(slowdown_[pa.host], slowdown_[pb.host]));
  c.nic_a = pa.nic_id;
  c.nic_b = pb.nic_id;
  return c;
}

double CostModel::compute_us(int rank, size_t bytes, int inputs, bool reduce) const {
  double gbs;
  if (device_) {
    gbs = params_.gpu_reduce_gbs;
  } else {
    // A reduce of k inputs reads k and writes 1 stream; the table's figure is for k = 2.
    gbs = reduce ? params_.host_reduce_gbs * 3.0 / (inputs + 1) : params_.host_copy_gbs;
    gbs /= slowdown_[place_[rank].host];
  }
  return step_us(rank) + static_cast<double>(bytes) / (gbs * 1e3);
}

double CostModel::step_us(int rank) const {
  return device_ ? params_.gpu_step_us : params_.host_step_us * slowdown_[place_[rank].host];
}

double CostModel::wakeup_us(int rank) const {
  return !device_ && slowdown_[place_[rank].host] > 1.0 ? params_.host_wakeup_us : 0.0;
}

std::string CostModel::describe() const {
  return str_cat(p_, " ranks on ", hosts_, " host(s), ", device_ ? "device" : "host", " memory, ", nics_, " NIC(s)");
}

}  // namespace kolo
