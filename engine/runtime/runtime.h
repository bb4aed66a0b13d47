// The Horovod-style runtime of one communicator: named asynchronous operations handed to
// a background thread, which every cycle negotiates with the other ranks what is ready
// everywhere (negotiation.h), fuses the ready allreduces (fusion.h) and runs them on a
// private duplicate of the communicator (so they never interleave with the user's direct
// calls), then completes the requests. Also: join, the stall inspector, the timeline and
// autotuning. After any failure the runtime is dead: every pending and later request
// fails with the first error.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "engine/communicator.h"
#include "engine/runtime/autotune.h"
#include "engine/runtime/op_runner.h"
#include "engine/runtime/negotiation.h"
#include "engine/runtime/pacing.h"
#include "engine/runtime/timeline.h"

namespace kolo::runtime {

struct RuntimeSettings {
  double cycle_ms = 1;                          // KOLO_CYCLE_TIME
  size_t fusion_threshold = size_t{128} << 20;  // KOLO_FUSION_THRESHOLD
  size_t cache_capacity = 1024;                 // KOLO_CACHE_CAPACITY
  StallSettings stall;                          // KOLO_STALL_CHECK_TIME, KOLO_STALL_SHUTDOWN_TIME
  bool autotune = false;                        // KOLO_AUTOTUNE
  std::string timeline_path;                    // KOLO_TIMELINE (rank 0 writes it)
  double timeout_seconds = 300;                 // KOLO_TIMEOUT: kolo_wait and kolo_join

  static Result<RuntimeSettings> from_environment();
};

// Counters for tests and the benchmark (read with stats()).
struct RuntimeStats {
  uint64_t cycles = 0;
  uint64_t slow_cycles = 0;       // cycles that needed the coordinator
  uint64_t cached_hits = 0;       // operations answered by the cache bits alone
  uint64_t collectives = 0;       // allreduces run (fused groups count once)
  uint64_t fused_tensors = 0;     // tensors in those allreduces
  size_t cache_entries = 0;
  uint64_t idle_cycles = 0;        // cycles with nothing ready and no slow path
  uint64_t cached_cycles = 0;      // cycles that ran something, all of it from the cache
  double cached_cycle_seconds = 0; // their negotiation time (entering the cycle to agreement,
                                   // so including any wait for the peers' requests), summed
  uint64_t early_cycles = 0;       // cycles a holder entered at once, not on work or a tick (pacing.h)
};

class Runtime {
 public:
  // Duplicates `parent` (a rendezvous of all its ranks through the store) and starts the
  // background thread.
  static Result<std::unique_ptr<Runtime>> start(Communicator& parent, const RuntimeSettings& settings);
  ~Runtime();  // stops at the next cycle on every rank; pending requests fail (kAborted)

  int rank() const { return comm_->rank(); }
  int size() const { return comm_->size(); }
  double timeout_seconds() const { return settings_.timeout_seconds; }
  // kInvalidUsage when the name is in flight on this rank (enqueued, its request not yet
  // released) or this rank has joined.
  Status enqueue(std::shared_ptr<Request> request);
  // The request of `name` was freed (kolo_request_free): the name may be enqueued again.
  void release(const std::string& name);
  // Blocks until every rank has joined; returns the rank that joined last.
  Result<int> join();
  Status start_timeline(const std::string& path);
  void stop_timeline();
  RuntimeStats stats() const;
  // From any thread: the running cycle and all later ones fail (kAborted); pending requests
  // fail with it.
  void abort() { comm_->abort(); }

 private:
  Runtime(std::unique_ptr<Communicator> comm, const RuntimeSettings& settings);
  void loop();
  // Until this rank's thread has work of its own (a request, a stop, a join) or `until`.
  void wait_for_work(std::chrono::steady_clock::time_point until);
  bool has_work_locked() const;
  // One cycle (early: entered at once, pacing.h); false when the runtime stops.
  bool cycle(bool early);
  void execute(std::vector<Response>& ready, double negotiated_at, size_t threshold);
  void finish(Request& request, const Status& status);
  void die(const Status& status);
  std::shared_ptr<Request> take(const Response& resp);
  Status all_joined();

  std::unique_ptr<Communicator> comm_;
  RuntimeSettings settings_;
  Negotiator negotiator_;
  OpRunner runner_;
  Autotuner autotuner_;

  mutable std::mutex mutex_;  // guards everything below up to the thread
  std::condition_variable wake_;   // the background thread: work arrived, or stop
  std::condition_variable joined_; // kolo_join callers
  std::vector<std::shared_ptr<Request>> incoming_;
  std::unordered_set<std::string> in_flight_;
  Status dead_;
  bool stopping_ = false;
  bool join_requested_ = false;
  uint64_t join_round_ = 0;  // completed joins; a caller waits for it to move
  int last_joined_ = -1;
  int device_ = -1;       // the device of this rank's device tensors (the first one's)
  int join_device_ = 0;   // the device current on the thread that called kolo_join
  Status join_status_;
  std::shared_ptr<Timeline> timeline_;  // a cycle holds a copy, so stop never pulls it away mid-cycle
  RuntimeStats stats_;

  // The background thread's own state.
  PendingMap pending_;
  bool joined_locally_ = false;
  int64_t joined_at_cycle_ = -1;
  double last_stall_check_ = 0;
  uint8_t last_tuning_ = Autotuner::kOff;  // the setting every rank agreed on last cycle
  LastCycle last_cycle_;                   // what every rank saw of the last cycle (pacing.h)
  std::thread thread_;
};

}  // namespace kolo::runtime
