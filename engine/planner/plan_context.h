// What the planner knows about a communicator: its size and machines, what its
// set-up found (shared memory, device IPC, the one-host model scaled to this machine),
// and the environment read once (KOLO_ALGO, KOLO_BACKEND). plan() decides from this and
// the call's CollSpec alone, so every rank with the same context decides alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/collective.h"
#include "engine/planner/comm_settings.h"
#include "topology/graph.h"

namespace kolo {

struct PlannerParams;  // engine/planner/params.h

// What the device_ipc executor's set-up (at the communicator's first device call that
// could run there) found, the same on every rank.
enum class DeviceSetup : uint8_t {
  kNone,        // no executor here sets up device memory (no device_ipc): nothing to do
  kNotYet,      // not set up: plans assume the peers' memory maps (kolo-plan, unit tests)
  kMapped,      // every rank maps every peer's device memory: device_ipc runs
  kUnmappable,  // some GPUs cannot map each other's memory: device calls are staged
};

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
  // KOLO_LAZY_CONNECT=1 (the same on every rank): links between hosts are made when a call
  // first needs them, so an algorithm's peers are sockets it opens (all_peers_affordable).
  bool lazy_links = false;
  // The device_ipc executor runs here (one host, a device runtime that maps peers' memory).
  bool device_ipc = false;
  // What the executors declare (Executor::describe) and learn (Executor::set_up), for
  // the choices plan() makes on their behalf:
  // the one-host executor's fast boxes carry this much of one rank's contribution (0:
  // none), and it writes outputs of at least stream_bytes past the caches;
  size_t fast_box_bytes = 0;
  size_t stream_bytes = SIZE_MAX;
  // device_ipc's set-up, and what it found for the barrier kind that plan() chooses
  // (device_ipc_barrier): the host's ranks' KOLO_DEVICE_BARRIER, agreed (host if any rank
  // asks for it, else kernel if any does), and whether two of them are processes that
  // time-slice one GPU with no two ranks threads of one process.
  DeviceSetup device_setup = DeviceSetup::kNotYet;
  DeviceBarrierSetting device_barrier = DeviceBarrierSetting::kAuto;
  bool device_processes_time_slice = false;
  // device_ipc's one-kernel collectives carry up to this many bytes from one rank to one
  // peer (0: none; KOLO_DEVICE_FLAGGED=0).
  size_t flagged_bytes = 0;
  // device_ipc can make user buffers readable by the peers without kolo_mem_register
  // (KOLO_DEVICE_AUTO_REGISTER; device_ipc_worth_sharing).
  bool share_buffers = false;
};

// What a communicator's set-up found about its machines, the same on every rank.
struct PlannerFacts {
  int rank = 0;
  int size = 1;
  const ClusterTopology* topology = nullptr;
  const std::vector<int>* host_of_rank = nullptr;
  // Every rank shares memory with every other (one host, shm allowed): the domain's slot
  // size and the figures its ranks agreed on (cores, copy rate, last-level cache).
  bool shared_memory = false;
  size_t slot_bytes = size_t{1} << 20;
  int agreed_cores = 1;
  double copy_gbs = 0;
  double cache_bytes = 0;
  // The device runtime maps peers' memory (CUDA IPC, the emulated device).
  bool device_maps_peers = false;
};

// What the executor rows declare themselves from (ExecutorRow::declare).
struct PlannerInputs {
  const CommSettings& settings;
  const PlannerFacts& facts;
};

}  // namespace kolo
