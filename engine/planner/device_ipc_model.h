// The device_ipc executor's one choice, made from the device links: a one-shot allreduce
// (one barrier; each rank reads all n inputs) or a two-shot one (two barriers; each rank
// reads 1/n of every input, then every rank's reduced share). Per rank, with B the bytes
// that cross (the wire type's when compressed), bw the slowest path to a peer (the
// topology's NVLink or PCIe figure; shared by the ranks that drive one GPU), a the cost
// of a barrier over the peers' memory (a kernel that waits for them, and the links'
// latency) and k that of a plain kernel (a copy or reduce behind it on the stream):
//   one-shot  a + k + (n - 1) B / bw
//   two-shot  2a + (n + 1) k + 2 (n - 1) B / (n bw)
// Both first copy the input into the slot, k + B / local (local: the GPU's own memory
// bandwidth). With buffers registered on every rank the two-shot reads them in place and
// needs a third barrier, after which no peer reads them any more:
//   zero-copy 3a + n k + 2 (n - 1) B / (n bw)
// which wins once the copy it saves outweighs the barrier it adds. A ring (reduce-scatter
// then allgather, each rank reading only from the rank before it, a barrier per step):
//   ring      (2n - 1)(a + k) + 2 (n - 1) B / (n bw_ring)
// with bw_ring the slowest link between neighbours in rank order: it wins only where the
// neighbours' links are much faster than the slowest path between any two ranks (GPUs
// paired by NVLink bridges, PCIe trees), for large B. The one-kernel form (protocol
// flagged, kernels/flagged_body.h) writes each rank's input to every peer as words of half
// data, half flag, and waits once, for the data itself:
//   flagged   a + 2 (n - 1) B / bw
// with a, as for a barrier, a kernel that waits for its peers (calibrated on one H200:
// params.cc) plus the links' latency; it wins at small B, and the planner takes it where
// the call fits its box and it costs least (plan.cc, device_ipc_flagged). Without GPUs in
// the topology (the emulated device), host memory's figures stand in.
#pragma once

#include <cstddef>

#include "engine/planner/cost_model.h"

namespace kolo {

struct DeviceIpcCost {
  double one_shot_us = 0;
  double two_shot_us = 0;
  double copy_in_us = 0;    // what one-shot and two-shot pay on top, into the slot
  double zero_copy_us = 0;  // registered buffers
  double ring_us = 0;
  double flagged_us = 0;    // one kernel, up to the box size
};

DeviceIpcCost predict_device_ipc_allreduce(size_t bytes, const CostModel& model);
// Wire bytes of the call (compressed: the wire type's codes and fp8 scales).
size_t device_ipc_wire_bytes(const CollSpec& spec);

}  // namespace kolo
