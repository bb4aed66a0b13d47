// ipc_host_barrier.h: the device_ipc step barrier as a host function on the stream.
#include "engine/executors/ipc_host_barrier.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "kernels/barrier_body.h"
#include "support/device/device.h"
#include "support/env.h"

namespace kolo {
namespace {

// What one barrier needs when its host function runs (it frees it).
struct HostBarrier {
  SharedDomain* domain;
  HostBarrierWords words;
  uint64_t value;
  uint64_t tag;
  double timeout_s;
};

// The tags: the end of each rank's area (shared_domain.h).
std::atomic<uint64_t>* tags_of(const SharedDomain& d, int index) {
  return reinterpret_cast<std::atomic<uint64_t>*>(d.rank_area(index) + kRankAreaBytes - kDeviceBarrierAreaBytes);
}

// kolo_comm_abort ends the wait (the executor's watcher sets the abort word when a peer
// dies too).
struct AbortCheck final : SharedDomain::StallCheck {
  const uint32_t* abort = nullptr;
  Status operator()(int) const override {
    if (__atomic_load_n(abort, __ATOMIC_ACQUIRE) == 0) return Status();
    return error(Code::kAborted, "aborted");
  }
};

// barrier_thread (kernels/barrier_body.h) on the host: post the tag, then the number
// (release), wait for every peer's number, compare its tag; a reason in the status word.
void run_host_barrier(void* arg) {
  std::unique_ptr<HostBarrier> b(static_cast<HostBarrier*>(arg));
  SharedDomain& d = *b->domain;
  uint32_t* status = b->words.status;
  if (__atomic_load_n(status, __ATOMIC_ACQUIRE) != 0) return;  // failed earlier
  const int me = d.index(), parity = static_cast<int>(b->value & 1);
  tags_of(d, me)[parity].store(b->tag, std::memory_order_relaxed);  // ordered by the release below
  d.publish_word(d.line(me).words[kDeviceBarrierWord], b->value);
  AbortCheck aborted;
  aborted.abort = b->words.abort;
  const Deadline deadline(b->timeout_s);
  for (int p = 0; p < d.size(); ++p) {
    const Status s = d.wait_word(p, d.line(p).words[kDeviceBarrierWord], b->value, deadline, "device barrier", aborted);
    uint32_t why = 0;
    if (s.code() == Code::kTimeout) {
      why = kBarrierTimedOut + static_cast<uint32_t>(p);
    } else if (!s.ok()) {
      why = kBarrierAborted;  // abort, or a peer that died or failed
    } else if (tags_of(d, p)[parity].load(std::memory_order_acquire) != b->tag) {
      why = kBarrierMismatch + static_cast<uint32_t>(p);
    }
    if (why != 0) {
      __atomic_store_n(status, why, __ATOMIC_RELEASE);
      return;
    }
  }
}

}  // namespace

Result<bool> host_barrier_wanted(const IpcSite& site, int device, const Deadline& deadline) {
  if (site.size < 2) return false;
  Result<std::string> gpu = device::runtime().identity(device);
  if (!gpu.ok()) return gpu.status();
  const std::string want = env_string("KOLO_DEVICE_BARRIER");
  if (want != "auto" && want != "kernel" && want != "host") {
    return error(Code::kInvalidArgument, "KOLO_DEVICE_BARRIER='", want, "' is not auto, kernel or host");
  }
  Result<std::vector<std::string>> all =
      exchange_on_host(site, "device_barrier", str_cat(want, " ", getpid(), " ", gpu.value()), deadline);
  if (!all.ok()) return all.status();
  std::vector<std::string> wants, pids, gpus;
  for (size_t i = 0; i < all.value().size(); ++i) {
    const std::string& s = all.value()[i];
    const size_t a = s.find(' '), b = a == std::string::npos ? a : s.find(' ', a + 1);
    if (b == std::string::npos) {
      return error(Code::kInternal, "device barrier set-up: rank ", i, " of this host published '", s,
                   "', not '<setting> <pid> <gpu>'");
    }
    wants.push_back(s.substr(0, a));
    pids.push_back(s.substr(a + 1, b - a - 1));
    gpus.push_back(s.substr(b + 1));
  }
  bool shared_gpu = false, shared_process = false;
  for (size_t i = 0; i < pids.size(); ++i) {
    for (size_t j = i + 1; j < pids.size(); ++j) {
      shared_process = shared_process || pids[i] == pids[j];
      shared_gpu = shared_gpu || (pids[i] != pids[j] && gpus[i] == gpus[j]);
    }
  }
  const bool forced_host = std::count(wants.begin(), wants.end(), "host") > 0;
  const bool forced_kernel = std::count(wants.begin(), wants.end(), "kernel") > 0;
  if (forced_host && shared_process) {
    return error(Code::kInvalidArgument, "KOLO_DEVICE_BARRIER=host needs every rank of a host in a process of its "
                 "own; here two are threads of one process");
  }
  return forced_host || (!forced_kernel && shared_gpu && !shared_process);
}

Status enqueue_host_barrier(SharedDomain& domain, const HostBarrierWords& words, uint64_t value, uint64_t tag,
                            void* stream) {
  const device::DeviceOps& dev = device::runtime();
  auto* b = new HostBarrier{&domain, words, value, tag, env_timeout_seconds()};
  const Status s = dev.launch_host_func(stream, run_host_barrier, b);
  if (!s.ok()) {
    delete b;
    return s;
  }
  return dev.memcpy_async(words.failed, words.status, sizeof(uint32_t), stream);
}

}  // namespace kolo
