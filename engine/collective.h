// What a caller asks for: the shape of a collective (CollSpec, what plans depend on) and
// one call's buffers and scale factors (CollCall).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "support/status.h"

namespace kolo {

enum class CollKind {
  kAllreduce, kBroadcast, kReduce, kAllgather, kAllgatherv, kReduceScatter, kAlltoall,
  kSend, kRecv, kBarrier,
};

const char* coll_name(CollKind kind);

// The values match kolo.h's KOLO_ALGO_*.
enum class Algorithm : int {
  kAuto = 0, kRing = 1, kDirect = 2, kTree = 3, kHalvingDoubling = 4, kHierarchical = 5,
  kOneShot = 6, kTwoShot = 7,
  // Schedules only, never chosen by the planner nor forced by a user: the barrier's
  // rounds and a send/recv pair.
  kDissemination = 8, kPointToPoint = 9,
};
constexpr int kAlgorithmCount = 8;  // kAuto..kTwoShot: the ones KOLO_ALGO may name
const char* algorithm_name(Algorithm algorithm);

struct CollSpec {
  CollKind kind = CollKind::kAllreduce;
  size_t count = 0;  // allreduce/broadcast/reduce: elements; allgather: per rank (sendcount);
                     // reduce_scatter: per rank (recvcount); alltoall: per peer; send/recv: elements
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // kAvg is turned into kSum + a divisor by the engine
  int root = 0;                  // broadcast/reduce
  int peer = -1;                 // send/recv
  bool in_place = false;
  bool prescaled = false;   // inputs are scaled before reducing
  bool postscaled = false;  // the result is scaled (postscale != 1 or AVG)
  std::vector<size_t> counts;  // allgatherv: elements from each rank
  std::vector<size_t> displs;  // allgatherv: where each rank's block lands
  Algorithm algorithm = Algorithm::kAuto;
  bool device = false;  // the buffers are device memory (support/device): stream-ordered
  // Allreduce of FLOAT32: the type contributions cross the links in (FLOAT16, BFLOAT16,
  // FLOAT8_E4M3/E5M2 with block scales), accumulated in fp32; kCount: as the data.
  DType wire = DType::kCount;
  // Device buffers in a window registered on every rank (kolo_mem_register;
  // transport/ipc/ipc_windows.h): the ones peers read (allreduce: input and output; broadcast:
  // the output; the others: the input). Set by the communicator for this rank.
  bool registered = false;

  bool compressed() const { return wire != DType::kCount; }

  size_t bytes() const { return count * dtype_size(dtype); }
  // Nothing to move (count 0, or every allgatherv count 0): the call returns at once.
  // A barrier is never empty.
  bool empty() const {
    if (kind == CollKind::kBarrier) return false;
    if (kind == CollKind::kAllgatherv) {
      for (size_t c : counts) {
        if (c != 0) return false;
      }
      return true;
    }
    return count == 0;
  }
};

// The spec as rank `rank` sees it: its own count of an allgatherv, and in-place only at
// the root of a reduce.
CollSpec spec_for_rank(const CollSpec& spec, int rank);

// Parses a KOLO_ALGO value: "" or "auto" = automatic, else an algorithm_name().
Result<Algorithm> parse_algorithm_name(const std::string& name);

// What the small-call lane (engine/call_runner.h) knows a call by: the arguments of a C API
// call that, with the buffers, make its CollCall (calls without options only). Two calls
// with one key plan alike; their buffers are checked again on every call.
struct LaneKey {
  CollKind kind = CollKind::kAllreduce;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // as called: kAvg is still kAvg
  int root = 0;
  size_t count = 0;
  bool in_place = false;
  bool operator==(const LaneKey&) const = default;
};

struct CollCall {
  CollSpec spec;
  const void* send = nullptr;
  void* recv = nullptr;
  Scale prescale;
  Scale postscale;
  void* stream = nullptr;  // device calls: the caller's stream (nullptr: the default stream)
  int device = -1;         // device calls: the device that owns the buffers (and the stream)
  // The communicator's number of this collective (1, 2, ... in call order, alike on every
  // rank; 0 until it runs): its errors' "collective call N" and the flight recorder's seq.
  uint64_t seq = 0;
};

}  // namespace kolo
