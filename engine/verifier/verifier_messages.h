// Internal to the verifier: pairs every recv with its send by (from, to, tag). The pairs
// are the cross-rank edges of the happens-before relation that the race check and the
// simulation follow.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/schedules/schedule.h"
#include "support/status.h"

namespace kolo::verifier {

struct Messages {
  std::vector<std::vector<std::pair<int, int>>> sender;    // per recv: matching (rank, step), or -1
  std::vector<std::vector<std::pair<int, int>>> receiver;  // per send: matching (rank, step), or -1
  std::vector<size_t> base;  // first global step number of each rank; base[p] is the total
};

// Fills `out`. Two sends (or recvs) with the same key make matching ambiguous: that is a
// failure, reported through fail(rank, step, why). Unmatched steps are left -1; the
// simulation reports them (a stuck recv, a send nobody takes).
Status match_messages(const std::vector<Schedule>& schedules, Messages& out,
                      const std::function<Status(int rank, size_t step, const std::string& why)>& fail);

}  // namespace kolo::verifier
