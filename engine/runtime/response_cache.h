// The response cache: names whose negotiation has been done once, each at a slot (a bit
// in the ready vector). When a training step repeats, ranks only AND their ready bits
// (a min-allreduce of one byte per slot) instead of sending names to the coordinator.
// Every rank changes its cache only from data all ranks share (the coordinator's
// responses, the reduced bits), in the same order, so slots agree everywhere.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/runtime/request.h"

namespace kolo::runtime {

class ResponseCache {
 public:
  explicit ResponseCache(size_t capacity) : capacity_(capacity) {}

  // Operations whose shape is the same on every rank; allgather and alltoall carry
  // per-rank sizes that change from step to step, so they always see the coordinator.
  static bool cacheable(OpKind kind) {
    return kind == OpKind::kAllreduce || kind == OpKind::kBroadcast || kind == OpKind::kReduceScatter;
  }

  int find(const std::string& name) const {
    auto it = slot_of_.find(name);
    return it == slot_of_.end() ? -1 : it->second;
  }
  // The lowest free slot, or -1 when the cache is full (then the name is negotiated
  // through the coordinator every time, which is slower but correct).
  int insert(const std::string& name, const Signature& sig);
  void erase(int slot);
  size_t slots() const { return entries_.size(); }
  bool used(int slot) const { return entries_[slot].used; }
  const std::string& name(int slot) const { return entries_[slot].name; }
  const Signature& signature(int slot) const { return entries_[slot].sig; }
  size_t size() const { return slot_of_.size(); }

 private:
  struct Entry {
    bool used = false;
    std::string name;
    Signature sig;
  };
  size_t capacity_;
  std::vector<Entry> entries_;
  std::unordered_map<std::string, int> slot_of_;
};

}  // namespace kolo::runtime
