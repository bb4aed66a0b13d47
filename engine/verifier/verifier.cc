// The verifier's driver: structure, races (per rank, over the dependency graph), then one
// simulation of all ranks together, then the per-collective result check. Values and
// buffer layouts live in verifier_values.{h,cc}; one-host programs (shared staging,
// counters instead of messages) run through verifier_shared.{h,cc} instead.
#include "engine/verifier/verifier.h"

#include <algorithm>
#include <array>
#include <unordered_map>

#include "engine/verifier/verifier_messages.h"
#include "engine/verifier/verifier_shared.h"
#include "engine/verifier/verifier_values.h"

namespace kolo {
namespace {

using verifier::kUnwritten;
using verifier::Layout;

// A slice resolved to cells: region of its owner's memory and element range.
struct Cells {
  int owner = 0;
  int region = 0;
  size_t first = 0;
  size_t count = 0;
};

class Verifier final : public verifier::SharedHost {
 public:
  Verifier(const CollSpec& spec, const std::vector<Schedule>& schedules)
      : spec_(spec), s_(schedules), p_(static_cast<int>(schedules.size())), es_(dtype_size(spec.dtype)),
        shared_(schedules, es_, *this) {}

  Status run() {
    // Message keys pack (from, to) in 16 bits each.
    if (p_ < 1 || p_ > 65535) return error(Code::kInternal, "verifier: ", coll_name(spec_.kind), ": ", p_, " schedules");
    for (int r = 0; r < p_; ++r) layouts_.push_back(verifier::layout_for(spec_for_rank(spec_, r), r, p_, s_[r].scratch_bytes));
    one_host_ = verifier::is_one_host(s_);
    if (one_host_) KOLO_TRY(shared_.check(layouts_));
    for (int r = 0; r < p_; ++r) KOLO_TRY(check_structure(r));
    if (one_host_) {  // steps run in order: a rank's own accesses are ordered
      init_memory();
      KOLO_TRY(shared_.run());
      return check_results();
    }
    KOLO_TRY(match());
    for (int r = 0; r < p_; ++r) KOLO_TRY(check_races(r));
    KOLO_TRY(simulate());
    return check_results();
  }

 private:
  template <typename... Args>
  Status fail(int rank, size_t step, const Args&... args) const {
    const Step& st = s_[rank].steps[step];
    return error(Code::kInternal, "verifier: ", coll_name(spec_.kind), " (", schedule_algorithm_name(s_[rank]), "), p=", p_,
                 ", count ", spec_.count, ", rank ", rank, ", step ", step, " (", verifier::step_label(st), "): ", args...);
  }
  // verifier::SharedHost
  Status execute(int rank, size_t step) override { return execute_local(rank, step); }
  Status fail_step(int rank, size_t step, const std::string& why) const override { return fail(rank, step, why); }
  Status fail_program(const std::string& why) const override {
    return error(Code::kInternal, "verifier: ", coll_name(spec_.kind), " (", s_.empty() ? "" : schedule_algorithm_name(s_[0]), "), p=",
                 p_, ", count ", spec_.count, ": ", why);
  }
  template <typename... Args>
  Status fail_rank(int rank, const Args&... args) const {
    return error(Code::kInternal, "verifier: ", coll_name(spec_.kind), " (", schedule_algorithm_name(s_[rank]), "), p=", p_,
                 ", count ", spec_.count, ", rank ", rank, ": ", args...);
  }
  static std::string slice_str(const Slice& s) {
    return str_cat(verifier::buffer_name(s.buffer), " [", s.offset, ",", s.offset + s.bytes, ")");
  }

  Cells cells(int rank, const Slice& s) const {
    if (s.buffer == kBufStaging) {
      auto [first, count] = shared_.cells(s);
      return {rank, verifier::kStagingRegion, first, count};
    }
    const auto [owner, b] = verifier::owner_of(rank, s.buffer);
    const Layout& l = layouts_[owner];
    return {owner, l.region[b], l.base[b] + s.offset / es_, s.bytes / es_};
  }

