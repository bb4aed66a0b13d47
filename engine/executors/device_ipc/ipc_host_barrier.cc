// ipc_host_barrier.h: the device_ipc step barrier waited for on the host, the stream held by a word.
#include "engine/executors/device_ipc/ipc_host_barrier.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "kernels/barrier_body.h"
#include "support/device/device.h"

namespace kolo {
namespace {

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

// Which MPS server this process's CUDA work goes through, or "-": MPS clients connect to
// the control daemon's pipe directory (CUDA_MPS_PIPE_DIRECTORY, /tmp/nvidia-mps by
// default), where the daemon keeps its "control" socket while it runs. The emulated
// device has no MPS.
std::string mps_server(const std::string& pipes) {
  if (!device::runtime().kind.gpu) return "-";
  struct stat st {};
  if (::stat((pipes + "/control").c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return "-";
  return str_cat(pipes, "@", st.st_dev, ":", st.st_ino);  // no spaces: one field
}

}  // namespace

Result<DeviceBarrierFacts> device_barrier_facts(const IpcSite& site, int device, const CommSettings& settings,
                                                const Deadline& deadline) {
  DeviceBarrierFacts facts;
  facts.agreed = settings.device_barrier;
  if (site.size < 2) return facts;
  Result<std::string> gpu = device::runtime().identity(device);
  if (!gpu.ok()) return gpu.status();
  const std::string want = device_barrier_setting_name(settings.device_barrier);
  Result<std::vector<std::string>> all =
      exchange_on_host(site, "device_barrier",
                       str_cat(want, " ", getpid(), " ", mps_server(settings.mps_pipe_directory), " ", gpu.value()), deadline);
  if (!all.ok()) return all.status();
  std::vector<std::string> wants, pids, servers, gpus;
  for (size_t i = 0; i < all.value().size(); ++i) {
    const std::string& s = all.value()[i];
    const size_t a = s.find(' '), b = a == std::string::npos ? a : s.find(' ', a + 1);
    const size_t c = b == std::string::npos ? b : s.find(' ', b + 1);
    if (c == std::string::npos) {
      return error(Code::kInternal, "device barrier set-up: rank ", i, " of this host published '", s,
                   "', not '<setting> <pid> <mps server> <gpu>'");
    }
    wants.push_back(s.substr(0, a));
    pids.push_back(s.substr(a + 1, b - a - 1));
    servers.push_back(s.substr(b + 1, c - b - 1));
    gpus.push_back(s.substr(c + 1));
  }
  // Processes time-slice one GPU unless one MPS server runs them all side by side.
  bool time_sliced = false, shared_process = false;
  for (size_t i = 0; i < pids.size(); ++i) {
    for (size_t j = i + 1; j < pids.size(); ++j) {
      shared_process = shared_process || pids[i] == pids[j];
      const bool one_server = servers[i] != "-" && servers[i] == servers[j];
      time_sliced = time_sliced || (pids[i] != pids[j] && gpus[i] == gpus[j] && !one_server);
    }
  }
  const bool forced_host = std::count(wants.begin(), wants.end(), "host") > 0;
  const bool forced_kernel = std::count(wants.begin(), wants.end(), "kernel") > 0;
  facts.agreed = forced_host     ? DeviceBarrierSetting::kHost
                 : forced_kernel ? DeviceBarrierSetting::kKernel
                                 : DeviceBarrierSetting::kAuto;
  facts.processes_time_slice = time_sliced && !shared_process;
  return facts;
}

HostBarriers::~HostBarriers() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (void* e : free_events_) (void)device::runtime().event_destroy(e);
}

Status HostBarriers::enqueue(uint64_t value, uint64_t tag, void* stream) {
  const device::DeviceOps& dev = device::runtime();
  void* arrived = nullptr;
  {
    std::lock_guard<std::mutex> lock(m_);
    if (!free_events_.empty()) {
      arrived = free_events_.back();
      free_events_.pop_back();
    }
  }
  if (arrived == nullptr) KOLO_TRY(dev.event_create(&arrived));
  Status s = dev.event_record(arrived, stream);
  // The word holds the barrier's number modulo 2^32; wait_value compares it as a sequence.
  if (s.ok()) s = dev.wait_value(stream, words_.released, static_cast<uint32_t>(value));
  if (!s.ok()) {
    std::lock_guard<std::mutex> lock(m_);
    free_events_.push_back(arrived);
    return s;
  }
  {
    std::lock_guard<std::mutex> lock(m_);
    queue_.push_back(Pending{arrived, value, tag});
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  cv_.notify_all();
  return dev.memcpy_async(words_.failed, words_.status, sizeof(uint32_t), stream);
}

void HostBarriers::loop() {
  while (true) {
    Pending b;
    {
      std::unique_lock<std::mutex> lock(m_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      b = queue_.front();
      queue_.pop_front();
    }
    wait_for_peers(b);
    // Released whatever happened: a failure is in the status word, which the kernels
    // after the barrier read (through `failed`) and the executor's watcher reports.
    __atomic_store_n(words_.released, static_cast<uint32_t>(b.value), __ATOMIC_RELEASE);
    std::lock_guard<std::mutex> lock(m_);
    free_events_.push_back(b.arrived);
  }
}

// barrier_thread (kernels/barrier_body.h) on the host, once the stream has reached the
// barrier: post the tag, then the number (release), wait for every peer's number, compare
// its tag; a reason in the status word.
void HostBarriers::wait_for_peers(const Pending& b) {
  uint32_t* status = words_.status;
  if (__atomic_load_n(status, __ATOMIC_ACQUIRE) != 0) return;  // failed earlier
  SharedDomain& d = domain_;
  const int me = d.index(), parity = static_cast<int>(b.value & 1);
  const Deadline deadline(timeout_seconds_->load(std::memory_order_relaxed));
  // The work before the barrier (this rank's copy into its slot) must be done before the
  // peers are told to read it.
  if (!device::runtime().event_synchronize(b.arrived, deadline).ok()) {
    __atomic_store_n(status, kBarrierTimedOut + static_cast<uint32_t>(me), __ATOMIC_RELEASE);
    return;
  }
  tags_of(d, me)[parity].store(b.tag, std::memory_order_relaxed);  // ordered by the release below
  d.publish_word(d.line(me).words[kDeviceBarrierWord], b.value);
  AbortCheck aborted;
  aborted.abort = words_.abort;
  for (int p = 0; p < d.size(); ++p) {
    const Status s = d.wait_word(p, d.line(p).words[kDeviceBarrierWord], b.value, deadline, "device barrier", aborted);
    uint32_t why = 0;
    if (s.code() == Code::kTimeout) {
      why = kBarrierTimedOut + static_cast<uint32_t>(p);
    } else if (!s.ok()) {
      why = kBarrierAborted;  // abort, or a peer that died or failed
    } else if (tags_of(d, p)[parity].load(std::memory_order_acquire) != b.tag) {
      why = kBarrierMismatch + static_cast<uint32_t>(p);
    }
    if (why != 0) {
      __atomic_store_n(status, why, __ATOMIC_RELEASE);
      return;
    }
  }
}

}  // namespace kolo
