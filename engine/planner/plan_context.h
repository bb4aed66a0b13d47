// What the planner knows about a communicator: its size and machines, what its
// set-up found (shared memory, device IPC, the one-host model scaled to this machine),
// and the environment read once (KOLO_ALGO, KOLO_BACKEND). plan() decides from this and
// the call's CollSpec alone, so every rank with the same context decides alike.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/collective.h"
#include "topology/graph.h"

namespace kolo {

struct PlannerParams;  // engine/planner/params.h

struct PlanContext {
  int rank = 0;
  int size = 1;
  size_t chunk_bytes = 1 << 20;  // pipeline granularity of the ring algorithms
  Algorithm forced = Algorithm::kAuto;  // KOLO_ALGO, read once per communicator
  // The communicator's machines (may be null in unit tests): every host's topology, and
  // which host each rank is on (an index into topology->hosts).
  const ClusterTopology* topology = nullptr;
  const std::vector<int>* host_of_rank = nullptr;
  // The buffers are device (GPU) memory: the cost model uses the GPUs' links. The host
  // executor runs host memory only, so the communicator leaves this false for now.
  bool device_memory = false;
  // Every rank of the communicator shares memory with every other (one host): the one-host
  // executor can run, with staging slots of slot_bytes; agreed_cores is the number of CPUs
  // the ranks may run on together, the same on every rank (choices that all ranks must make
  // alike depend on it).
  bool shared_memory = false;
  size_t slot_bytes = 1 << 20;
  int agreed_cores = 1;
  // The one-host model's figures scaled to this machine (planner/params.h, scaled_for_host):
  // the same on every rank. Null: the table's own.
  const PlannerParams* local_params = nullptr;
  // KOLO_BACKEND=nccl: device calls go to NCCL, not kolo's device path.
  bool nccl_backend = false;
  // The device_ipc executor runs here (one host, a device runtime that maps peers' memory).
  bool device_ipc = false;
};

}  // namespace kolo
