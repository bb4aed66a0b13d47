// plan(): the one place that decides how a collective runs. The table below is the one
// list of which algorithm serves which collective on which executor; choose_algorithm
// (schedules, by the cost model), choose_local_algorithm (one host, local_choice.cc) and
// the selector read it.
#include "engine/planner/plan.h"

#include <algorithm>
#include <iterator>

#include "engine/planner/compressed_model.h"
#include "engine/planner/device_ipc_model.h"
#include "engine/planner/selector.h"
#include "engine/planner/staged_chunking.h"
#include "engine/verifier/verifier.h"
#include "kernels/flagged_body.h"
#include "support/log.h"

namespace kolo {
namespace {

using Generator = Schedule (*)(const CollSpec&, const PlanContext&);

struct AlgorithmRow {
  Algorithm algorithm;
  ExecutorKind executor;
  CollKind kind;
  Generator generate;  // kSchedule rows: the schedule generator; kLocal rows: none (the
                       // pipeline in engine/local runs the algorithm for the collective)
};

constexpr ExecutorKind kSched = ExecutorKind::kSchedule;
constexpr ExecutorKind kLocal = ExecutorKind::kLocal;

// Which algorithm serves which collective, on which executor.
constexpr AlgorithmRow kTable[] = {
    {Algorithm::kRing, kSched, CollKind::kAllreduce, ring_allreduce},
    {Algorithm::kRing, kSched, CollKind::kReduce, ring_reduce},
    {Algorithm::kRing, kSched, CollKind::kReduceScatter, ring_reduce_scatter},
    {Algorithm::kRing, kSched, CollKind::kAllgather, ring_allgather},
    {Algorithm::kRing, kSched, CollKind::kAllgatherv, ring_allgather},
    {Algorithm::kRing, kSched, CollKind::kBroadcast, ring_broadcast},
    {Algorithm::kDirect, kSched, CollKind::kAllreduce, direct_allreduce},
    {Algorithm::kDirect, kSched, CollKind::kReduce, direct_reduce},
    {Algorithm::kDirect, kSched, CollKind::kReduceScatter, direct_reduce_scatter},
    {Algorithm::kDirect, kSched, CollKind::kAllgather, direct_allgather},
    {Algorithm::kDirect, kSched, CollKind::kAllgatherv, direct_allgather},
    {Algorithm::kDirect, kSched, CollKind::kBroadcast, direct_broadcast},
    {Algorithm::kDirect, kSched, CollKind::kAlltoall, direct_alltoall},
    {Algorithm::kDirect, kSched, CollKind::kBarrier, dissemination_barrier},
    {Algorithm::kDirect, kSched, CollKind::kSend, point_to_point},
    {Algorithm::kDirect, kSched, CollKind::kRecv, point_to_point},
    {Algorithm::kTree, kSched, CollKind::kAllreduce, tree_allreduce},
    {Algorithm::kTree, kSched, CollKind::kReduce, tree_reduce},
    {Algorithm::kTree, kSched, CollKind::kBroadcast, tree_broadcast},
    {Algorithm::kHalvingDoubling, kSched, CollKind::kAllreduce, halving_doubling_allreduce},
    {Algorithm::kHalvingDoubling, kSched, CollKind::kReduceScatter, halving_doubling_reduce_scatter},
    {Algorithm::kHalvingDoubling, kSched, CollKind::kAllgather, halving_doubling_allgather},
    {Algorithm::kHierarchical, kSched, CollKind::kAllreduce, hierarchical_allreduce},  // balanced hosts only
    {Algorithm::kOneShot, kSched, CollKind::kAllreduce, one_shot_allreduce},
    {Algorithm::kTwoShot, kSched, CollKind::kAllreduce, two_shot_allreduce},
    // One host: every rank reads its peers' staging slots (engine/local); the collectives
    // other than allreduce and reduce have one pipeline, a single pass: one-shot.
    {Algorithm::kOneShot, kLocal, CollKind::kAllreduce, nullptr},
    {Algorithm::kTwoShot, kLocal, CollKind::kAllreduce, nullptr},
    {Algorithm::kOneShot, kLocal, CollKind::kReduce, nullptr},
    {Algorithm::kTwoShot, kLocal, CollKind::kReduce, nullptr},
    {Algorithm::kOneShot, kLocal, CollKind::kBroadcast, nullptr},
    {Algorithm::kOneShot, kLocal, CollKind::kAllgather, nullptr},
    {Algorithm::kOneShot, kLocal, CollKind::kAllgatherv, nullptr},
    {Algorithm::kOneShot, kLocal, CollKind::kReduceScatter, nullptr},
    {Algorithm::kOneShot, kLocal, CollKind::kAlltoall, nullptr},
    {Algorithm::kOneShot, kLocal, CollKind::kBarrier, nullptr},
};

const AlgorithmRow* find_row(Algorithm algorithm, ExecutorKind executor, CollKind kind) {
  for (const AlgorithmRow& row : kTable) {
    if (row.algorithm == algorithm && row.executor == executor && row.kind == kind) return &row;
  }
  return nullptr;
}

// Hierarchical needs several hosts with the same number of ranks each (rank i of every
// host meets rank i of the others), and more than one rank per host to be worth it.
bool balanced_hosts(const PlanContext& ctx) {
  if (ctx.host_of_rank == nullptr || static_cast<int>(ctx.host_of_rank->size()) != ctx.size) return false;
  std::vector<int> per_host;
  for (int h : *ctx.host_of_rank) {
    if (h < 0 || h >= ctx.size) return false;
    if (h >= static_cast<int>(per_host.size())) per_host.resize(h + 1, 0);
    ++per_host[h];
  }
  if (per_host.size() < 2 || per_host[0] < 2) return false;
  return std::all_of(per_host.begin(), per_host.end(), [&](int n) { return n == per_host[0]; });
}

Algorithm forced_for(const CollSpec& spec, const PlanContext& ctx) {
  return spec.algorithm != Algorithm::kAuto ? spec.algorithm : ctx.forced;
}

}  // namespace

// The one-host executor takes a single call when the whole communicator shares memory and
// no algorithm of the schedule executor is forced.
bool plan_runs_locally(const CollSpec& spec, const PlanContext& ctx, bool grouped) {
  if (grouped || spec.device || !ctx.shared_memory || spec.empty()) return false;
  const Algorithm forced = forced_for(spec, ctx);
  if (forced != Algorithm::kAuto && forced != Algorithm::kOneShot && forced != Algorithm::kTwoShot) return false;
  return std::any_of(std::begin(kTable), std::end(kTable),
                     [&](const AlgorithmRow& row) { return row.executor == kLocal && row.kind == spec.kind; });
}

namespace {

// Ranks whose processes time-slice one GPU wait for each other on the host, and every
// device_ipc call then pays the trips of its barriers through the GPU's time slices: on an
// H200 with 2 processes, 239-328 us per allreduce whatever its size up to 2 MB, where the
// staged path took 48-106 us from 2 KB to 128 KB and 213-253 us at 512 KB, but 681-774 us
// at 2 MB (three runs, bench/results/2026-11-28-gpu-h200-one-kernel-fp8.md). Below this
// many bytes such calls are staged. Measured with 2 processes only.
constexpr size_t kTimeSlicedStagedBelowBytes = size_t{1} << 20;

// The bytes of a call that every rank agrees on: an allgatherv's longest rank's, not its own.
size_t agreed_bytes(const CollSpec& spec) {
  if (spec.kind != CollKind::kAllgatherv) return spec.bytes();
  size_t most = 0;
  for (size_t c : spec.counts) most = std::max(most, c * dtype_size(spec.dtype));
  return most;
}

}  // namespace

namespace {

// The collectives device_ipc has kernels for, and which of its protocols carry each (the
// slot programs carry all of them): the one list of what it serves.
struct DeviceIpcRow {
  CollKind kind;
  bool zero_copy;  // read in place: alltoall's in-place form would overwrite what a peer still reads
  bool flagged;    // one kernel, within a box
};
constexpr DeviceIpcRow kDeviceIpcRows[] = {
    {CollKind::kAllreduce, true, true},   {CollKind::kReduce, true, true},
    {CollKind::kBroadcast, true, true},   {CollKind::kAllgather, true, true},
    {CollKind::kAllgatherv, true, true},  {CollKind::kReduceScatter, true, true},
    {CollKind::kAlltoall, false, true},
};

const DeviceIpcRow* device_ipc_row(CollKind kind) {
  for (const DeviceIpcRow& row : kDeviceIpcRows) {
    if (row.kind == kind) return &row;
  }
  return nullptr;
}

// The device-link model's figures for `bytes` (device_ipc_model.h): every comparison
// between device_ipc's protocols and algorithms reads these. `modelled` is false without
// GPUs in the topology (the emulated device), where the figures would be the emulation's.
DeviceIpcCost device_ipc_cost(size_t bytes, const PlanContext& ctx, bool* modelled = nullptr) {
  PlanContext device_ctx = ctx;
  device_ctx.device_memory = true;
  const CostModel model(device_ctx);
  if (modelled != nullptr) *modelled = model.device();
  return predict_device_ipc_allreduce(bytes, model);
}

}  // namespace

bool device_barrier_on_host(DeviceBarrierSetting agreed, bool processes_time_slice) {
  return agreed == DeviceBarrierSetting::kHost || (agreed == DeviceBarrierSetting::kAuto && processes_time_slice);
}

// The kernel barrier costs ~18 us on an H100, a host barrier ~55 us, but processes that
// time-slice one GPU run one kernel at a time: a kernel waiting for a peer's kernel would
// hold the GPU until its time slice ends, so there the ranks wait on the host.
BarrierKind device_ipc_barrier(const PlanContext& ctx) {
  return device_barrier_on_host(ctx.device_barrier, ctx.device_processes_time_slice) ? BarrierKind::kDeviceHost
                                                                                      : BarrierKind::kDeviceKernel;
}

// The host barriers are there because the processes time-slice the GPU, not because they
// were asked for: small calls are staged instead (plan_runs_on_device_ipc).
bool device_time_sliced(const PlanContext& ctx) {
  return ctx.device_barrier == DeviceBarrierSetting::kAuto && ctx.device_processes_time_slice;
}

// Device calls on one host, when the communicator has the device_ipc executor: the
// collectives it has kernels for, alone (not in a group), up to 8 ranks; not the small
// ones of ranks time-slicing a GPU (above), unless compressed (only device_ipc compresses).
bool plan_runs_on_device_ipc(const CollSpec& spec, const PlanContext& ctx, bool grouped) {
  if (!spec.device || !ctx.device_ipc || ctx.device_setup == DeviceSetup::kUnmappable || grouped || spec.empty()) {
    return false;
  }
  if (device_time_sliced(ctx) && !spec.compressed() && agreed_bytes(spec) < kTimeSlicedStagedBelowBytes) return false;
  return device_ipc_row(spec.kind) != nullptr;
}

bool group_runs_on_device_ipc(const CollCall* calls, size_t n, const PlanContext& ctx) {
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    if (calls[i].spec.empty()) continue;
    if (!plan_runs_on_device_ipc(calls[i].spec, ctx, false)) return false;
    any = true;
  }
  return any;
}

