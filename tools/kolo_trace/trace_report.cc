#include "tools/kolo_trace/trace_report.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "support/status.h"

namespace kolo::trace {
namespace {

using json = nlohmann::json;

constexpr size_t kStragglerCalls = 100;      // the last calls that every rank completed
constexpr double kStragglerMinLagMs = 1.0;   // below this, the last rank in is noise
// A dump of KOLO_TRACE_CALLS' most (2^20 calls, ~400 B each) fits; a larger file is no dump,
// and is not read into memory.
constexpr off_t kMaxDumpBytes = off_t{1} << 30;

std::string ranks_phrase(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  return (ranks.size() == 1 ? "rank " : "ranks ") + kolo::rank_list(ranks, 64);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

bool completed(const CallEntry& c) { return c.state == "done" || c.state == "on_stream"; }

const CallEntry* find_call(const RankDump& d, long long seq) {
  for (auto it = d.calls.rbegin(); it != d.calls.rend(); ++it) {
    if (!it->p2p() && it->seq == seq) return &*it;
  }
  return nullptr;
}

long long last_completed(const RankDump& d) {
  long long last = 0;
  for (const CallEntry& c : d.calls) {
    if (!c.p2p() && completed(c)) last = std::max(last, c.seq);
  }
  return last;
}

long long last_entered(const RankDump& d) {
  long long last = 0;
  for (const CallEntry& c : d.calls) {
    if (!c.p2p()) last = std::max(last, c.seq);
  }
  return last;
}

// Who came last to the calls every rank completed: in each call, a rank's lag is how much
// shorter it waited than the rank that waited longest (durations, so that clocks of
// different hosts need not agree). A straggler lags by a steady margin.
void report_stragglers(const std::vector<const RankDump*>& ranks, std::ostringstream& out) {
  if (ranks.size() < 2) return;
  long long upto = last_completed(*ranks[0]);
  for (const RankDump* d : ranks) upto = std::min(upto, last_completed(*d));
  std::map<int, std::vector<double>> lags, waits;
  size_t calls = 0;
  for (long long seq = upto; seq >= 1 && calls < kStragglerCalls; --seq) {
    std::vector<double> wait;
    size_t untimed = 0;
    for (const RankDump* d : ranks) {
      const CallEntry* c = find_call(*d, seq);
      if (c == nullptr || !completed(*c)) break;
      // A small-call lane call with no end waited under a millisecond: none, here
      // (kLaneTimedEvery, engine/flight_recorder.h).
      const bool timed = c->ended_ms > 0;
      untimed += timed ? 0 : 1;
      wait.push_back(timed ? c->ended_ms - c->started_ms : 0.0);
    }
    if (wait.size() != ranks.size()) break;  // past the oldest call some ring still holds
    if (untimed == ranks.size()) continue;  // nobody waited: nothing to tell
    const double longest = *std::max_element(wait.begin(), wait.end());
    for (size_t i = 0; i < ranks.size(); ++i) {
      lags[ranks[i]->rank].push_back(longest - wait[i]);
      waits[ranks[i]->rank].push_back(wait[i]);
    }
    ++calls;
  }
  if (calls < 3) return;
  std::vector<std::pair<double, int>> by_lag;
  for (auto& [rank, lag] : lags) by_lag.emplace_back(median(lag), rank);
  std::sort(by_lag.rbegin(), by_lag.rend());
  const auto [lag, rank] = by_lag[0];
  const double next = by_lag.size() > 1 ? by_lag[1].first : 0;
  if (lag >= kStragglerMinLagMs && lag > 3 * next) {
    std::vector<double> others;
    for (auto& [r, w] : waits) {
      if (r != rank) others.push_back(median(w));
    }
    out << "  straggler: rank " << rank << " enters calls " << kolo::fixed_decimals(lag, 2) << " ms after the others (median of the last "
        << calls << " calls; it waits " << kolo::fixed_decimals(median(waits[rank]), 2) << " ms in a call, the others "
        << kolo::fixed_decimals(median(others), 2) << " ms)\n";
  } else {
    out << "  no straggler: over the last " << calls << " calls the last rank to enter is " << kolo::fixed_decimals(lag, 3)
        << " ms behind (median)\n";
  }
  out << "  slowest to enter (median lag over " << calls << " calls):";
  for (size_t i = 0; i < by_lag.size() && i < 3; ++i) out << " rank " << by_lag[i].second << " " << kolo::fixed_decimals(by_lag[i].first, 3) << " ms" << (i + 1 < std::min<size_t>(3, by_lag.size()) ? "," : "");
  out << '\n';
}

void report_comm(const std::string& comm, std::vector<const RankDump*> ranks, std::ostringstream& out) {
  std::sort(ranks.begin(), ranks.end(), [](const RankDump* a, const RankDump* b) { return a->rank < b->rank; });
  const int size = ranks[0]->size;
  std::set<int> have;
  std::map<std::string, std::vector<int>> reasons;
  for (const RankDump* d : ranks) have.insert(d->rank), reasons[d->reason].push_back(d->rank);
  std::vector<int> missing;
  for (int r = 0; r < size; ++r) {
    if (!have.count(r)) missing.push_back(r);
  }
  out << "communicator " << comm << ": " << ranks.size() << " of " << size << " ranks dumped (";
  bool first = true;
  for (auto& [reason, who] : reasons) out << (first ? "" : "; ") << reason << ": " << ranks_phrase(who), first = false;
  out << ")\n";
  if (!missing.empty()) {
    out << "  no dump from " << ranks_phrase(missing)
        << ": dead, never started, or alive out of reach (a signal dumps a live rank; kolorun sends one to the "
           "ranks of its own machine)\n";
  }
  // The last call each rank completed.
  std::map<long long, std::vector<int>> by_last;
  long long lowest = -1, highest = 0;
  for (const RankDump* d : ranks) {
    const long long last = last_completed(*d);
    by_last[last].push_back(d->rank);
    lowest = lowest < 0 ? last : std::min(lowest, last);
    highest = std::max(highest, last_entered(*d));
  }
  out << "  last call completed:";
  first = true;
  for (auto& [seq, who] : by_last) out << (first ? " " : "; ") << ranks_phrase(who) << " call " << seq, first = false;
  out << '\n';
  if (highest > lowest) {
    // Where the ranks part: the first call some rank did not complete.
    const long long k = lowest + 1;
    std::vector<int> never, failed, waiting;
    std::map<std::string, std::vector<int>> shapes;
    std::vector<double> waited;
    for (const RankDump* d : ranks) {
      const CallEntry* c = find_call(*d, k);
      if (c == nullptr) {
        never.push_back(d->rank);
        continue;
      }
      shapes[c->what()].push_back(d->rank);
      if (c->state == "failed") failed.push_back(d->rank), waited.push_back((c->ended_ms - c->started_ms) / 1e3);
      else if (!completed(*c)) waiting.push_back(d->rank);
    }
    // The call's shapes in the order of their lowest rank; the headline names the most common.
    std::vector<std::pair<std::string, std::vector<int>>> by_rank(shapes.begin(), shapes.end());
    std::sort(by_rank.begin(), by_rank.end(), [](const auto& a, const auto& b) { return a.second[0] < b.second[0]; });
    std::string what;
    size_t most = 0;
    for (auto& [shape, who] : by_rank) {
      if (who.size() > most) what = shape, most = who.size();
    }
    out << "  the ranks part at call " << k << (what.empty() ? "" : " (" + what + ")") << ":";
    std::vector<std::string> parts;
    if (!never.empty()) parts.push_back(ranks_phrase(never) + " never entered it");
    if (shapes.size() > 1) {
      std::string m = "mismatch:";
      for (auto& [shape, who] : by_rank) m += " " + ranks_phrase(who) + " called " + shape + ";";
      m.pop_back();
      parts.push_back(m);
    }
    if (!failed.empty()) parts.push_back(ranks_phrase(failed) + " failed in it after " + kolo::fixed_decimals(median(waited), 2) + " s");
    if (!waiting.empty()) parts.push_back(ranks_phrase(waiting) + " still in it");
    if (!missing.empty() && never.empty()) parts.push_back("look at " + ranks_phrase(missing) + " (no dump)");
    for (size_t i = 0; i < parts.size(); ++i) out << (i ? "; " : " ") << parts[i];
    out << '\n';
  } else {
    out << "  every rank dumped has completed call " << highest << " and none is in a call\n";
  }
  // The first error: the failed call that ended first.
  const RankDump* first_error = nullptr;
  double first_at = 0;
  for (const RankDump* d : ranks) {
    if (d->error.empty()) continue;
    double at = d->dumped_ms;
    for (const CallEntry& c : d->calls) {
      if (c.state == "failed") at = c.ended_ms;
    }
    if (first_error == nullptr || at < first_at) first_error = d, first_at = at;
  }
  if (first_error != nullptr) {
    out << "  first error: rank " << first_error->rank << " (host " << first_error->host << "): " << first_error->error
        << '\n';
  }
  report_stragglers(ranks, out);
}

}  // namespace

std::string CallEntry::what() const {
  std::string text = kind + " of " + std::to_string(count) + " x " + dtype;
  if (root >= 0) text += ", root " + std::to_string(root);
  return text;
}

bool parse_dump(const std::string& text, RankDump* out, std::string* why) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    *why = "not JSON, or cut short (a dump being written, or a full disk)";
    return false;
  }
  if (!j.is_object() || j.value("format", std::string()) != "kolo-flight-recorder") {
    *why = "not a kolo flight-recorder dump";
    return false;
  }
  if (j.value("version", 0) != 1) {
    *why = "a flight-recorder dump of another version (" + j.value("version", json()).dump() + ")";
    return false;
  }
  try {
    RankDump d;
    d.comm = j.at("comm").get<std::string>();
    d.rank = j.at("rank").get<int>();
    d.size = j.at("size").get<int>();
    d.host = j.value("host", std::string());
    d.reason = j.value("reason", std::string());
    d.error = j.value("error", std::string());
    d.dumped_ms = j.value("dumped_ns", 0.0) / 1e6;
    d.calls_recorded = j.value("calls_recorded", 0LL);
    if (d.size < 1 || d.rank < 0 || d.rank >= d.size) {
      *why = "rank " + std::to_string(d.rank) + " of size " + std::to_string(d.size) + " is out of range";
      return false;
    }
    for (const json& c : j.at("calls")) {
      CallEntry e;
      e.seq = c.at("seq").get<long long>();
      e.kind = c.at("kind").get<std::string>();
      e.dtype = c.at("dtype").get<std::string>();
      e.count = c.at("count").get<long long>();
      e.state = c.at("state").get<std::string>();
      e.root = c.value("root", -1);
      e.peer = c.value("peer", -1);
      e.entered_ms = c.value("entered_ns", 0.0) / 1e6;
      e.started_ms = c.value("started_ns", 0.0) / 1e6;
      e.ended_ms = c.value("ended_ns", 0.0) / 1e6;
      d.calls.push_back(std::move(e));
    }
    *out = std::move(d);
    return true;
  } catch (const json::exception& e) {
    *why = std::string("a field is missing or of the wrong type (") + e.what() + ")";
    return false;
  }
}

