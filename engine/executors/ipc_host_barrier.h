// The device_ipc executor's step barrier run on the host, for ranks in different processes
// that share one GPU. There a barrier kernel spinning for a peer holds the GPU, and the
// peer's kernels run only at the next time slice (~2.2 ms per barrier on an H100,
// bench/results/2026-11-26-first-gpu-runs-h100.md). A host function on the stream does
// what kernels/barrier_body.h does (post a number and the call's tag, wait for every peer's,
// compare tags, give up at KOLO_TIMEOUT or on abort), in the shared-memory domain's words
// (shared_domain.h: kDeviceBarrierWord, kDeviceBarrierAreaBytes), the GPU free meanwhile.
#pragma once

#include <cstdint>

#include "support/clock.h"
#include "support/status.h"
#include "transport/ipc_regions.h"
#include "transport/shared_domain.h"

namespace kolo {

// KOLO_DEVICE_BARRIER (kernel, host or auto) for a communicator's ranks of this host: true
// where they should wait on the host. auto: where two ranks are different processes on one
// physical GPU and no two are threads of one process (a process runs all its streams' host
// functions on one thread: one rank's wait would hold another's post back). Every rank
// publishes its process, GPU and setting through the site's store and decides from all of
// them, so all decide alike. Forcing host for threads of one process is an error.
Result<bool> host_barrier_wanted(const IpcSite& site, int device, const Deadline& deadline);

// The words a host barrier reports in: the status the executor's watcher reads and the
// abort word (pinned host memory), and the device copy of the status that the kernels
// after it read (ScopedKernelGuard). Once the status is set, later barriers return at once.
struct HostBarrierWords {
  uint32_t* status;
  const uint32_t* abort;
  uint32_t* failed;
};

// Enqueues barrier number `value` (one more than the last, the same on every rank) with
// the call's tag on the stream, and behind it the copy of the status into `failed`.
Status enqueue_host_barrier(SharedDomain& domain, const HostBarrierWords& words, uint64_t value, uint64_t tag,
                            void* stream);

}  // namespace kolo
