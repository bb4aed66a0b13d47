#include "engine/plan_inputs.h"

namespace kolo {

ExecutorRows make_plan_context(const CommSettings& settings, const PlannerFacts& facts, PlanContext* ctx,
                               PlannerParams* scaled) {
  *ctx = PlanContext{};
  ctx->rank = facts.rank;
  ctx->size = facts.size;
  ctx->chunk_bytes = settings.chunk_bytes;
  ctx->forced = settings.forced;
  ctx->topology = facts.topology;
  ctx->host_of_rank = facts.host_of_rank;
  ctx->nccl_backend = settings.nccl_backend;
  ctx->lazy_links = settings.lazy_links;
  ctx->device_barrier = settings.device_barrier;
  ctx->device_setup = DeviceSetup::kNone;  // until a row that sets up device memory declares itself
  if (facts.shared_memory) {
    ctx->slot_bytes = facts.slot_bytes;
    ctx->agreed_cores = facts.agreed_cores;
    *scaled = scaled_for_host(facts.copy_gbs, facts.cache_bytes);
    ctx->local_params = scaled;
  }
  ExecutorRows runs{};
  const PlannerInputs in{settings, facts};
  for (int k = 0; k < kExecutorCount; ++k) runs[k] = executor_row(static_cast<ExecutorKind>(k)).declare(in, *ctx);
  return runs;
}

}  // namespace kolo
