#include "tools/kolo_plan/model_communicator.h"

#include <algorithm>

#include "engine/connect.h"
#include "engine/plan_inputs.h"
#include "support/env.h"
#include "support/host_rates.h"

namespace kolo {

Result<std::unique_ptr<ModelledCommunicator>> model_communicator(const CommSettings& settings, const ModelRequest& req) {
  if (req.hosts < 1 || req.per_host < 1) {
    return error(Code::kInvalidArgument, "a modelled communicator needs at least one host of one rank, not ", req.hosts,
                 " x ", req.per_host);
  }
  auto m = std::make_unique<ModelledCommunicator>();
  for (int h = 0; h < req.hosts; ++h) m->cluster.hosts.push_back(req.host);
  const int p = req.per_host * req.hosts;
  m->host_of.resize(p);
  for (int r = 0; r < p; ++r) m->host_of[r] = r / req.per_host;
  PlannerFacts facts;
  facts.rank = 0;
  facts.size = p;
  facts.topology = &m->cluster;
  facts.host_of_rank = &m->host_of;
  // One host whose ranks reach each other through shared memory first (KOLO_TRANSPORTS).
  facts.shared_memory = req.hosts == 1 && shares_memory_on_one_host(req.transports);
  Result<long long> shm_chunk = env_int("KOLO_SHM_CHUNK_BYTES");
  if (!shm_chunk.ok()) return shm_chunk.status();
  facts.slot_bytes = (static_cast<size_t>(shm_chunk.value()) + 63) & ~size_t{63};  // as the shm domain rounds it
  int cores = req.cores;
  if (cores <= 0) {
    for (int c : req.host.of_kind(NodeKind::kCpu)) cores += req.host.node(c).cores;
  }
  facts.agreed_cores = cores > 0 ? cores : planner_params().host_cores_default;
  const HostRates& rates = host_rates();
  facts.copy_gbs = rates.copy_gbs;
  facts.cache_bytes = rates.cache_bytes;
  facts.device_maps_peers = req.device;
  make_plan_context(settings, facts, &m->ctx, &m->scaled);
  if (req.local_params != nullptr && m->ctx.local_params != nullptr) {
    m->scaled = *req.local_params;
  }
  if (req.after_device_setup && m->ctx.device_setup == DeviceSetup::kNotYet) {
    m->ctx.device_setup = DeviceSetup::kMapped;
  }
  m->shared_memory = facts.shared_memory;
  m->slot_bytes = facts.slot_bytes;
  return m;
}

}  // namespace kolo
