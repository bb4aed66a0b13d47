// The planner's one decision: how a collective runs. plan() is the only place that picks
// an executor and an algorithm, for every collective, memory type and wire type; the
// communicator caches its Plans, and the runtime's timeline, the INFO log and kolo-plan
// (on a modelled communicator) read the same Plan.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/collective.h"
#include "engine/planner/params.h"
#include "engine/schedules/algorithms.h"
#include "engine/schedules/schedule.h"

namespace kolo {

// The executors (engine/executors): rows of one table, indexed by this.
enum class ExecutorKind : uint8_t {
  kSchedule = 0,  // a Schedule of sends, receives, reduces and copies over the fabric's links
  kLocal = 1,     // the one-host pipeline over staging slots in shared memory (engine/local)
  kDeviceStaged = 2,  // device buffers: staged through pinned host memory, in stream order,
                      // around the host plan of the same call (engine/executors)
  kNccl = 3,          // device buffers through NCCL (KOLO_BACKEND=nccl)
  kDeviceIpc = 4,     // device buffers, one host: kernels over the peers' mapped memory
  kCompressed = 5,    // allreduce with a wire type over the links (ranks on several hosts)
};
constexpr int kExecutorCount = 6;
const char* executor_name(ExecutorKind kind);

// How the executor moves the bytes: the choices made for it here, not at run time.
enum class Protocol : uint8_t {
  kSteps,            // schedule, compressed: a program of sends, receives, reduces over links
  kFastBox,          // one host, small: each rank's contribution in one box (local/fast_box.h)
  kSlots,            // one host: chunks through staging slots (host: the shared-memory domain;
                     // device: the IPC regions), several kernels per chunk on a device
  kZeroCopy,         // device_ipc: the peers' buffers read in place (registered, or
                     // shared for the call: transport/ipc/ipc_peer_buffers.h)
  kFlagged,          // device_ipc, small collectives: one kernel writes the input into
                     // the peers' boxes, data and flag in one word, and reduces (or
                     // copies) as they arrive
  kCompressedSlots,  // device_ipc: contributions encoded to the wire type in the slots
  kAlone,            // device_ipc, one rank: one pass from input to output
  kStagedChunks,     // device_staged: chunks through pinned host memory, each run by the
                     // host plan of the chunk
  kNccl,             // NCCL chooses
};
const char* protocol_name(Protocol protocol);

// How the ranks of a one-host call wait for each other.
enum class BarrierKind : uint8_t {
  kNone,          // the protocol's own messages order it (links, staging, NCCL)
  kSharedMemory,  // counters and flags in the shared-memory domain, polled by the host
  kDeviceKernel,  // a kernel polls the peers' words (kernels/barrier_body.h)
  kDeviceHost,    // a host thread waits for the peers, then releases the stream
};
const char* barrier_name(BarrierKind barrier);

struct Plan {
  ExecutorKind executor = ExecutorKind::kSchedule;
  Algorithm algorithm = Algorithm::kDirect;  // kDeviceStaged: the host plan's algorithm;
                                             // kNccl: auto (NCCL chooses)
  // The program. kSchedule: this rank's steps. kLocal: the pipeline of `algorithm` over the
  // domain's slots, whose parameters are the spec's; record_local_program
  // (engine/local/local_program.h) lists its steps for the verifier, simulator and kolo-plan.
  Schedule schedule;
  Protocol protocol = Protocol::kSteps;
  BarrierKind barrier = BarrierKind::kNone;
  // kLocal: outputs written past the caches (non-temporal stores), and the bytes of each
  // chunk through the staging slots (the domain's slot).
  bool streamed_outputs = false;
  size_t chunk_bytes = 0;
  // kDeviceStaged: the elements of each chunk (0: the call runs whole, as one chunk;
  // staged_chunking.h) and the Plan the host call of a chunk runs with (a full chunk's; a
  // shorter last chunk's host call is planned when it runs, by the same rule).
  // kCompressed: the values of each pipeline chunk (kCompressedChunkValues).
  size_t chunk_elems = 0;
  std::shared_ptr<const Plan> chunk_plan;
  // kDeviceIpc: the call's buffers would be read in place if the peers could map them
  // (device_ipc_worth_sharing): before it runs, the communicator asks its executors to
  // share them, and plans it again as registered where they did. Cached with the Plan, so
  // a device call does not run the model again to know.
  bool share_buffers = false;
  bool zero_copy() const { return protocol == Protocol::kZeroCopy; }
};

// How spec runs on the communicator that ctx describes. `grouped`: the call is part of a
// group run as one program, which only the schedule executor can concatenate.
Plan plan(const CollSpec& spec, const PlanContext& ctx, bool grouped = false);

// Whether plan() gives the one-host executor: such plans hold no program and cost a few
// comparisons, so a cache of them would cost more than it saves.
bool plan_runs_locally(const CollSpec& spec, const PlanContext& ctx, bool grouped);

// One line for logs: "allreduce of 1048576 B on 4 ranks: local two_shot, protocol slots,
// barrier shared_memory"; plan_label is the part after the colon (the timeline's).
std::string plan_summary(const CollSpec& spec, int ranks, const Plan& plan);
std::string plan_label(const Plan& plan);

// The one-host executor's protocol: fast boxes for a one-shot call whose contribution per
// rank fits ctx.fast_box_bytes, else the staging slots.
Protocol choose_local_protocol(const CollSpec& spec, const PlanContext& ctx, Algorithm algorithm);
// Bytes a call writes to its output on one of `ranks` ranks.
size_t output_bytes(const CollSpec& spec, int ranks);

// Whether plan() gives the device_ipc executor (kernels over peers' memory on one host).
bool plan_runs_on_device_ipc(const CollSpec& spec, const PlanContext& ctx, bool grouped);
// A group of device calls runs on device_ipc, one call after another on their streams,
// when every call could run there alone (kernels for each; the calls of a group are the
// same on every rank, so running them in order needs nothing more); else it is staged.
bool group_runs_on_device_ipc(const CollCall* calls, size_t n, const PlanContext& ctx);
// Whether calls[0..n) are planned as one program (plan()'s `grouped`): a group of more than
// one call, unless device_ipc runs it call by call (above).
bool group_is_one_program(const CollCall* calls, size_t n, const PlanContext& ctx);
// How device_ipc's ranks wait for each other: on the host where asked (KOLO_DEVICE_BARRIER
// agreed by the host's ranks) or, under auto, where their processes time-slice one GPU;
// else a kernel (always for a rank alone). device_barrier_kind is the same rule on the
// set-up's facts alone (the executor's last barrier, at destroy, outside any Plan).
BarrierKind device_ipc_barrier(const PlanContext& ctx);
BarrierKind device_barrier_kind(DeviceBarrierSetting agreed, bool processes_time_slice, int ranks);
// The host barriers are auto's answer to processes time-slicing the GPU (not asked for):
// small device calls are then staged (plan_runs_on_device_ipc).
bool device_time_sliced(const PlanContext& ctx);
// device_ipc's part of plan() (device_ipc_choice.cc): protocol, algorithm, barrier,
// sharing, for a call plan_runs_on_device_ipc gives it.
void plan_on_device_ipc(const CollSpec& spec, const PlanContext& ctx, Plan* p);
// Device allreduce on the device_ipc path: one-shot or two-shot, forced or by the
// device-link model (device_ipc_model.h). Other collectives: one-shot (one pass).
Algorithm choose_device_ipc_algorithm(const CollSpec& spec, const PlanContext& ctx);
// Compressed allreduce over the links: two-shot, or hierarchical on hosts of equal size
// (forced, or by compressed_model.h). Other compressed collectives: two-shot.
Algorithm choose_compressed_algorithm(const CollSpec& spec, const PlanContext& ctx);
// Whether a device call would be read in place if the peers could map its buffers
// (ctx.share_buffers, once device_ipc is set up and maps), whether or not this rank
// registered them (which the peers cannot know): the communicator then asks the executors
// to share them before planning it.
bool device_ipc_worth_sharing(const CollSpec& spec, const PlanContext& ctx);
// Whether a device_ipc call reads the peers' registered buffers in place: the spec's
// buffers are registered, it is one of the collectives that can (not alltoall, whose
// in-place form would overwrite what a peer still reads), neither compressed nor
// prescaled (both need the copy into the slot), and for allreduce the device-link model
// prefers it to the slots (or two-shot is forced).
bool device_ipc_zero_copy(const CollSpec& spec, const PlanContext& ctx);
// Whether device_ipc runs a call in one kernel (Protocol::kFlagged): it fits the box and
// the model prefers it to the slot programs (the emulated device: whenever it fits).
bool device_ipc_flagged(const CollSpec& spec, const PlanContext& ctx);

// Builds every rank's schedule with build_schedule and verifies them (verifier/): the
// schedule executor's programs proved for `ranks` ranks.
Status verify_collective(const CollSpec& spec, int ranks, size_t chunk_bytes);
// The same on a communicator described by `ctx` (topology, rank -> host; ctx.rank ignored).
Status verify_collective(const CollSpec& spec, const PlanContext& ctx);

// The algorithm forced for spec: the call's own, else KOLO_ALGO's (kAuto: none).
Algorithm forced_for(const CollSpec& spec, const PlanContext& ctx);

// Whether `algorithm` has a program for spec on `executor` (the table in plan.cc).
// With lazy links, whether an algorithm in which every rank talks to every other may run:
// its first call makes a link to every peer, so it runs only while the ranks on other hosts
// are at most 2 log2 N (the same answer on every rank). Past that, ring, tree and
// halving-doubling serve (log2 N peers or fewer), and a rank keeps O(log N) sockets.
bool all_peers_affordable(const PlanContext& ctx);
// Communicators of more ranks than this are planned by large_communicator_choice, not by
// simulating every algorithm (plan.cc says why).
constexpr int kSimulatedRanksMost = 64;
Algorithm large_communicator_choice(const CollSpec& spec, const PlanContext& ctx);
bool algorithm_serves(Algorithm algorithm, ExecutorKind executor, const CollSpec& spec, const PlanContext& ctx);

// The schedule executor's part of plan(): the algorithm (a forced one where it has a
// schedule, else the cost model's choice) and its schedule.
Algorithm choose_algorithm(const CollSpec& spec, const PlanContext& ctx);
Schedule build_schedule(const CollSpec& spec, const PlanContext& ctx);
// The schedule of a given algorithm (direct where it has none for spec).
Schedule schedule_of(Algorithm algorithm, const CollSpec& spec, const PlanContext& ctx);

// The one-host executor's part: one-shot or two-shot for allreduce and reduce (a forced
// one as given, else the faster by the one-host model, engine/planner/local_model.h),
// one-shot for the collectives that have one pipeline. Cheap enough for every call.
// `cores` must be the same on every rank: ranks that chose differently would read each
// other's half-reduced slots.
// `params` too (the communicator's scaled_for_host figures).
Algorithm choose_local_algorithm(const CollSpec& spec, int ranks, int cores, size_t slot_bytes, Algorithm forced,
                                 const PlannerParams& params = planner_params());

}  // namespace kolo
