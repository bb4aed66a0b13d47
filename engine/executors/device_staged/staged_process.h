// What every device_staged executor of a process shares (staged_device_executor.cc): the
// pinned words that release the callers' streams, the rule for pinned allocations, and the
// pinned buffers of executors that are gone. Only that executor includes it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "support/clock.h"
#include "support/device/device.h"
#include "support/status.h"

namespace kolo::staged {

// What every staged executor of the process shares: the pinned words that release the
// callers' streams, and the rule for pinned allocations. A pinned allocation waits for all
// work queued on the device; were a staged call queued, its stream would wait for a host
// collective that may need this very thread (a thread-rank's peer) to go on: a deadlock.
// So pinned memory is taken only while `queued` is zero, holding `enqueue` exclusively
// (run() holds it shared while it enqueues a call).
class StagedProcess {
 public:
  static StagedProcess& get() {
    static StagedProcess* p = new StagedProcess();  // never destroyed: streams may still read its words
    return *p;
  }

  // A word for an executor's releases, in pinned memory the device maps. A page of them is
  // allocated under the same rule as the ring: while no staged call is queued (always so
  // for the first page: a queued call holds a word). Pages are never freed.
  Result<uint32_t*> take_word() {
    std::unique_lock<std::shared_mutex> lock(enqueue);
    if (free_words_.empty()) {
      if (queued.load(std::memory_order_acquire) != 0) {
        return error(Code::kSystem, "all ", kWordsPerPage * pages_, " device staging words are taken and "
                     "device calls are queued: a new page cannot be pinned now (too many communicators alive)");
      }
      ++pages_;
      void* page = nullptr;
      KOLO_TRY(device::runtime().host_alloc(&page, kWordsPerPage * sizeof(uint32_t)));
      auto* words = static_cast<uint32_t*>(page);
      for (size_t i = 0; i < kWordsPerPage; ++i) {
        words[i] = 0;
        free_words_.push_back(&words[i]);
      }
    }
    uint32_t* w = free_words_.back();
    free_words_.pop_back();
    return w;
  }
  void give_word(uint32_t* w) {
    std::unique_lock<std::shared_mutex> lock(enqueue);
    free_words_.push_back(w);
  }

  // Pinned buffers of executors that are gone, kept for the next ones: freeing pinned
  // memory synchronises the device as allocating does, and a communicator's destroy may
  // come while its peers' last device calls wait for it.
  void give(void* p, size_t bytes) {
    std::unique_lock<std::shared_mutex> lock(enqueue);
    kept_.emplace(bytes, p);
  }
  // A kept buffer of at least `bytes` (at most twice as large), or null. *got: its size.
  void* take_kept(size_t bytes, size_t* got) {
    std::unique_lock<std::shared_mutex> lock(enqueue);
    auto it = kept_.lower_bound(bytes);
    if (it == kept_.end() || it->first > 2 * bytes) return nullptr;
    void* p = it->second;
    *got = it->first;
    kept_.erase(it);
    return p;
  }

  // Pinned memory of at least `bytes` (*got: how much): a kept buffer, else a new one once
  // no staged call of the process is queued, polling until the deadline. `old` (of
  // `old_bytes`; done with) goes to the kept ones.
  Result<void*> pinned(size_t bytes, size_t* got, void* old, size_t old_bytes, const Deadline& deadline, int rank) {
    if (void* p = take_kept(bytes, got)) {
      if (old != nullptr) give(old, old_bytes);
      return p;
    }
    *got = bytes;
    while (true) {
      {
        std::unique_lock<std::shared_mutex> lock(enqueue);
        if (queued.load(std::memory_order_acquire) == 0) {
          if (old != nullptr) kept_.emplace(old_bytes, old);
          void* p = nullptr;
          KOLO_TRY(device::runtime().host_alloc(&p, bytes));
          return p;
        }
      }
      if (deadline.expired()) {
        return error(Code::kTimeout, "rank ", rank, ": staging of ", bytes, " bytes for a device call cannot be "
                     "pinned while device calls of other communicators of this process are queued (a pinned "
                     "allocation waits for them; ranks that are threads of one process may be waiting for this one)");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  std::shared_mutex enqueue;
  std::atomic<size_t> queued{0};  // calls whose streams wait for a host collective

 private:
  static constexpr size_t kWordsPerPage = 1024;
  std::vector<uint32_t*> free_words_;
  size_t pages_ = 0;
  std::multimap<size_t, void*> kept_;  // by size
};

}  // namespace kolo::staged
