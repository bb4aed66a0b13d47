// The device_ipc executor's step barrier waited for on the host, for ranks in different
// processes that share one GPU. There a barrier kernel spinning for a peer holds the GPU,
// and the peer's kernels run only at the next time slice (~2.2 ms per barrier on an H100,
// bench/results/2026-11-26-first-gpu-runs-h100.md). Instead the stream records an event
// and waits on the device (wait_value) for a word; a thread of the executor's own waits for
// the event, does what kernels/barrier_body.h does (post a number and the call's tag, wait
// for every peer's, compare tags, give up at KOLO_TIMEOUT or on abort) in the shared-memory
// domain's words (shared_domain.h: kDeviceBarrierWord, kDeviceBarrierAreaBytes), and writes
// the word. The GPU is free meanwhile, and no host function waits (CUDA runs every
// stream's host functions on one thread of the process).
#pragma once

#include <condition_variable>
#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/planner/comm_settings.h"
#include "support/clock.h"
#include "support/status.h"
#include "transport/ipc/ipc_regions.h"
#include "transport/shared_domain.h"

namespace kolo {

// What the planner decides the barrier kind of a communicator's ranks of this host from
// (device_ipc_barrier, plan.h): their KOLO_DEVICE_BARRIER settings, agreed (host if any
// asks for it, else kernel if any does, else auto), and whether two of them are different
// processes that time-slice one physical GPU while no two are threads of one process (the
// kernels of one process's streams run side by side, as do those of processes under one
// MPS server). Every rank publishes its process, MPS server, GPU and setting through the
// site's store and reads everyone's, so all find the same.
struct DeviceBarrierFacts {
  DeviceBarrierSetting agreed = DeviceBarrierSetting::kAuto;
  bool processes_time_slice = false;
};
Result<DeviceBarrierFacts> device_barrier_facts(const IpcSite& site, int device, const CommSettings& settings,
                                                const Deadline& deadline);

// The words a host barrier reports in, all pinned host memory the device maps: the status
// the executor's watcher reads, the abort word, the device copy of the status that the
// kernels after it read (ScopedKernelGuard), and the word that releases the stream. Once
// the status is set, later barriers return at once.
struct HostBarrierWords {
  uint32_t* status;
  const uint32_t* abort;
  uint32_t* failed;
  uint32_t* released;
};

// The barriers of one executor, waited for in order by one thread.
class HostBarriers {
 public:
  // Each barrier waits for the peers up to the communicator's timeout at its start.
  HostBarriers(SharedDomain& domain, const HostBarrierWords& words, const std::atomic<double>* timeout_seconds)
      : domain_(domain), words_(words), timeout_seconds_(timeout_seconds) {}
  ~HostBarriers();  // after the queued barriers (each ends by its deadline)
  HostBarriers(const HostBarriers&) = delete;
  HostBarriers& operator=(const HostBarriers&) = delete;

  // Enqueues barrier number `value` (one more than the last, the same on every rank) with
  // the call's tag on the stream: an event, the wait for the released word, and behind it
  // the copy of the status into `failed`.
  Status enqueue(uint64_t value, uint64_t tag, void* stream);

 private:
  struct Pending {
    void* arrived;  // recorded on the stream before its wait
    uint64_t value, tag;
  };
  void loop();
  void wait_for_peers(const Pending& b);

  SharedDomain& domain_;
  const HostBarrierWords words_;
  const std::atomic<double>* timeout_seconds_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  std::vector<void*> free_events_;
  bool stop_ = false;
  std::thread thread_;  // started by the first barrier
};

}  // namespace kolo
