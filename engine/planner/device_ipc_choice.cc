// device_ipc's part of plan() (plan.h): which calls it runs, its protocol (one kernel,
// registered buffers read in place, compressed slots, one rank alone, or the slot
// programs), its algorithm, its barrier kind, and whether a call's plain buffers are worth
// sharing with the peers. Every comparison reads the device-link model (device_ipc_model.h)
// through device_ipc_cost.
#include <algorithm>

#include "engine/planner/device_ipc_model.h"
#include "engine/planner/plan.h"
#include "kernels/flagged_body.h"

namespace kolo {
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

// The kernel barrier costs ~18 us on an H100, a host barrier ~55 us, but processes that
// time-slice one GPU run one kernel at a time: a kernel waiting for a peer's kernel would
// hold the GPU until its time slice ends, so there the ranks wait on the host.
// A rank alone waits for no one: its barrier kernel returns at once.
BarrierKind device_barrier_kind(DeviceBarrierSetting agreed, bool processes_time_slice, int ranks) {
  const bool host =
      agreed == DeviceBarrierSetting::kHost || (agreed == DeviceBarrierSetting::kAuto && processes_time_slice);
  return ranks > 1 && host ? BarrierKind::kDeviceHost : BarrierKind::kDeviceKernel;
}

BarrierKind device_ipc_barrier(const PlanContext& ctx) {
  return device_barrier_kind(ctx.device_barrier, ctx.device_processes_time_slice, ctx.size);
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

// The protocol, in the order device_ipc prefers them where they serve: one kernel (which
// device_ipc_flagged weighs against the slot programs), reading in place (weighed by
// device_ipc_zero_copy), the compressed slots, one rank alone, the slot programs.
void plan_on_device_ipc(const CollSpec& spec, const PlanContext& ctx, Plan* p) {
  p->algorithm = choose_device_ipc_algorithm(spec, ctx);
  p->share_buffers = device_ipc_worth_sharing(spec, ctx);
  if (device_ipc_flagged(spec, ctx)) {
    p->algorithm = Algorithm::kOneShot;
    p->protocol = Protocol::kFlagged;  // its flags order it: no barrier
  } else if (device_ipc_zero_copy(spec, ctx)) {
    p->protocol = Protocol::kZeroCopy;
  } else if (spec.compressed() && ctx.size > 1) {
    p->protocol = Protocol::kCompressedSlots;
  } else if (ctx.size == 1 && !spec.prescaled) {
    // One rank has no peer to wait for or to read: one pass (prescaled calls copy into the
    // slot first, where the scale is applied).
    p->protocol = Protocol::kAlone;
  } else {
    p->protocol = Protocol::kSlots;
  }
  if (p->protocol != Protocol::kAlone && p->protocol != Protocol::kFlagged) p->barrier = device_ipc_barrier(ctx);
}

}  // namespace kolo
