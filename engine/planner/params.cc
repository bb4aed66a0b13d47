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
    // kolo_kernels_bench (BM_Compress, BM_Decompress at 16 M values) on the development VM
    // (AMD EPYC, 40 GB/s memcpy): fp16 35 / 14 GB/s, fp8 8.4 / 6.7 GB/s encode / decode.
    p.host_codec16_gbs = 14.0;
    p.host_codec8_gbs = 6.7;
    p.host_wakeup_us = 20.0;  // 1 KB direct/ring at 3 and 4 ranks on 2 cores
    // Shared-memory one-host path (engine/local/, formulas in local_model.cc): fitted to the
    // best of 6 kolo-perf allreduce runs (float32, out of place) for 2-4 ranks x one-shot
    // and two-shot x 1 KB, 1 MB, 64 MB on the 2-core development VM (AMD EPYC, 2 MB L2
    // per core, 32 MB L3), tools/kolo_plan/calibrate.sh; docs/planner.md has the table.
    p.shm_call_us = 0.33;     // 2 ranks, 1 KB: one-shot 0.6 us, two-shot 0.9 us
    p.shm_sync_us = 0.23;     // ... so one wait for a peer on another core ~0.25 us
    p.shm_wakeup_us = 1.57;   // 3-4 ranks, 1 KB: 2.3-7.4 us, ~1.6 us per wait per extra rank
    p.shm_copy_gbs = 34.5;    // 1 MB (cached) one-shot vs two-shot at 2 ranks: copy ~30 us/MiB,
    p.shm_reduce_gbs = 25.2;  //   a 2-input reduce ~42 us/MiB of output
    p.shm_cache_bytes = 32 << 20;  // the L3
    p.shm_dram_gbs = 51.2;    // 64 MB at 2 ranks: +20 us per MiB of input or output
    p.shm_chunk_bytes = 1 << 20;   // KOLO_SHM_CHUNK_BYTES default (communicator.h)
    p.shm_fitted_copy_gbs = 60.0;  // host_rates() on such a VM (kolo-plan prints it)
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
    // The one-kernel allreduce replayed from a CUDA graph, 2 thread-ranks on one H200
    // (2026-11-28): 3.7-4.9 us from 8 B to 32 KB, flat (bench/results/2026-11-28-gpu-check-h200.md):
    // a launch, the wait for the peer and the kernel's tail; the links' latency comes on
    // top. The slot path there (copy, barrier, reduce, and a fence barrier before and after
    // in a graph) measured 15-17 us, which this and gpu_step_us per plain kernel give as 13.
    p.gpu_wait_us = 3.7;
    return p;
  }();
  return params;
}

PlannerParams scaled_for_host(double copy_gbs, double cache_bytes) {
  PlannerParams p = planner_params();
  if (copy_gbs > 0 && p.shm_fitted_copy_gbs > 0) {
    const double factor = copy_gbs / p.shm_fitted_copy_gbs;
    p.shm_copy_gbs *= factor;
    p.shm_reduce_gbs *= factor;
    p.shm_dram_gbs *= factor;
  }
  if (cache_bytes > 0) p.shm_cache_bytes = cache_bytes;
  return p;
}

}  // namespace kolo
