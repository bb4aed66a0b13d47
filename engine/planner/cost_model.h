// The alpha-beta-gamma cost model of a communicator: where each rank runs (host, device,
// nearest NIC), what a message between two ranks costs, what a reduce or copy costs, and
// which shared resources (a rank's ports, a NIC) a message occupies. Built from a
// PlanContext (topology, rank -> host) and the calibration table (params.h).
#pragma once

#include <string>
#include <vector>

#include "engine/schedules/algorithms.h"
#include "engine/planner/params.h"

namespace kolo {

struct LinkCost {
  double alpha_us = 0;
  double gbs = 1;         // bandwidth of one transfer (GB/s = bytes per ns)
  int nic_a = -1;         // shared NIC resources the transfer crosses (-1: none)
  int nic_b = -1;
};

class CostModel {
 public:
  CostModel(const PlanContext& ctx, const PlannerParams& params = planner_params());

  int size() const { return p_; }
  int host_of(int rank) const { return place_[rank].host; }
  int hosts() const { return hosts_; }
  bool device() const { return device_; }
  // The GPU (node index in its host) a rank drives in device memory, else -1.
  int gpu_of(int rank) const { return place_[rank].gpu; }
  // Number of distinct NIC resources (for the simulator's resource table).
  int nic_count() const { return nics_; }
  LinkCost link(int a, int b) const;
  // Time of a local step on `rank`: a copy or reduce of `bytes` output bytes from `inputs`
  // sources; includes the per-step overhead.
  double compute_us(int rank, size_t bytes, int inputs, bool reduce) const;
  // Cost to start any step (post a send or receive, or hand off to the device).
  double step_us(int rank) const;
  // Receiver CPU time per message on an oversubscribed host (0 otherwise).
  double wakeup_us(int rank) const;
  // Paid once per collective (kernel launch on GPUs).
  double launch_us() const { return device_ ? params_.gpu_launch_us : 0; }
  const PlannerParams& params() const { return params_; }
  // Bandwidth of the slowest link between ranks on one host (for reporting).
  std::string describe() const;

 private:
  struct Place {
    int host = 0;
    int local = 0;        // index among the ranks of its host
    int gpu = -1;         // node index of its GPU (device memory), else -1
    int nic = -1;         // node index of its NIC, -1 when the host has none
    int nic_id = -1;      // global NIC resource id
    double nic_gbs = 0;   // the NIC's port speed in GB/s
  };

  const PlannerParams& params_;
  const ClusterTopology* topo_ = nullptr;
  int p_ = 1;
  int hosts_ = 1;
  int nics_ = 0;
  bool device_ = false;
  std::vector<Place> place_;
  std::vector<double> slowdown_;  // per host: ranks per core beyond one (host memory)
  // Device memory: per host, the path between its GPUs (indexed by GPU node indices).
  struct GpuPath {
    double gbs = 0;
    bool nvlink = false;
  };
  std::vector<std::vector<std::vector<GpuPath>>> gpu_paths_;
};

}  // namespace kolo
