// The cost model's numbers, in one place: per-link-class latency (alpha), bandwidth
// (beta = 1/GB/s), per-step overheads and reduce/copy rates (gamma). Figures come from
// the topology where it has them (link bandwidths) and from calibration runs otherwise;
// params.cc is the one table to update when a transport changes or a new run is made.
#pragma once

namespace kolo {

// One class of link between two ranks. A message of n bytes costs alpha_us + n / gbs
// (GB/s per direction); efficiency scales a bandwidth taken from the topology (the share
// of the nominal figure a collective's transfers achieve).
struct LinkParams {
  const char* name = "";
  double alpha_us = 0;
  double gbs = 0;          // used when the topology has no figure
  double efficiency = 1;   // applied to the topology's figure
};

struct PlannerParams {
  // Host (CPU) memory. Processes on one host talk over the current intra-host transport;
  // step_us is the executor's cost to start a step (post, poll, wake-up).
  LinkParams host_local;      // ranks on one host
  LinkParams host_net;        // ranks on different hosts (the NIC's figure, times efficiency)
  double host_step_us = 0;
  double host_copy_gbs = 0;   // one core, memcpy-like copy (bytes written per second)
  double host_reduce_gbs = 0; // one core, bytes of output per second for a 2-input reduce
  int host_cores_default = 0; // cores per host when the topology does not say
  // More processes than cores: each received message costs the receiver a wake-up (the
  // executor spins, yields, then sleeps in poll()), one at a time.
  double host_wakeup_us = 0;

  // The lead's shared-memory one-host path (engine/local/): per-chunk synchronisation and
  // the copy/reduce rates it achieves.
  double shm_sync_us = 0;
  double shm_copy_gbs = 0;
  double shm_reduce_gbs = 0;
  double shm_chunk_bytes = 0;

  // Device (GPU) memory.
  LinkParams nvlink;
  LinkParams pcie;
  LinkParams gpu_net;
  double gpu_step_us = 0;      // per step of a schedule (kernel/proxy hand-off)
  double gpu_launch_us = 0;    // once per collective
  double gpu_reduce_gbs = 0;   // HBM-bound reduce, bytes of output per second
};

// The table in params.cc.
const PlannerParams& planner_params();

}  // namespace kolo