Dumps read_folder(const std::string& folder) {
  Dumps dumps;
  DIR* dir = opendir(folder.c_str());
  if (dir == nullptr) {
    dumps.problems.push_back({folder, "cannot open the folder"});
    return dumps;
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.rfind("kolo-trace.", 0) == 0 && name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0) {
      names.push_back(name);
    }
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string path = folder + "/" + name;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && st.st_size > kMaxDumpBytes) {
      dumps.problems.push_back({path, "larger than any dump (" + std::to_string(st.st_size) + " bytes)"});
      continue;
    }
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    RankDump d;
    std::string why;
    if (!in || !parse_dump(text.str(), &d, &why)) {
      dumps.problems.push_back({path, in ? why : "cannot read it"});
      continue;
    }
    d.file = path;
    dumps.ranks.push_back(std::move(d));
  }
  return dumps;
}

std::string report(const Dumps& dumps, const std::string& folder) {
  std::ostringstream out;
  std::map<std::string, std::vector<const RankDump*>> by_comm;
  for (const RankDump& d : dumps.ranks) by_comm[d.comm].push_back(&d);
  out << "kolo-trace: " << dumps.ranks.size() << " dump" << (dumps.ranks.size() == 1 ? "" : "s") << " of "
      << by_comm.size() << " communicator" << (by_comm.size() == 1 ? "" : "s") << " in " << folder << '\n';
  for (const Problem& p : dumps.problems) out << "  skipped " << p.file << ": " << p.why << '\n';
  // Communicators with a failure first, then by name.
  std::vector<std::pair<bool, std::string>> order;
  for (auto& [comm, ranks] : by_comm) {
    bool failed = false;
    for (const RankDump* d : ranks) failed = failed || !d->error.empty();
    order.emplace_back(!failed, comm);
  }
  std::sort(order.begin(), order.end());
  for (auto& [healthy, comm] : order) {
    std::vector<const RankDump*>& ranks = by_comm[comm];
    std::set<int> sizes;
    for (const RankDump* d : ranks) sizes.insert(d->size);
    if (sizes.size() > 1) {
      out << "communicator " << comm << ": dumps disagree on its size; is the folder shared by two jobs?\n";
      continue;
    }
    report_comm(comm, ranks, out);
  }
  return out.str();
}

}  // namespace kolo::trace