bool group_is_one_program(const CollCall* calls, size_t n, const PlanContext& ctx) {
  return n > 1 && !group_runs_on_device_ipc(calls, n, ctx);
}

// Only allreduce has a choice (the others run one pass); KOLO_ALGO or the call may force
// one-shot or two-shot, else the device-link model (device_ipc_model.h) picks.
Algorithm choose_device_ipc_algorithm(const CollSpec& spec, const PlanContext& ctx) {
  if (spec.kind != CollKind::kAllreduce) return Algorithm::kOneShot;
  const Algorithm forced = forced_for(spec, ctx);
  // A ring re-reads partial sums: it carries no compressed form (their one rounding).
  if (forced == Algorithm::kOneShot || forced == Algorithm::kTwoShot) return forced;
  if (forced == Algorithm::kRing) return spec.compressed() ? Algorithm::kTwoShot : Algorithm::kRing;
  if (device_ipc_zero_copy(spec, ctx)) return Algorithm::kTwoShot;
  const DeviceIpcCost cost = device_ipc_cost(device_ipc_wire_bytes(spec), ctx);
  if (!spec.compressed() && cost.ring_us < std::min(cost.one_shot_us, cost.two_shot_us)) return Algorithm::kRing;
  return cost.two_shot_us < cost.one_shot_us ? Algorithm::kTwoShot : Algorithm::kOneShot;
}

