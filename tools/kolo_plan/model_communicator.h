// The communicator kolo-plan models: a topology repeated over `hosts` hosts of
// `per_host` ranks, planned from the same settings (read_comm_settings), the same facts a
// communicator's set-up finds, and the executor rows' own declarations, through the one
// builder a communicator uses (engine/plan_inputs.h). tests/multiproc/plan_agreement checks
// that its Plans are a real communicator's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/planner/comm_settings.h"
#include "engine/planner/params.h"
#include "engine/planner/plan_context.h"
#include "topology/graph.h"

namespace kolo {

struct ModelledCommunicator {
  ClusterTopology cluster;
  std::vector<int> host_of;
  PlannerParams scaled;  // ctx.local_params points here
  PlanContext ctx;       // what plan() reads
  bool shared_memory = false;
  size_t slot_bytes = 0;  // the shared-memory domain's slot (KOLO_SHM_CHUNK_BYTES, rounded as it rounds)
};

struct ModelRequest {
  HostTopology host;
  int hosts = 1;
  int per_host = 2;
  bool device = false;  // GPUs whose memory the ranks map (the device runtime's maps_peers)
  // KOLO_TRANSPORTS as parse_transports gives it (empty: the default order).
  std::vector<std::string> transports;
  // The one-host model's figures scaled to the machine (null: this host's measured copy
  // rate and cache, as a communicator here would scale them) and the cores the ranks may
  // run on (0: the topology's CPU cores).
  const PlannerParams* local_params = nullptr;
  int cores = 0;
  // Plan as after device_ipc's set-up found every peer mapped and no GPU time-sliced (a
  // communicator learns that at its first device call; before it, plans assume the same
  // but do not share plain buffers).
  bool after_device_setup = true;
};

// Never moved once made: ctx points into it.
Result<std::unique_ptr<ModelledCommunicator>> model_communicator(const CommSettings& settings, const ModelRequest& req);

}  // namespace kolo