  Status check_slice(int r, size_t i, const Slice& s) const {
    if (s.buffer == kBufStaging && one_host_) return Status();  // SharedMemory::check did
    // A peer's buffer: SharedMemory::check found its owner.
    if ((s.buffer < kBufInput || s.buffer > kBufScratch) && (s.buffer < kBufRanks || !one_host_)) {
      return fail(r, i, "names buffer ", s.buffer);
    }
    const auto [owner, b] = verifier::owner_of(r, s.buffer);
    const size_t limit = layouts_[owner].bytes[b];
    if (s.offset > limit || s.bytes > limit - s.offset) {
      return fail(r, i, "slice ", slice_str(s), " is outside the ", verifier::buffer_name(s.buffer), " of ", limit,
                  " bytes");
    }
    if (s.offset % es_ != 0 || s.bytes % es_ != 0) {
      return fail(r, i, "slice ", slice_str(s), " is not aligned to ", es_, "-byte elements");
    }
    return Status();
  }

  Status check_structure(int r) const {
    const Schedule& s = s_[r];
    for (size_t i = 0; i < s.steps.size(); ++i) {
      const Step& st = s.steps[i];
      if (st.call != 0) return fail(r, i, "belongs to call ", st.call, "; the verifier checks one call");
      for (int d : st.deps) {
        if (d < 0 || static_cast<size_t>(d) >= i) return fail(r, i, "depends on step ", d, ", not an earlier step");
      }
      if (st.kind == StepKind::kSignal || st.kind == StepKind::kWait) continue;  // SharedMemory::check did
      const bool transfer = st.kind == StepKind::kSend || st.kind == StepKind::kRecv;
      if (transfer && (st.peer < 0 || st.peer >= p_ || st.peer == r)) return fail(r, i, "has peer ", st.peer);
      const size_t want_srcs = st.kind == StepKind::kRecv ? 0 : 1;
      if (st.kind == StepKind::kReduce) {
        if (st.srcs.empty() || st.srcs.size() > 8) return fail(r, i, "reduce has ", st.srcs.size(), " sources (1..8)");
      } else if (st.srcs.size() != want_srcs) {
        return fail(r, i, "has ", st.srcs.size(), " sources, expected ", want_srcs);
      }
      for (const Slice& src : st.srcs) KOLO_TRY(check_slice(r, i, src));
      if (st.kind != StepKind::kSend) KOLO_TRY(check_slice(r, i, st.dst));
      if (st.kind == StepKind::kReduce || st.kind == StepKind::kCopy) {
        if (st.count * es_ != st.dst.bytes) {
          return fail(r, i, "count ", st.count, " does not match dst ", slice_str(st.dst));
        }
        const Cells d = cells(r, st.dst);
        for (const Slice& src : st.srcs) {
          if (src.bytes != st.dst.bytes) return fail(r, i, "source ", slice_str(src), " and dst ", slice_str(st.dst), " differ in size");
          // The kernels work element by element: a source may be the dst itself, never a
          // shifted overlap of it (after aliasing in place).
          const Cells c = cells(r, src);
          if (c.owner == d.owner && c.region == d.region && c.first != d.first && c.first < d.first + d.count &&
              d.first < c.first + c.count) {
            return fail(r, i, "source ", slice_str(src), " partly overlaps dst ", slice_str(st.dst));
          }
        }
      }
    }
    return Status();
  }

  // The cross-rank edges of the happens-before relation (verifier_messages.h).
  Status match() {
    return verifier::match_messages(s_, messages_, [&](int r, size_t i, const std::string& why) { return fail(r, i, why); });
  }