// The one-kernel collectives (kernels/flagged_body.h): where each rank's data for one peer
// fits a box and the model (device_ipc_model.h) says that one kernel beats the slot
// programs, which pay a copy into the slot, a barrier and a reduce or copy kernel (the
// allreduce's terms stand for every collective: the others have the same launches and
// waits). Its data crosses as words of half data, half flag, so for large enough bytes
// the slots would win; a box holds 64 KB, below that point on every GPU calibrated so far.
// Not where an algorithm was forced, nor for compressed calls other than allreduce (whose
// boxes carry the codes), nor where the ranks wait for each other on the host: the kernel
// waits for the peers' kernels, which a GPU time-sliced between processes runs only one at
// a time.
bool device_ipc_flagged(const CollSpec& spec, const PlanContext& ctx) {
  const DeviceIpcRow* row = device_ipc_row(spec.kind);
  if (row == nullptr || !row->flagged) return false;
  if (spec.compressed() && spec.kind != CollKind::kAllreduce) return false;
  // The most one rank sends one peer: its box holds that (allgatherv: the longest rank's;
  // fp8 wires: the codes and a scale line per 128 values).
  const size_t box_bytes = spec.compressed() ? flagged_wire_box_bytes(spec.wire, spec.count) : agreed_bytes(spec);
  const Algorithm forced = forced_for(spec, ctx);
  if (ctx.size < 2 || device_ipc_barrier(ctx) == BarrierKind::kDeviceHost ||
      (forced != Algorithm::kAuto && forced != Algorithm::kOneShot) || box_bytes > ctx.flagged_bytes) {
    return false;
  }
  // The box's bytes, not the call's: an allgatherv's own count differs from rank to rank,
  // and every rank must take the same protocol.
  bool modelled = false;
  const DeviceIpcCost cost = device_ipc_cost(box_bytes, ctx, &modelled);
  // Without GPUs in the topology (the emulated device) the plan is the one a GPU takes
  // within the box, so that CI runs the kernels a GPU runs.
  if (!modelled) return true;
  return cost.flagged_us <= std::min(cost.one_shot_us, cost.two_shot_us) + cost.copy_in_us;
}

