// One negotiation per cycle: which named operations are ready on every rank, in which
// order to run them. The fast path is one min-allreduce of a byte vector (a header of
// flags, then one byte per response-cache slot): when every ready name is cached, that is
// all the control traffic of a training step. Anything new (an uncached name, a join, an
// invalidated slot, a stall check) adds the slow path: each rank's RankMessage is
// gathered to the coordinator on rank 0, which broadcasts the ResponseList.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/communicator.h"
#include "engine/runtime/coordinator.h"
#include "engine/runtime/response_cache.h"

namespace kolo::runtime {

struct Pending {
  std::shared_ptr<Request> request;
  bool reported = false;  // sent to the coordinator, so not answered from the cache
};
using PendingMap = std::map<std::string, Pending>;

// What this rank brings to a cycle besides its pending requests.
struct CycleInput {
  bool joined = false;         // kolo_join was called and this rank's queue is empty
  bool newly_joined = false;   // joined since the last cycle (the coordinator must hear it)
  bool shutting_down = false;  // kolo_comm_destroy: every rank stops after this cycle
  bool stall_check = false;    // this rank has waited KOLO_STALL_CHECK_TIME on a name
  uint8_t tuning = 255;        // rank 0: the autotuner's current setting; others 255
};

struct CycleOutput {
  std::vector<Response> ready;  // to run in this order on every rank
  bool shutdown = false;        // a rank is shutting down
  Status stop;                  // not ok: the coordinator stopped the runtime (stall)
  bool all_joined = false;
  bool stall_checked = false;   // the stall inspector ran this cycle (on every rank)
  bool slow_path = false;
  uint8_t tuning = 255;         // rank 0's setting, as every rank sees it
  size_t cached_hits = 0;       // ready names answered from the cache
  bool some_rank_idle = false;  // some rank had no pending request (pacing.h)
};

class Negotiator {
 public:
  Negotiator(Communicator& comm, size_t cache_capacity, StallSettings stall);

  // Consumes nothing: the caller removes the requests of `ready` from pending.
  Result<CycleOutput> negotiate(PendingMap& pending, const CycleInput& input);
  const ResponseCache& cache() const { return cache_; }

 private:
  Status slow_path(PendingMap& pending, const CycleInput& input, bool stall_check, CycleOutput& out);
  Status gather_to_coordinator(const std::vector<uint8_t>& mine, std::vector<RankMessage>& messages);
  Status broadcast_from_coordinator(std::vector<uint8_t>& bytes);

  Communicator& comm_;
  ResponseCache cache_;
  StallSettings stall_;
  std::unique_ptr<Coordinator> coordinator_;  // rank 0 only
  std::vector<uint8_t> bits_;
  bool peer_joined_ = false;  // some rank, not all, had joined in the last cycle
};

}  // namespace kolo::runtime