  // Whether step a of rank r happens before step b of the same rank through other ranks:
  // a recv's write happens after its matching send started, so a rank may rely on a
  // message chain instead of a local dependency (the ring reduce's root does). Only asked
  // for pairs the local deps leave unordered; one backward search per b, cached.
  bool through_messages(int r, int a, int b) {
    auto cached = reached_.find(b);
    if (cached == reached_.end()) {
      std::vector<bool> mine(s_[r].steps.size(), false);
      if (visited_.size() != base_[p_]) visited_.assign(base_[p_], 0);
      ++stamp_;
      std::vector<std::pair<int, int>> stack{{r, b}};
      while (!stack.empty()) {
        auto [q, j] = stack.back();
        stack.pop_back();
        auto visit = [&](int q2, int j2) {
          if (visited_[base_[q2] + j2] == stamp_) return;
          visited_[base_[q2] + j2] = stamp_;
          if (q2 == r) mine[j2] = true;
          stack.push_back({q2, j2});
        };
        for (int d : s_[q].steps[j].deps) visit(q, d);
        if (s_[q].steps[j].kind == StepKind::kRecv && sender_[q][j].first >= 0) visit(sender_[q][j].first, sender_[q][j].second);
      }
      cached = reached_.emplace(b, std::move(mine)).first;
    }
    return cached->second[a];
  }

  // Whether step a of rank r happens before its step b (a < b) through deps. Most pairs
  // are direct deps; otherwise a search back from b that never goes below a (deps point
  // back). Cheaper than a transitive closure, which at p = 1024 would cost gigabytes.
  bool local_before(int r, int a, int b) {
    const auto& steps = s_[r].steps;
    for (int d : steps[b].deps) {
      if (d == a) return true;
    }
    if (seen_.size() < steps.size()) seen_.resize(steps.size(), 0);
    ++seen_stamp_;
    std::vector<int>& stack = dfs_;
    stack.assign(1, b);
    while (!stack.empty()) {
      int j = stack.back();
      stack.pop_back();
      for (int d : steps[j].deps) {
        if (d == a) return true;
        if (d > a && seen_[d] != seen_stamp_) {
          seen_[d] = seen_stamp_;
          stack.push_back(d);
        }
      }
    }
    return false;
  }

  // Races: walking the steps in index order (a topological order, deps point back), every
  // access must be ordered after the element's last write, and a write also after every
  // read since that write; by transitivity that orders it after all earlier accesses.
  Status check_races(int r) {
    const Schedule& s = s_[r];
    const size_t n = s.steps.size();
    // Elements of one slice ask the same pair over and over: remember the last answer.
    int memo_a = -1, memo_b = -1;
    bool memo = false;
    auto before = [&](int a, size_t b) {
      if (a == memo_a && static_cast<int>(b) == memo_b) return memo;
      memo_a = a;
      memo_b = static_cast<int>(b);
      memo = local_before(r, a, memo_b) || through_messages(r, a, memo_b) || through_messages(r, memo_b, a);
      return memo;
    };
    reached_.clear();
    // Per element: the last write and the reads since it, as a list in one arena (no
    // allocation per element; a write drops the list).
    for (int g = 0; g < 3; ++g) track_[g].assign(layouts_[r].region_elems[g], {-1, -1});
    reads_.clear();
    for (size_t i = 0; i < n; ++i) {
      const Step& st = s.steps[i];
      const int me = static_cast<int>(i);
      if (is_self_copy(r, st)) continue;
      for (const Slice& src : st.srcs) {
        Cells c = cells(r, src);
        for (size_t e = c.first; e < c.first + c.count; ++e) {
          auto& [last_write, head] = track_[c.region][e];
          if (last_write >= 0 && last_write != me && !before(last_write, i)) {
            return race(r, last_write, me, c.region, e, "writes", "reads");
          }
          if (head < 0 || reads_[head].first != me) {
            reads_.push_back({me, head});
            head = static_cast<int>(reads_.size()) - 1;
          }
        }
      }
      if (st.kind == StepKind::kSend) continue;
      Cells c = cells(r, st.dst);
      for (size_t e = c.first; e < c.first + c.count; ++e) {
        auto& [last_write, head] = track_[c.region][e];
        if (last_write >= 0 && last_write != me && !before(last_write, i)) {
          return race(r, last_write, me, c.region, e, "writes", "writes");
        }
        for (int k = head; k >= 0; k = reads_[k].second) {
          const int rd = reads_[k].first;
          if (rd != me && !before(rd, i)) return race(r, rd, me, c.region, e, "reads", "writes");
        }
        last_write = me;
        head = -1;
      }
    }
    return Status();
  }

