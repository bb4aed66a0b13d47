#include "engine/planner/device_ipc_model.h"

#include <algorithm>
#include <map>
#include <utility>

#include "kernels/compress.h"

namespace kolo {

DeviceIpcCost predict_device_ipc_allreduce(size_t bytes, const CostModel& model) {
  const int n = model.size();
  DeviceIpcCost cost;
  if (n < 2) return cost;
  const PlannerParams& params = model.params();
  // k: a plain kernel (copy, reduce) behind the previous one on the stream.
  double alpha_us = 0, gbs = 0, local_gbs = params.shm_copy_gbs, ring_gbs = 0, k = 0;
  if (model.device()) {
    // A rank's reads from all peers share its GPU's links, and ranks that drive the same
    // GPU share them too (their "peer" reads are that GPU's memory).
    std::map<std::pair<int, int>, int> ranks_on_gpu;
    for (int r = 0; r < n; ++r) ++ranks_on_gpu[{model.host_of(r), model.gpu_of(r)}];
    int sharing = 1;
    for (const auto& [gpu, count] : ranks_on_gpu) sharing = std::max(sharing, count);
    gbs = 1e30;
    for (int p = 1; p < n; ++p) {
      if (model.host_of(p) == model.host_of(0) && model.gpu_of(p) == model.gpu_of(0)) {
        gbs = std::min(gbs, params.gpu_reduce_gbs);  // a peer on the same GPU: its memory
        continue;
      }
      const LinkCost link = model.link(0, p);
      if (link.gbs > 0) gbs = std::min(gbs, link.gbs);
      alpha_us = std::max(alpha_us, link.alpha_us);
    }
    gbs /= sharing;
    alpha_us += params.gpu_wait_us;  // a barrier is a kernel that waits for the peers
    k = params.gpu_step_us;
    local_gbs = params.gpu_reduce_gbs / sharing;
    ring_gbs = 1e30;
    for (int r = 0; r < n; ++r) {
      const int next = (r + 1) % n;
      const bool same_gpu = model.host_of(r) == model.host_of(next) && model.gpu_of(r) == model.gpu_of(next);
      const LinkCost link = model.link(r, next);
      ring_gbs = std::min(ring_gbs, same_gpu ? params.gpu_reduce_gbs : link.gbs > 0 ? link.gbs : gbs * sharing);
    }
    ring_gbs /= sharing;
  } else {
    // Host memory (the emulated device): a barrier is a wait on each peer's word.
    alpha_us = params.shm_sync_us * (n - 1);
    gbs = ring_gbs = params.shm_copy_gbs;
  }
  const double b = static_cast<double>(bytes), per_us = gbs * 1e3;  // bytes per us
  // Kernels: one-shot a reduce; two-shot a reduce and a copy of each share; zero-copy a
  // reduce and a copy of each peer's share; the ring a reduce or copy per step and the copy
  // out; the copy into the slot one; the one-kernel form none besides its own.
  cost.one_shot_us = alpha_us + k + (n - 1) * b / per_us;
  cost.two_shot_us = 2 * alpha_us + (n + 1) * k + 2.0 * (n - 1) * b / (n * per_us);
  cost.copy_in_us = k + b / (local_gbs * 1e3);
  cost.zero_copy_us = 3 * alpha_us + n * k + 2.0 * (n - 1) * b / (n * per_us);
  cost.flagged_us = alpha_us + 2.0 * (n - 1) * b / per_us;
  // The ring also waits once for the copy-in and copies its result out of the slot.
  cost.ring_us = (2.0 * n - 1) * alpha_us + (2.0 * n - 1) * k + 2.0 * (n - 1) * b / (n * ring_gbs * 1e3) +
                 b / (local_gbs * 1e3);
  return cost;
}

size_t device_ipc_wire_bytes(const CollSpec& spec) {
  if (!spec.compressed()) return spec.bytes();
  return wire_bytes(wire_format(spec.wire), spec.count);
}

}  // namespace kolo
