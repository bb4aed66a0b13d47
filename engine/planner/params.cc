// The calibration table. Each figure says where it comes from; update it here (and the
// table in docs/planner.md) when a transport changes or new kolo-perf runs are made.
#include "engine/planner/params.h"

namespace kolo {

const PlannerParams& planner_params() {
  static const PlannerParams params = [] {
    PlannerParams p;
    // Host memory between processes on one host: the TCP loopback transport, fitted to
    // kolo-perf runs on the 2-core development machine (docs/planner.md, "Calibration").
    p.host_local = {"host-local", 4.0, 2.0, 1.0};
    // Host memory across hosts over TCP: the NIC's figure times this efficiency.
    p.host_net = {"host-net", 30.0, 1.0, 0.7};
    p.host_step_us = 1.0;
    p.host_copy_gbs = 10.0;   // DESIGN.md: one core copies ~10 GB/s (>= 4 MB)
    p.host_reduce_gbs = 4.0;
    p.host_cores_default = 2;
    p.host_wakeup_us = 20.0;  // 1 KB direct/ring at 3 and 4 ranks on 2 cores
    // Shared-memory one-host path (engine/local/), DESIGN.md's measured chunked two-shot
    // figures until the lead's calibration replaces them.
    p.shm_sync_us = 1.5;
    p.shm_copy_gbs = 9.0;
    p.shm_reduce_gbs = 4.0;
    p.shm_chunk_bytes = 256 << 10;
    // GPUs. NVLink: NCCL's per-hop NVLink latency (tuning.cc, Simple protocol 3.4 us is
    // the per-step figure, LL 0.6); ~380 of 450 GB/s one-way measured peer-to-peer on
    // H100 (NVIDIA/nccl #1264) gives the efficiency.
    p.nvlink = {"nvlink", 0.6, 0.0, 380.0 / 450.0};
    p.pcie = {"pcie", 1.0, 0.0, 0.8};
    // Network: NCCL's Simple-protocol network latency (tuning.cc: 14 us per hop would be
    // the worst case; LL 2.7); RDMA over 400G achieves ~90 % of the line rate.
    p.gpu_net = {"gpu-net", 5.0, 0.0, 0.9};
    p.gpu_step_us = 1.0;
    p.gpu_launch_us = 8.4;    // NCCL ring base latency, Simple protocol (tuning.cc)
    p.gpu_reduce_gbs = 1000;  // HBM3 ~3 TB/s moved = 3 bytes per output byte of a reduce
    return p;
  }();
  return params;
}

}  // namespace kolo