  // The executor skips a copy onto itself without a scale (in place), so it touches nothing.
  bool is_self_copy(int r, const Step& st) const {
    if (st.kind != StepKind::kCopy || st.scale != ScaleUse::kNone) return false;
    Cells a = cells(r, st.srcs[0]), b = cells(r, st.dst);
    return a.region == b.region && a.first == b.first;
  }

  // Names the slice of `step` that covers element `e` of `region`.
  std::string touching(int r, int step, int region, size_t e) const {
    const Step& st = s_[r].steps[step];
    auto covers = [&](const Slice& sl) {
      Cells c = cells(r, sl);
      return c.region == region && e >= c.first && e < c.first + c.count;
    };
    if (st.kind != StepKind::kSend && covers(st.dst)) return slice_str(st.dst);
    for (const Slice& src : st.srcs) {
      if (covers(src)) return slice_str(src);
    }
    return "?";
  }

  Status race(int r, int a, int b, int region, size_t e, const char* a_does, const char* b_does) const {
    return fail(r, b, "race: step ", a, " (", verifier::step_kind_name(s_[r].steps[a].kind), ") ", a_does, " ",
                touching(r, a, region, e), " and step ", b, " ", b_does, " ", touching(r, b, region, e),
                " with no dependency path between them (local or through messages)");
  }

  // Reads a slice's cells; every element must have been written.
  Status read(int r, size_t i, const Slice& s, std::vector<int32_t>& out) {
    if (s.buffer == kBufStaging) return shared_.read(r, i, s, out);
    Cells c = cells(r, s);
    const std::vector<int32_t>& m = mem_[c.owner][c.region];
    out.assign(m.begin() + c.first, m.begin() + c.first + c.count);
    for (size_t k = 0; k < out.size(); ++k) {
      if (out[k] == kUnwritten) {
        return fail(r, i, "reads ", slice_str(s), " whose byte ", s.offset + k * es_, " was never written");
      }
    }
    return Status();
  }

  Status write(int r, size_t i, const Slice& s, const std::vector<int32_t>& v) {
    if (s.buffer == kBufStaging) return shared_.write(r, i, s, v);
    Cells c = cells(r, s);
    std::copy(v.begin(), v.end(), mem_[c.owner][c.region].begin() + c.first);
    return Status();
  }

  Status execute_local(int r, size_t i) {
    const Step& st = s_[r].steps[i];
    std::string why;
    if (st.kind == StepKind::kCopy) {
      KOLO_TRY(read(r, i, st.srcs[0], a_));
      for (int32_t& id : a_) {
        id = values_.scaled(id, st.scale, &why);
        if (id < 0) return fail(r, i, why);
      }
      return write(r, i, st.dst, a_);
    }
    const size_t k = st.srcs.size();
    srcs_.resize(k);
    for (size_t j = 0; j < k; ++j) KOLO_TRY(read(r, i, st.srcs[j], srcs_[j]));
    a_.resize(st.count);
    int32_t ids[8];
    for (size_t e = 0; e < st.count; ++e) {
      for (size_t j = 0; j < k; ++j) ids[j] = srcs_[j][e];
      int32_t v = values_.combine(ids, k, &why);
      if (v >= 0) v = values_.scaled(v, st.scale, &why);
      if (v < 0) return fail(r, i, "element ", e, " of dst ", slice_str(st.dst), ": ", why);
      a_[e] = v;
    }
    return write(r, i, st.dst, a_);
  }