bool device_ipc_worth_sharing(const CollSpec& spec, const PlanContext& ctx) {
  // Registered or not: every rank asks alike (PeerBuffers::exchange).
  if (!ctx.share_buffers || ctx.device_setup != DeviceSetup::kMapped) return false;
  CollSpec shared = spec;
  shared.registered = true;
  return plan_runs_on_device_ipc(shared, ctx, false) && !device_ipc_flagged(shared, ctx) &&
         device_ipc_zero_copy(shared, ctx);
}

// Reading in place saves the copy into the slot for one barrier: every collective that
// can takes it, but allreduce, where the model decides (or two-shot is forced).
bool device_ipc_zero_copy(const CollSpec& spec, const PlanContext& ctx) {
  if (!spec.registered || spec.compressed() || spec.prescaled) return false;
  const DeviceIpcRow* row = device_ipc_row(spec.kind);
  if (row == nullptr || !row->zero_copy) return false;
  if (spec.kind != CollKind::kAllreduce) return true;
  const Algorithm forced = forced_for(spec, ctx);
  if (forced == Algorithm::kOneShot || forced == Algorithm::kTwoShot || forced == Algorithm::kRing) {
    return forced == Algorithm::kTwoShot;
  }
  const DeviceIpcCost cost = device_ipc_cost(spec.bytes(), ctx);
  return cost.zero_copy_us < std::min(cost.one_shot_us, cost.two_shot_us) + cost.copy_in_us;
}

