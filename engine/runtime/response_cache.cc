#include "engine/runtime/response_cache.h"

namespace kolo::runtime {

int ResponseCache::insert(const std::string& name, const Signature& sig) {
  int old = find(name);
  if (old >= 0) erase(old);
  if (slot_of_.size() >= capacity_) return -1;
  int slot = 0;
  while (slot < static_cast<int>(entries_.size()) && entries_[slot].used) ++slot;
  if (slot == static_cast<int>(entries_.size())) entries_.emplace_back();
  entries_[slot] = Entry{true, name, sig};
  slot_of_[name] = slot;
  return slot;
}

void ResponseCache::erase(int slot) {
  if (slot < 0 || slot >= static_cast<int>(entries_.size()) || !entries_[slot].used) return;
  slot_of_.erase(entries_[slot].name);
  entries_[slot] = Entry{};
  // Trailing free slots are dropped so the ready vector stays as short as the cache.
  while (!entries_.empty() && !entries_.back().used) entries_.pop_back();
}

}  // namespace kolo::runtime