  // Symbolic memory: every rank's input holds its original values, the rest is unwritten.
  void init_memory() {
    values_ = verifier::ValueTable();
    // Growing the table by doubling would touch (and fault in) much more memory.
    size_t expected = 0;
    for (int r = 0; r < p_; ++r) {
      expected += layouts_[r].bytes[kBufInput] / es_;
      for (const Step& st : s_[r].steps) expected += st.scale != ScaleUse::kNone || st.kind == StepKind::kReduce ? st.count : 0;
    }
    values_.reserve(expected);
    mem_.assign(p_, {});
    for (int r = 0; r < p_; ++r) {
      const Layout& l = layouts_[r];
      for (int g = 0; g < 3; ++g) mem_[r][g].assign(l.region_elems[g], kUnwritten);
      Cells in = cells(r, Slice{kBufInput, 0, l.bytes[kBufInput]});
      for (size_t e = 0; e < in.count; ++e) mem_[r][in.region][in.first + e] = values_.original(r, e);
    }
  }

  Status simulate() {
    init_memory();
    std::vector<std::vector<int>> pending(p_), dependents_at(p_), dependents(p_);
    std::vector<size_t> done(p_, 0);
    std::vector<std::pair<int, int>> work;  // ready steps (rank, step)
    for (int r = 0; r < p_; ++r) {
      // Dependents in CSR form: the step list can be thousands long at p = 1024.
      const auto& steps = s_[r].steps;
      pending[r].resize(steps.size());
      dependents_at[r].assign(steps.size() + 1, 0);
      for (size_t i = 0; i < steps.size(); ++i) {
        pending[r][i] = static_cast<int>(steps[i].deps.size());
        for (int d : steps[i].deps) ++dependents_at[r][d + 1];
        if (steps[i].deps.empty()) work.push_back({r, static_cast<int>(i)});
      }
      for (size_t i = 0; i < steps.size(); ++i) dependents_at[r][i + 1] += dependents_at[r][i];
      dependents[r].resize(dependents_at[r].back());
      std::vector<int> fill(dependents_at[r].begin(), dependents_at[r].end() - 1);
      for (size_t i = 0; i < steps.size(); ++i) {
        for (int d : steps[i].deps) dependents[r][fill[d]++] = static_cast<int>(i);
      }
    }
    // Messages by the send's global step number: sends are matched already (match()).
    std::vector<int64_t> posted(base_[p_], -1);  // offset of a sent message in arena
    std::vector<bool> waiting(base_[p_], false);   // recv ready before its send was posted
    arena_.clear();
    std::vector<std::vector<bool>> is_done(p_);
    for (int r = 0; r < p_; ++r) is_done[r].assign(s_[r].steps.size(), false);
    auto complete = [&](int r, int i) {
      is_done[r][i] = true;
      ++done[r];
      for (int k = dependents_at[r][i]; k < dependents_at[r][i + 1]; ++k) {
        int j = dependents[r][k];
        if (--pending[r][j] == 0) work.push_back({r, j});
      }
    };
    auto deliver = [&](int q, int j, int r, int i) -> Status {
      const Step& st = s_[r].steps[i];
      const size_t bytes = s_[q].steps[j].srcs[0].bytes;
      if (bytes != st.dst.bytes) {
        return fail(r, i, "receives ", st.dst.bytes, " bytes but rank ", q, " step ", j, " sends ", bytes);
      }
      const int32_t* m = arena_.data() + posted[base_[q] + j];
      Cells c = cells(r, st.dst);
      std::copy(m, m + c.count, mem_[r][c.region].begin() + c.first);
      complete(r, i);
      return Status();
    };
    while (!work.empty()) {
      auto [r, i] = work.back();
      work.pop_back();
      const Step& st = s_[r].steps[i];
      if (st.kind == StepKind::kSend) {
        KOLO_TRY(read(r, i, st.srcs[0], a_));
        posted[base_[r] + i] = static_cast<int64_t>(arena_.size());
        arena_.insert(arena_.end(), a_.begin(), a_.end());
        complete(r, i);  // eager: the transport buffers it
        auto [q, j] = receiver_[r][i];
        if (q >= 0 && waiting[base_[q] + j]) KOLO_TRY(deliver(r, i, q, j));
      } else if (st.kind == StepKind::kRecv) {
        auto [q, j] = sender_[r][i];
        if (q >= 0 && posted[base_[q] + j] >= 0) {
          KOLO_TRY(deliver(q, j, r, i));
        } else {
          waiting[base_[r] + i] = true;
        }
      } else {
        KOLO_TRY(execute_local(r, static_cast<size_t>(i)));
        complete(r, i);
      }
    }
    std::string stuck;
    int stuck_ranks = 0;
    for (int r = 0; r < p_; ++r) {
      if (done[r] == s_[r].steps.size()) continue;
      if (++stuck_ranks > 4) continue;
      stuck += str_cat(stuck.empty() ? "" : "; ", "rank ", r, " at");
      int shown = 0;
      for (size_t i = 0; i < s_[r].steps.size() && shown < 4; ++i) {
        const Step& st = s_[r].steps[i];
        if (is_done[r][i] || pending[r][i] != 0) continue;
        stuck += str_cat(" step ", i, " (", verifier::step_kind_name(st.kind), " from ", st.peer, " tag ", st.tag, ")");
        ++shown;
      }
      stuck += str_cat(" [", s_[r].steps.size() - done[r], " steps left]");
    }
    if (stuck_ranks > 0) {
      return error(Code::kInternal, "verifier: ", coll_name(spec_.kind), " (", schedule_algorithm_name(s_[0]), "), p=", p_,
                   ", count ", spec_.count, ": deadlock, ", stuck_ranks, " rank(s) cannot progress: ", stuck);
    }
    for (int r = 0; r < p_; ++r) {
      for (size_t i = 0; i < s_[r].steps.size(); ++i) {
        if (s_[r].steps[i].kind == StepKind::kSend && receiver_[r][i].first < 0) {
          return fail(r, i, "unmatched send: no recv on rank ", s_[r].steps[i].peer, " has this tag");
        }
      }
    }
    return Status();
  }