// Allreduce over the links with a wire type: the flat two-shot or, on hosts of equal size,
// the hierarchical form; forced (KOLO_ALGO, the call) or by the model
// (compressed_model.h). reduce_scatter and allgather have the two-shot's phases only.
Algorithm choose_compressed_algorithm(const CollSpec& spec, const PlanContext& ctx) {
  if (spec.kind != CollKind::kAllreduce || !balanced_hosts(ctx)) return Algorithm::kTwoShot;
  const Algorithm forced = forced_for(spec, ctx);
  if (forced == Algorithm::kHierarchical || forced == Algorithm::kTwoShot) return forced;
  const CompressedCost cost = predict_compressed_allreduce(spec, CostModel(ctx));
  return cost.hierarchical_us > 0 && cost.hierarchical_us < cost.flat_us ? Algorithm::kHierarchical
                                                                         : Algorithm::kTwoShot;
}

bool all_peers_affordable(const PlanContext& ctx) {
  if (!ctx.lazy_links || ctx.host_of_rank == nullptr || ctx.size <= 2) return true;
  // The same answer on every rank: the ranks off the smallest host, against 2 log2 N.
  std::vector<int> per_host;
  for (int h : *ctx.host_of_rank) {
    if (h >= static_cast<int>(per_host.size())) per_host.resize(h + 1, 0);
    ++per_host[h];
  }
  int smallest = ctx.size;
  for (int count : per_host) {
    if (count > 0) smallest = std::min(smallest, count);
  }
  const int remote = ctx.size - smallest;
  int log2n = 0;
  while ((1 << log2n) < ctx.size) ++log2n;
  return remote <= 2 * log2n;
}

bool algorithm_serves(Algorithm algorithm, ExecutorKind executor, const CollSpec& spec, const PlanContext& ctx) {
  if (find_row(algorithm, executor, spec.kind) == nullptr) return false;
  // All-peer schedules over lazy links: not past 2 log2 N remote peers (alltoall, barrier,
  // send and recv keep theirs: choose_algorithm gives them their one schedule).
  const bool all_peers =
      executor == ExecutorKind::kSchedule &&
      (algorithm == Algorithm::kDirect || algorithm == Algorithm::kOneShot || algorithm == Algorithm::kTwoShot);
  if (all_peers && spec.kind != CollKind::kAlltoall && !all_peers_affordable(ctx)) return false;
  return algorithm != Algorithm::kHierarchical || balanced_hosts(ctx);
}

