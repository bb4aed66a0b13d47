#include "engine/runtime/coordinator.h"

#include <algorithm>

#include "support/log.h"

namespace kolo::runtime {
namespace {

// The operation of an entry, as its first reporting rank gives it.
OpKind kind_of(const Coordinator::Entry& entry) {
  for (const auto& info : entry.by_rank) {
    if (info) return info->sig.kind;
  }
  return OpKind::kAllreduce;
}

}  // namespace

Response Coordinator::respond(const std::string& name, const Entry& entry, const std::vector<bool>& joined) const {
  Response resp;
  resp.name = name;
  const RequestInfo* first = nullptr;
  int first_rank = -1;
  for (int r = 0; r < size_; ++r) {
    if (entry.by_rank[r] && first == nullptr) {
      first = &*entry.by_rank[r];
      first_rank = r;
    }
  }
  resp.sig = first->sig;
  // A joined rank takes part with zeros; only allreduce has an identity to send. Any other
  // operation fails while a rank is joined (as Horovod's "not supported with Join"), at
  // once: it could never run, since the joined rank leaves kolo_join only once every rank
  // has joined, and a rank joins only once its own queue is empty.
  if (resp.sig.kind != OpKind::kAllreduce) {
    for (int r = 0; r < size_; ++r) {
      if (!joined[r]) continue;
      resp.code = Code::kInvalidUsage;
      resp.message = str_cat("tensor '", name, "': rank ", r, " has joined (kolo_join) and only allreduce can run ",
                             "while ranks have joined, not ", op_kind_name(resp.sig.kind));
      return resp;
    }
  }
  resp.locals.resize(size_);
  for (int r = 0; r < size_; ++r) {
    if (!entry.by_rank[r]) continue;  // a joined rank: zeros
    const RequestInfo& info = *entry.by_rank[r];
    std::string a, b;
    std::string field = Signature::difference(first->sig, info.sig, &a, &b);
    if (!field.empty()) {
      resp.code = Code::kMismatch;
      resp.message = str_cat("tensor '", name, "': ranks disagree on ", field, ": rank ", first_rank, " has ", a,
                             ", rank ", r, " has ", b);
      return resp;
    }
    resp.locals[r] = info.local;
  }
  if (resp.sig.kind == OpKind::kAlltoall) {
    for (int r = 0; r < size_; ++r) {
      if (resp.locals[r].size() != static_cast<size_t>(size_)) {
        resp.code = Code::kMismatch;
        resp.message = str_cat("tensor '", name, "': rank ", r, " gave ", resp.locals[r].size(),
                               " alltoall splits for ", size_, " ranks");
        return resp;
      }
    }
  }
  return resp;
}

std::string Coordinator::stall_report(const std::vector<RankMessage>& messages, const std::vector<bool>& joined,
                                      double* oldest) const {
  std::map<std::string, std::pair<std::vector<bool>, double>> seen;  // name -> (has it, max age)
  for (int r = 0; r < size_; ++r) {
    for (const PendingAge& p : messages[r].pending) {
      auto& [has, age] = seen[p.name];
      if (has.empty()) has.assign(size_, false);
      has[r] = true;
      age = std::max(age, p.age_seconds);
    }
  }
  std::string report;
  *oldest = 0;
  int listed = 0;
  for (const auto& [name, entry] : seen) {
    std::vector<int> missing, submitted;
    for (int r = 0; r < size_; ++r) {
      if (entry.first[r] || joined[r]) submitted.push_back(r);
      else missing.push_back(r);
    }
    if (missing.empty()) continue;
    *oldest = std::max(*oldest, entry.second);
    // Enough names to act on; a step with hundreds of stalled tensors repeats one cause.
    if (++listed > 20) continue;
    report += str_cat(report.empty() ? "" : "; ", "tensor '", name, "' (waiting ", static_cast<int>(entry.second),
                      " s) submitted by ranks ", rank_list(submitted), " but not by ", missing.size() == 1 ? "rank " : "ranks ",
                      rank_list(missing));
  }
  if (listed > 20) report += str_cat("; and ", listed - 20, " more tensors");
  return report;
}

ResponseList Coordinator::handle(const std::vector<RankMessage>& messages, const StallSettings& stall) {
  std::vector<bool> joined(size_);
  for (int r = 0; r < size_; ++r) joined[r] = messages[r].joined;
  for (int r = 0; r < size_; ++r) {
    for (const RequestInfo& info : messages[r].requests) {
      Entry& entry = table_[info.name];
      if (entry.by_rank.empty()) {
        entry.by_rank.resize(size_);
        entry.order = next_order_++;
      }
      if (!entry.by_rank[r]) ++entry.reported;
      entry.by_rank[r] = info;
    }
  }
  const int joined_count = static_cast<int>(std::count(joined.begin(), joined.end(), true));
  std::vector<std::pair<uint64_t, std::string>> ready;
  for (const auto& [name, entry] : table_) {
    int have = entry.reported;
    for (int r = 0; r < size_; ++r) have += joined[r] && !entry.by_rank[r] ? 1 : 0;
    // While some ranks have joined, an operation other than allreduce is answered (with
    // its error) as soon as a rank reports it: waiting for the others could hang, since
    // they need not make the same calls (Horovod's join tests name theirs differently).
    if ((have == size_ || (joined_count > 0 && kind_of(entry) != OpKind::kAllreduce)) && joined_count < size_) {
      ready.emplace_back(entry.order, name);
    }
  }
  std::sort(ready.begin(), ready.end());
  ResponseList out;
  for (const auto& [order, name] : ready) {
    out.responses.push_back(respond(name, table_[name], joined));
    table_.erase(name);
  }
  bool asked = false;
  for (const RankMessage& m : messages) asked |= !m.pending.empty();
  if (asked) {
    double oldest = 0;
    std::string report = stall_report(messages, joined, &oldest);
    if (!report.empty()) {
      log_warn(Subsys::kEngine, "stall inspector: ", report);
      if (stall.shutdown_seconds > 0 && oldest >= stall.shutdown_seconds) {
        out.shutdown_code = Code::kTimeout;
        out.shutdown_message = str_cat("the stall inspector stopped the runtime after ", stall.shutdown_seconds,
                                       " s (KOLO_STALL_SHUTDOWN_TIME): ", report);
      }
    }
  }
  return out;
}

}  // namespace kolo::runtime