  Status check_results() const {
    return verifier::check_results(
        spec_, p_, values_,
        [&](int r, size_t e) {
          const Cells c = cells(r, Slice{kBufOutput, 0, layouts_[r].bytes[kBufOutput]});
          return mem_[r][c.region][c.first + e];
        },
        [&](int r, const std::string& why) { return fail_rank(r, why); });
  }

  const CollSpec& spec_;
  const std::vector<Schedule>& s_;
  const int p_;
  const size_t es_;
  std::vector<Layout> layouts_;
  verifier::ValueTable values_;
  std::vector<std::array<std::vector<int32_t>, 3>> mem_;  // per rank, per region: value ids
  std::vector<int32_t> a_;
  std::vector<std::vector<int32_t>> srcs_;
  verifier::Messages messages_;  // sends matched to recvs
  std::vector<std::vector<std::pair<int, int>>>& sender_ = messages_.sender;
  std::vector<std::vector<std::pair<int, int>>>& receiver_ = messages_.receiver;
  std::vector<size_t>& base_ = messages_.base;
  std::vector<int32_t> arena_;                              // contents of the sent messages
  std::vector<uint32_t> visited_;
  uint32_t stamp_ = 0;
  std::vector<uint32_t> seen_;  // local_before's visited marks
  uint32_t seen_stamp_ = 0;
  std::vector<int> dfs_;
  std::vector<std::pair<int, int>> track_[3];  // check_races: per element (last write, reads list)
  std::vector<std::pair<int, int>> reads_;     // check_races: (step, next) list nodes
  std::unordered_map<int, std::vector<bool>> reached_;    // per step of the rank being checked
  verifier::SharedMemory shared_;  // one-host programs: the staging slots and counters
  bool one_host_ = false;
};

}  // namespace

Status verify_schedules(const CollSpec& spec, const std::vector<Schedule>& schedules) {
  if (spec.kind == CollKind::kAllgatherv &&
      (spec.counts.size() != schedules.size() || spec.displs.size() != schedules.size())) {
    return error(Code::kInternal, "verifier: allgatherv needs counts and displs for each of ", schedules.size(), " ranks");
  }
  return Verifier(spec, schedules).run();
}

}  // namespace kolo