Plan plan(const CollSpec& spec, const PlanContext& ctx, bool grouped) {
  Plan p;
  if (spec.device && ctx.nccl_backend) {
    p.executor = ExecutorKind::kNccl;
    p.algorithm = Algorithm::kAuto;
    p.protocol = Protocol::kNccl;
    return p;
  }
  if (plan_runs_on_device_ipc(spec, ctx, grouped)) {
    p.executor = ExecutorKind::kDeviceIpc;
    p.algorithm = choose_device_ipc_algorithm(spec, ctx);
    p.share_buffers = device_ipc_worth_sharing(spec, ctx);
    if (device_ipc_flagged(spec, ctx)) {
      p.algorithm = Algorithm::kOneShot;
      p.protocol = Protocol::kFlagged;  // its flags order it: no barrier
    } else if (device_ipc_zero_copy(spec, ctx)) {
      p.protocol = Protocol::kZeroCopy;
    } else if (spec.compressed() && ctx.size > 1) {
      p.protocol = Protocol::kCompressedSlots;
    } else if (ctx.size == 1 && !spec.prescaled) {
      // One rank has no peer to wait for or to read: one pass (prescaled calls copy into
      // the slot first, where the scale is applied).
      p.protocol = Protocol::kAlone;
    } else {
      p.protocol = Protocol::kSlots;
    }
    if (p.protocol != Protocol::kAlone && p.protocol != Protocol::kFlagged) p.barrier = device_ipc_barrier(ctx);
    return p;
  }
  if (spec.device) {
    // Everything else on device buffers: copy to pinned host memory, run the host plan of the
    // same call there, copy back, all in the caller's stream order.
    // A single call is cut in chunks (the executor runs them one after another through the
    // ring of pinned slots); a group is one chunk.
    CollSpec host = spec;
    host.device = false;
    host.registered = false;
    p.executor = ExecutorKind::kDeviceStaged;
    p.chunk_elems = grouped ? 0 : staged_chunk_elems(spec, ctx.size);
    if (p.chunk_elems != 0) host.count = p.chunk_elems;
    p.chunk_plan = std::make_shared<const Plan>(plan(host, ctx, grouped));
    p.algorithm = p.chunk_plan->algorithm;
    p.protocol = Protocol::kStagedChunks;
    return p;
  }
  if (plan_runs_locally(spec, ctx, grouped)) {
    p.executor = ExecutorKind::kLocal;
    // Only allreduce and reduce have a choice; the others run their one pipeline.
    const bool reduces = spec.kind == CollKind::kAllreduce || spec.kind == CollKind::kReduce;
    p.algorithm = choose_local_algorithm(spec, ctx.size, ctx.agreed_cores, ctx.slot_bytes,
                                         reduces ? forced_for(spec, ctx) : Algorithm::kAuto,
                                         ctx.local_params != nullptr ? *ctx.local_params : planner_params());
    p.protocol = choose_local_protocol(spec, ctx, p.algorithm);
    p.barrier = ctx.size > 1 ? BarrierKind::kSharedMemory : BarrierKind::kNone;
    p.streamed_outputs = p.protocol == Protocol::kSlots && output_bytes(spec, ctx.size) >= ctx.stream_bytes;
    p.chunk_bytes = ctx.slot_bytes;
    return p;
  }
  if (spec.compressed() && !grouped &&
      (spec.kind == CollKind::kAllreduce || spec.kind == CollKind::kReduceScatter || spec.kind == CollKind::kAllgather)) {
    // A wire type where shared memory cannot run the call: encoded blocks over the links,
    // each contribution encoded once (a ring would re-encode partial sums).
    p.executor = ExecutorKind::kCompressed;
    p.algorithm = choose_compressed_algorithm(spec, ctx);
    p.chunk_elems = kCompressedChunkValues;
    return p;
  }
  p.executor = ExecutorKind::kSchedule;
  p.algorithm = choose_algorithm(spec, ctx);
  p.schedule = schedule_of(p.algorithm, spec, ctx);
  return p;
}

Algorithm choose_algorithm(const CollSpec& spec, const PlanContext& ctx) {
  const Algorithm forced = forced_for(spec, ctx);
  if (forced != Algorithm::kAuto) {
    if (algorithm_serves(forced, kSched, spec, ctx)) return forced;
    // Planning is deterministic, so every rank falls back the same way.
    if (spec.kind != CollKind::kBarrier && spec.kind != CollKind::kSend && spec.kind != CollKind::kRecv) {
      log_info(Subsys::kPlan, algorithm_name(forced), " has no schedule for ", coll_name(spec.kind), " on ", ctx.size,
               " ranks; choosing automatically");
    }
  }
  // Alltoall, barrier, send and recv have one schedule each.
  if (!algorithm_serves(Algorithm::kRing, kSched, spec, ctx)) return Algorithm::kDirect;
  if (ctx.size == 1) return Algorithm::kRing;  // every algorithm is one copy
  if (ctx.size > kSimulatedRanksMost) return large_communicator_choice(spec, ctx);
  return select_algorithm(predict_all(spec, ctx, CostModel(ctx)));
}

// Past kSimulatedRanksMost ranks the event simulator is not asked: it builds and runs every
// rank's schedule for every algorithm, O(N^2) steps per rank and size (0.5 s of CPU and
// 100 MB at 256 ranks, on every rank, for every new size: a job of 256 ranks on one machine
// ran out of memory in its first call). Instead the choice the simulator makes at 64 ranks
// for every size: latency-bound sizes by halving-doubling (log2 N steps; tree where it is
// the one with log2 N steps), bandwidth-bound ones by the two-level schedule over balanced
// hosts, else the ring. An analytic model that keeps the cost table's choice at any N is
// the next step (docs/scale.md).
Algorithm large_communicator_choice(const CollSpec& spec, const PlanContext& ctx) {
  const bool large = spec.bytes() >= (size_t{1} << 20);
  auto serves = [&](Algorithm a) { return algorithm_serves(a, kSched, spec, ctx); };
  if (large) return serves(Algorithm::kHierarchical) ? Algorithm::kHierarchical : Algorithm::kRing;
  if (serves(Algorithm::kHalvingDoubling)) return Algorithm::kHalvingDoubling;
  if (serves(Algorithm::kTree)) return Algorithm::kTree;
  return Algorithm::kRing;
}

