// The coordinator (on rank 0 of the runtime's communicator): remembers which ranks have
// reported each uncached name, across cycles, and answers with the names every rank has
// submitted, in the order they became ready everywhere. It checks that all ranks agree on
// the operation, dtype, counts, op, scales and root, and turns a disagreement into an
// error response (KOLO_ERR_MISMATCH on every rank) that names the tensor, the ranks and
// their values. It also writes the stall inspector's report from the ranks' pending lists.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/runtime/message.h"

namespace kolo::runtime {

struct StallSettings {
  double check_seconds = 60;    // KOLO_STALL_CHECK_TIME; <= 0 disables the inspector
  double shutdown_seconds = 0;  // KOLO_STALL_SHUTDOWN_TIME; 0 = only warn
};

class Coordinator {
 public:
  explicit Coordinator(int size) : size_(size) {}

  ResponseList handle(const std::vector<RankMessage>& messages, const StallSettings& stall);
  // Names reported by some ranks and not yet answered (for tests and the stall report).
  size_t waiting() const { return table_.size(); }

  struct Entry {
    std::vector<std::optional<RequestInfo>> by_rank;
    int reported = 0;
    uint64_t order = 0;  // when the first rank reported it
  };

 private:
  // joined: which ranks have joined (kolo_join) in this cycle.
  Response respond(const std::string& name, const Entry& entry, const std::vector<bool>& joined) const;
  // The stall report; sets *oldest to the age of the longest-waiting name it lists.
  std::string stall_report(const std::vector<RankMessage>& messages, const std::vector<bool>& joined,
                           double* oldest) const;

  int size_;
  uint64_t next_order_ = 0;
  std::map<std::string, Entry> table_;
};

}  // namespace kolo::runtime
