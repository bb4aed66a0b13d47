#include "engine/verifier/verifier_messages.h"

#include <algorithm>
#include <cstdint>
#include <tuple>

namespace kolo::verifier {

namespace {

// Message keys pack (from, to) in 16 bits each: the verifier takes at most 65535 ranks.
uint64_t message_key(int from, int to, uint32_t tag) {
  return (static_cast<uint64_t>(from) << 48) | (static_cast<uint64_t>(to) << 32) | tag;
}

}  // namespace

Status match_messages(const std::vector<Schedule>& s, Messages& out,
                      const std::function<Status(int rank, size_t step, const std::string& why)>& fail) {
  // Sorting beats hashing here: millions of transfers at p = 1024.
  struct Transfer {
    uint64_t key;
    int rank, step;
    bool operator<(const Transfer& o) const { return std::tie(key, rank, step) < std::tie(o.key, o.rank, o.step); }
  };
  const int p = static_cast<int>(s.size());
  std::vector<Transfer> sends, recvs;
  out.sender.assign(p, {});
  out.receiver.assign(p, {});
  out.base.assign(p + 1, 0);
  for (int r = 0; r < p; ++r) {
    out.sender[r].assign(s[r].steps.size(), {-1, -1});
    out.receiver[r].assign(s[r].steps.size(), {-1, -1});
    out.base[r + 1] = out.base[r] + s[r].steps.size();
    for (size_t i = 0; i < s[r].steps.size(); ++i) {
      const Step& st = s[r].steps[i];
      if (st.kind == StepKind::kSend) sends.push_back({message_key(r, st.peer, st.tag), r, static_cast<int>(i)});
      if (st.kind == StepKind::kRecv) recvs.push_back({message_key(st.peer, r, st.tag), r, static_cast<int>(i)});
    }
  }
  for (auto* list : {&sends, &recvs}) {
    std::sort(list->begin(), list->end());
    for (size_t k = 1; k < list->size(); ++k) {
      const Transfer &x = (*list)[k - 1], &y = (*list)[k];
      if (x.key == y.key) return fail(y.rank, y.step, str_cat("has the same (peer, tag) as step ", x.step));
    }
  }
  for (size_t k = 0, j = 0; k < recvs.size(); ++k) {
    while (j < sends.size() && sends[j].key < recvs[k].key) ++j;
    if (j == sends.size() || sends[j].key != recvs[k].key) continue;
    out.sender[recvs[k].rank][recvs[k].step] = {sends[j].rank, sends[j].step};
    out.receiver[sends[j].rank][sends[j].step] = {recvs[k].rank, recvs[k].step};
  }
  return Status();
}

}  // namespace kolo::verifier