Schedule schedule_of(Algorithm algorithm, const CollSpec& spec, const PlanContext& ctx) {
  const AlgorithmRow* row = find_row(algorithm, kSched, spec.kind);
  if (row == nullptr) row = find_row(Algorithm::kDirect, kSched, spec.kind);
  return row->generate(spec, ctx);
}

Schedule build_schedule(const CollSpec& spec, const PlanContext& ctx) {
  return schedule_of(choose_algorithm(spec, ctx), spec, ctx);
}

std::string plan_label(const Plan& p) {
  std::string text = str_cat(executor_name(p.executor), " ", algorithm_name(p.algorithm));
  if (p.executor == ExecutorKind::kSchedule) text += str_cat(" (", p.schedule.steps.size(), " steps)");
  if (p.protocol != Protocol::kSteps) text += str_cat(", protocol ", protocol_name(p.protocol));
  if (p.barrier != BarrierKind::kNone) text += str_cat(", barrier ", barrier_name(p.barrier));
  if (p.streamed_outputs) text += ", outputs streamed past the caches";
  if (p.chunk_plan) {
    text += p.chunk_elems != 0 ? str_cat("; chunks of ", p.chunk_elems, " elements, each ") : "; one chunk, ";
    text += str_cat("run as: ", plan_label(*p.chunk_plan));
  }
  return text;
}

std::string plan_summary(const CollSpec& spec, int ranks, const Plan& p) {
  return str_cat(coll_name(spec.kind), " of ", spec.bytes(), " B on ", ranks, " ranks: ", plan_label(p));
}

const char* protocol_name(Protocol protocol) {
  switch (protocol) {
    case Protocol::kSteps: return "steps";
    case Protocol::kFastBox: return "fast_box";
    case Protocol::kSlots: return "slots";
    case Protocol::kZeroCopy: return "zero_copy";
    case Protocol::kFlagged: return "flagged";
    case Protocol::kCompressedSlots: return "compressed_slots";
    case Protocol::kAlone: return "alone";
    case Protocol::kStagedChunks: return "staged_chunks";
    case Protocol::kNccl: return "nccl";
  }
  return "?";
}

const char* barrier_name(BarrierKind barrier) {
  switch (barrier) {
    case BarrierKind::kNone: return "none";
    case BarrierKind::kSharedMemory: return "shared_memory";
    case BarrierKind::kDeviceKernel: return "device_kernel";
    case BarrierKind::kDeviceHost: return "device_host";
  }
  return "?";
}

const char* executor_name(ExecutorKind kind) {
  switch (kind) {
    case ExecutorKind::kSchedule: return "schedule";
    case ExecutorKind::kLocal: return "local";
    case ExecutorKind::kDeviceStaged: return "device_staged";
    case ExecutorKind::kNccl: return "nccl";
    case ExecutorKind::kDeviceIpc: return "device_ipc";
    case ExecutorKind::kCompressed: return "compressed";
  }
  return "?";
}

Status verify_collective(const CollSpec& spec, int ranks, size_t chunk_bytes) {
  return verify_collective(spec, PlanContext{0, ranks, chunk_bytes});
}

Status verify_collective(const CollSpec& spec, const PlanContext& ctx) {
  std::vector<Schedule> schedules;
  schedules.reserve(ctx.size);
  for (int r = 0; r < ctx.size; ++r) {
    PlanContext c = ctx;
    c.rank = r;
    schedules.push_back(build_schedule(spec_for_rank(spec, r), c));
  }
  return verify_schedules(spec, schedules);
}

}  // namespace kolo
