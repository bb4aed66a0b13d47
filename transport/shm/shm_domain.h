// A shared-memory domain: the ranks of one communicator that live on one host, sharing
// one segment (shm_layout.h). It gives them staging slots, monotonic counters to publish
// progress on, per-pair byte channels for the shm Link, and the one way to wait: spin
// briefly, then sleep on a futex; every wait has a deadline and notices a peer that died
// (pidfd), a peer that failed (the segment's failed flag) and kolo_comm_abort.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "support/clock.h"
#include "support/status.h"
#include "transport/bootstrap/store.h"
#include "transport/shm/shm_layout.h"
#include "transport/shared_domain.h"
#include "transport/shm/shm_segment.h"
#include "transport/socket.h"

namespace kolo::shm {

struct DomainOptions {
  std::string key_prefix;    // store keys, unique per communicator
  std::vector<int> members;  // the communicator ranks on this host, in local order
  int my_index = 0;          // my position in members
  uint32_t slots = 4;
  size_t slot_bytes = 256 << 10;
  size_t ring_bytes = 256 << 10;
  bool single_copy = true;  // large Link messages with process_vm_readv where permitted
  std::function<Status(const std::vector<int>& ranks)> left;  // CommSite::left (may be unset)
};

// What a domain's first rank publishes in the store: the name of the socket that hands out
// the segment's descriptor, and the segment's geometry, as
// "<name> <ranks> <slots> <slot_bytes> <ring_bytes>". The other ranks parse it with checks
// (the store is shared by the job, and a bad geometry would map the wrong size).
struct Offer {
  std::string name;
  SegmentGeometry geometry;
};
std::string offer_text(const Offer& offer);
Result<Offer> parse_offer(const std::string& text, int expected_ranks);
// A rank's process id as it announces it in the store (decimal, > 0).
Result<pid_t> parse_pid(const std::string& text);

class Domain final : public SharedDomain {
 public:
  static Result<std::unique_ptr<Domain>> create(StoreClient& store, const DomainOptions& options,
                                                const Deadline& deadline);
  ~Domain();

  int size() const override { return static_cast<int>(members_.size()); }
  int index() const override { return my_index_; }
  int global_rank(int index) const override { return members_[index]; }
  // members_ position of a communicator rank, or -1 when it is on another host.
  int index_of(int global_rank) const override;

  uint32_t slots() const override { return geometry_.slots; }
  size_t slot_bytes() const override { return geometry_.slot_bytes; }
  char* slot(int index, uint64_t chunk) const override {
    return base_ + geometry_.staging_offset() + geometry_.staging_bytes_per_rank() * index +
           geometry_.slot_bytes * (chunk % geometry_.slots);
  }
  SlotGeometry slot_geometry() const override {
    return {base_ + geometry_.staging_offset(), geometry_.staging_bytes_per_rank(), geometry_.slot_bytes, geometry_.slots};
  }
  RankControl& control(int index) const {
    return reinterpret_cast<RankControl*>(base_ + geometry_.control_offset())[index];
  }
  SharedRankLine& line(int index) const override { return control(index).line; }
  char* rank_area(int index) const override { return control(index).area; }
  char* fast_area(int index) const override { return control(index).fast; }
  char* exchange_area(int index) const override { return control(index).exchange; }
  ChannelControl& channel(int from, int to) const {
    return *reinterpret_cast<ChannelControl*>(channel_base(from, to));
  }
  char* ring(int from, int to) const { return channel_base(from, to) + sizeof(ChannelControl); }
  size_t ring_bytes() const { return geometry_.ring_bytes; }
  pid_t pid(int index) const { return pids_[index]; }
  // The CPUs the ranks of the domain may run on together (the union of their affinity
  // masks): the same number on every rank, for choices that all ranks must make alike.
  int agreed_cores() const override { return agreed_cores_; }
  double agreed_copy_gbs() const override { return agreed_copy_gbs_; }
  double agreed_cache_bytes() const override { return agreed_cache_bytes_; }
  bool cma_readable() const { return control(my_index_).cma_readable.load(std::memory_order_acquire) != 0; }

  // My counter c becomes value (monotonic); wakes whoever sleeps on me.
  void publish(int c, uint64_t value) override;
  // Waits until rank `index`'s counter c reaches at_least; `what` names the wait in errors.
  Status wait_for(int index, int c, uint64_t at_least, const Deadline& deadline, const char* what,
                  const StallCheck& stall) override;
  // The same for every other rank of the domain.
  Status wait_for_all(int c, uint64_t at_least, const Deadline& deadline, const char* what,
                      const StallCheck& stall) override;
  void publish_word(std::atomic<uint64_t>& word, uint64_t value) override;
  Status wait_word(int index, const std::atomic<uint64_t>& word, uint64_t at_least, const Deadline& deadline,
                   const char* what, const StallCheck& stall) override;

  // Inbox: rung when a channel towards a rank changes (the Link's progress).
  void ring_inbox(int index);
  uint32_t inbox_word() const { return control(my_index_).inbox.word.load(std::memory_order_acquire); }
  void sleep_on_inbox(uint32_t seen, int timeout_ms);

  // Problems that end a wait on rank `index`: the failed flag, abort, and that rank's
  // process having exited (checked at most every 50 ms). Only the rank waited on counts:
  // a peer that finished its part and exited is no failure for the others.
  Status health(int index);
  bool exited(int index) const;
  // Marks the domain failed so that every peer's wait returns at once.
  void mark_failed(const std::string& why) override;
  Status failed_status() const;  // once a rank has marked the domain failed: who, and how
  Status members_alive() const override;
  // From any thread: waits in this process return kAborted.
  void abort();

 private:
  Domain() = default;
  Status attach(StoreClient& store, const DomainOptions& options, const Deadline& deadline);
  Result<std::vector<std::string>> gather_members(StoreClient& store, const std::string& prefix,
                                                  const std::function<Status(const std::vector<int>&)>& left,
                                                  const Deadline& deadline);
  Status probe_cma(bool wanted);
  char* channel_base(int from, int to) const {
    return base_ + geometry_.channel_offset() + geometry_.channel_stride() * (static_cast<size_t>(from) * size() + to);
  }
  SegmentHeader& header() const { return *reinterpret_cast<SegmentHeader*>(base_); }
  template <class Ready>
  Status wait_on(Bell& bell, Ready ready, const Deadline& deadline, const char* what, int peer,
                 const StallCheck* stall = nullptr);

  std::vector<int> members_;
  int my_index_ = 0;
  SegmentGeometry geometry_;
  Mapping mapping_;
  char* base_ = nullptr;
  std::vector<pid_t> pids_;
  std::vector<Fd> pidfds_;  // -1 entries: no pidfd on this kernel, kill(pid, 0) instead
  bool oversubscribed_ = false;
  bool light_publish_ = false;  // every rank registered for the global fence: plain publishes
  static bool register_global_fence();
  void sleep_fence();
  std::atomic<bool> aborted_{false};
  int agreed_cores_ = 1;
  double agreed_copy_gbs_ = 0;
  double agreed_cache_bytes_ = 0;
  std::vector<double> next_health_check_;  // per rank
  // The last counter values seen per peer: a wait already satisfied by what we saw costs no
  // load of the peer's cache line (counters only grow).
  std::vector<std::array<uint64_t, kSharedCounters>> seen_;
};

}  // namespace kolo::shm
