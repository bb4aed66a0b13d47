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
  // Wire codecs (kernels/compress.h) on one core, fp32 bytes per second of an encode or a
  // decode pass (the slower of the two): fp16/bf16, and block-scaled fp8.
  double host_codec16_gbs = 0;
  double host_codec8_gbs = 0;
  // More processes than cores: each received message costs the receiver a wake-up (the
  // executor spins, yields, then sleeps in poll()), one at a time.
  double host_wakeup_us = 0;

  // The shared-memory one-host path (engine/local/, formulas in local_model.h): a fixed
  // cost per call, a cost per wait (per chunk, one for one-shot and two for two-shot),
  // the copy/reduce rates one core achieves while its peers do the same, and how much
  // slower both get once the working set leaves the last-level cache.
  double shm_call_us = 0;      // announce, check the peers' signatures, return
  double shm_sync_us = 0;      // one wait for the peers, ranks <= cores (cache-line hand-off)
  double shm_wakeup_us = 0;    // one wait per rank beyond the cores (scheduler round trip)
  double shm_copy_gbs = 0;     // bytes written per second by one core's copy
  double shm_reduce_gbs = 0;   // output bytes per second of a 2-input reduce, one core
  double shm_cache_bytes = 0;  // working set (all ranks) beyond which buffers stream from DRAM
  double shm_dram_gbs = 0;     // extra cost, as a rate, of each input/output byte from DRAM
  double shm_chunk_bytes = 0;  // the default slot (KOLO_SHM_CHUNK_BYTES)
  // What support/host_rates.h measured (4 MiB memcpy) on the machine the shm_* rates were
  // fitted on: another machine's rates are these times its own figure over this one.
  double shm_fitted_copy_gbs = 0;

  // Device (GPU) memory.
  LinkParams nvlink;
  LinkParams pcie;
  LinkParams gpu_net;
  double gpu_step_us = 0;      // per step of a schedule (kernel/proxy hand-off)
  double gpu_launch_us = 0;    // once per collective
  double gpu_reduce_gbs = 0;   // HBM-bound reduce, bytes of output per second
  double gpu_wait_us = 0;      // a kernel that waits for its peers (device_ipc's barrier, its
                               // one-kernel collectives) with nothing to move
};

// The table in params.cc.
const PlannerParams& planner_params();

// The table with the one-host rates (shm_copy_gbs, shm_reduce_gbs, shm_dram_gbs) scaled by
// copy_gbs / shm_fitted_copy_gbs and shm_cache_bytes set to cache_bytes: the one-host model
// of a machine that copies at copy_gbs. 0 keeps the table's figure.
PlannerParams scaled_for_host(double copy_gbs, double cache_bytes);

}  // namespace kolo
