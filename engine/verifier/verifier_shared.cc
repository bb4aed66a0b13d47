#include "engine/verifier/verifier_shared.h"

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "engine/verifier/verifier_values.h"

namespace kolo::verifier {

bool is_one_host(const std::vector<Schedule>& schedules) {
  for (const Schedule& s : schedules) {
    for (const Step& st : s.steps) {
      if (st.kind == StepKind::kSignal || st.kind == StepKind::kWait) return true;
      if (st.kind != StepKind::kSend && st.dst.buffer >= kBufStaging) return true;
      for (const Slice& src : st.srcs) {
        if (src.buffer >= kBufStaging) return true;
      }
    }
  }
  return false;
}

Status SharedMemory::check(const std::vector<Layout>& layouts) {
  layouts_ = &layouts;
  peers_ = false;
  if (p_ > kMaxSharedRanks) {
    return host_.fail_program(str_cat("one-host programs of more than ", kMaxSharedRanks, " ranks are not supported"));
  }
  slots_ = s_[0].slots;
  slot_bytes_ = s_[0].slot_bytes;
  for (int r = 1; r < p_; ++r) {
    if (s_[r].slots != slots_ || s_[r].slot_bytes != slot_bytes_) {
      return host_.fail_program(str_cat("rank ", r, " has ", s_[r].slots, " staging slots of ", s_[r].slot_bytes,
                                        " bytes, rank 0 has ", slots_, " of ", slot_bytes_));
    }
  }
  const size_t slot_count = static_cast<size_t>(p_) * slots_;
  if (slot_bytes_ > 0 && slot_count > SIZE_MAX / 2 / slot_bytes_) {
    return host_.fail_program(str_cat("staging of ", slot_count, " slots of ", slot_bytes_, " bytes is too large"));
  }
  // Cells only for the part of each slot the program uses: a default 1 MB slot of 64 ranks
  // would be millions of cells where a small call touches a few.
  base_.assign(slot_count + 1, 0);
  for (int r = 0; r < p_; ++r) {
    std::vector<uint64_t> last(kCounters, 0);
    const auto& steps = s_[r].steps;
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& st = steps[i];
      if (st.kind == StepKind::kSend || st.kind == StepKind::kRecv) {
        return host_.fail_step(r, i, "a one-host program exchanges no messages");
      }
      if (i > 0 && std::find(st.deps.begin(), st.deps.end(), static_cast<int>(i) - 1) == st.deps.end()) {
        return host_.fail_step(r, i, str_cat("one-host programs run in order, but it does not depend on step ", i - 1));
      }
      if (st.kind == StepKind::kSignal || st.kind == StepKind::kWait) {
        if (st.counter < 0 || st.counter >= kCounters) {
          return host_.fail_step(r, i, str_cat("names counter ", st.counter, " (0..", kCounters - 1, ")"));
        }
        if (!st.srcs.empty()) return host_.fail_step(r, i, str_cat("has ", st.srcs.size(), " sources, expected 0"));
      }
      if (st.kind == StepKind::kWait && (st.peer < -1 || st.peer >= p_ || st.peer == r)) {
        return host_.fail_step(r, i, str_cat("waits for rank ", st.peer, " (another rank of 0..", p_ - 1, ", or -1: all)"));
      }
      if (st.kind == StepKind::kSignal) {
        if (st.value < last[st.counter]) {
          return host_.fail_step(r, i, str_cat("sets ", counter_name(st.counter), " back from ", last[st.counter],
                                               " to ", st.value, " (counters only grow)"));
        }
        last[st.counter] = st.value;
      }
      if (st.kind == StepKind::kCopy || st.kind == StepKind::kReduce) {
        KOLO_TRY(check_slice(r, i, st.dst));
        for (const Slice& src : st.srcs) KOLO_TRY(check_slice(r, i, src));
      }
    }
  }
  // base_ held each slot's used cells; turn them into offsets. The ranks' buffers follow.
  size_t at = 0;
  for (size_t k = 0; k <= slot_count; ++k) {
    const size_t used = base_[k];
    base_[k] = at;
    at += used;
  }
  rank_base_.assign(peers_ ? 2 * static_cast<size_t>(p_) + 1 : 0, at);
  for (size_t k = 0; k + 1 < rank_base_.size(); ++k) {
    rank_base_[k + 1] = rank_base_[k] + layouts[k / 2].region_elems[k % 2];
  }
  return Status();
}

Status SharedMemory::check_slice(int r, size_t i, const Slice& s) {
  if (s.buffer >= kBufRanks) {
    const auto [owner, b] = owner_of(r, s.buffer);
    if (owner >= p_) return host_.fail_step(r, i, str_cat("names ", buffer_name(s.buffer), " of ", p_, " ranks"));
    peers_ = true;
    return Status();
  }
  if (s.buffer != kBufStaging) return Status();
  const size_t total = static_cast<size_t>(p_) * slots_ * slot_bytes_;
  if (s.offset > total || s.bytes > total - s.offset) {
    return host_.fail_step(r, i, str_cat("slice staging [", s.offset, ",", s.offset + s.bytes, ") is outside the staging of ",
                                         total, " bytes (", p_, " ranks x ", slots_, " slots x ", slot_bytes_, " bytes)"));
  }
  if (s.bytes == 0) return Status();
  const size_t slot = s.offset / slot_bytes_, in = s.offset % slot_bytes_;
  if (in % es_ != 0 || s.bytes % es_ != 0) {
    return host_.fail_step(r, i, str_cat("slice ", slice_str(s), " is not aligned to ", es_, "-byte elements"));
  }
  if (in + s.bytes > slot_bytes_) return host_.fail_step(r, i, str_cat("slice ", slice_str(s), " runs past the end of its slot"));
  base_[slot] = std::max(base_[slot], (in + s.bytes) / es_);
  return Status();
}

std::pair<size_t, size_t> SharedMemory::cells(const Slice& s) const {
  if (s.bytes == 0) return {0, 0};
  return {base_[s.offset / slot_bytes_] + s.offset % slot_bytes_ / es_, s.bytes / es_};
}

bool SharedMemory::arrived(int r, const Step& st, int* short_peer) const {
  for (int q = st.peer < 0 ? 0 : st.peer; q < (st.peer < 0 ? p_ : st.peer + 1); ++q) {
    if (q != r && counter_[q * kCounters + st.counter] < st.value) {
      if (short_peer != nullptr) *short_peer = q;
      return false;
    }
  }
  return true;
}

// The waiting rank now comes after rank q's first signal that set `counter` to `value` or
// more (counter 0 is where every counter starts: no signal needed).
void SharedMemory::join(int r, int q, int counter, uint64_t value) {
  if (value == 0) return;
  const std::vector<Signal>& list = signals_[q * kCounters + counter];
  auto it = std::lower_bound(list.begin(), list.end(), value, [](const Signal& s, uint64_t v) { return s.value < v; });
  const uint32_t* snap = snapshots_.data() + it->snapshot;
  uint32_t* mine = clock_.data() + static_cast<size_t>(r) * p_;
  for (int k = 0; k < p_; ++k) mine[k] = std::max(mine[k], snap[k]);
}

// Two passes in the same order: the first proves what depends on happens-before alone
// (races, deadlock, reads of staging nobody wrote), so that a missing wait is named as
// such rather than by a wrong value it lets through; the second computes the values.
Status SharedMemory::run() {
  KOLO_TRY(pass(false));
  return pass(true);
}

Status SharedMemory::pass(bool values) {
  const size_t n = base_.empty() ? 0 : base_.back();
  const size_t end = rank_base_.empty() ? n : rank_base_.back();
  if (values) {
    value_.assign(n, kUnwritten);
  } else {
    writer_.assign(end, -1);
    written_at_.assign(end, 0);
    reads_.assign(end, -1);
    nodes_.clear();
    free_ = -1;
    unwritten_ = Status();
    for (int q = 0; q < p_ && peers_; ++q) {  // the caller's input, there by q's first step
      size_t first = 0, count = 0;
      int owner = q;
      tracked(q, Slice{kBufInput, 0, (*layouts_)[q].bytes[kBufInput]}, &first, &count, &owner);
      std::fill(writer_.begin() + first, writer_.begin() + first + count, static_cast<int16_t>(q));
      std::fill(written_at_.begin() + first, written_at_.begin() + first + count, 1u);
    }
  }
  clock_.assign(static_cast<size_t>(p_) * p_, 0);
  counter_.assign(static_cast<size_t>(p_) * kCounters, 0);
  signals_.assign(static_cast<size_t>(p_) * kCounters, {});
  snapshots_.clear();
  std::vector<size_t> pc(p_, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < p_; ++r) {
      const auto& steps = s_[r].steps;
      while (pc[r] < steps.size()) {
        const size_t i = pc[r];
        const Step& st = steps[i];
        if (st.kind == StepKind::kWait && !arrived(r, st, nullptr)) break;
        clock_[static_cast<size_t>(r) * p_ + r] = static_cast<uint32_t>(i + 1);
        if (st.kind == StepKind::kWait) {
          for (int q = 0; q < p_; ++q) {
            if (q != r && (st.peer < 0 || st.peer == q)) join(r, q, st.counter, st.value);
          }
        } else if (st.kind == StepKind::kSignal) {
          uint64_t& now = counter_[r * kCounters + st.counter];
          if (st.value > now) {
            now = st.value;
            signals_[r * kCounters + st.counter].push_back({st.value, snapshots_.size()});
            const auto row = clock_.begin() + static_cast<ptrdiff_t>(r) * p_;
            snapshots_.insert(snapshots_.end(), row, row + p_);
          }
        } else if (values) {
          KOLO_TRY(host_.execute(r, i));
        } else {
          for (const Slice& src : st.srcs) KOLO_TRY(access(r, i, src, false));
          KOLO_TRY(access(r, i, st.dst, true));
        }
        ++pc[r];
        progress = true;
      }
    }
  }
  std::string stuck;
  int stuck_ranks = 0;
  for (int r = 0; r < p_; ++r) {
    if (pc[r] == s_[r].steps.size()) continue;
    if (++stuck_ranks > 8) continue;
    const Step& st = s_[r].steps[pc[r]];
    int q = -1;
    arrived(r, st, &q);
    stuck += str_cat(stuck.empty() ? "" : "; ", "rank ", r, " step ", pc[r], " (", step_label(st), ": rank ", q, "'s ",
                     counter_name(st.counter), " stays at ", counter_[q * kCounters + st.counter], ")");
  }
  if (stuck_ranks > 0) {
    return host_.fail_program(str_cat("deadlock, ", stuck_ranks, " rank(s) wait for counters that never get there: ", stuck));
  }
  if (values) return Status();
  // Without a race, a read that found nothing written comes after no write in any order.
  KOLO_TRY(unwritten_);
  return returned();
}

// The cells of a slice the race pass follows: staging, and where peers' buffers are named,
// every rank's input and output (scratch is private). owner: whose buffer, -1 for staging.
bool SharedMemory::tracked(int r, const Slice& s, size_t* first, size_t* count, int* owner) const {
  if (s.buffer == kBufStaging) {
    std::tie(*first, *count) = cells(s);
    *owner = -1;
    return true;
  }
  if (!peers_) return false;
  const auto [q, b] = owner_of(r, s.buffer);
  const Layout& l = (*layouts_)[q];
  const int region = l.region[b];
  if (region > kBufOutput) return false;
  *first = rank_base_[2 * q + region] + l.base[b] + s.offset / es_;
  *count = s.bytes / es_;
  *owner = q;
  return true;
}

// Rank q returned at its last step: every other rank's access to its buffers (the last
// write of a cell, and the reads since that no later read comes after) must come before.
Status SharedMemory::returned() const {
  for (int q = 0; q < p_ && peers_; ++q) {
    auto late = [&](int r, uint32_t epoch, const char* does, size_t cell) {
      return host_.fail_step(r, epoch - 1,
                             str_cat(does, " ", where(cell), ", and no wait orders it before rank ", q, "'s last step: rank ",
                                     q, " may return, and its caller reuse the buffer, first"));
    };
    for (size_t e = rank_base_[2 * q]; e < rank_base_[2 * q + 2]; ++e) {
      const int w = writer_[e];
      if (w >= 0 && w != q && !ordered(q, w, written_at_[e])) return late(w, written_at_[e], "writes", e);
      for (int32_t k = reads_[e]; k >= 0; k = nodes_[k].next) {
        if (nodes_[k].rank != q && !ordered(q, nodes_[k].rank, nodes_[k].epoch)) {
          return late(nodes_[k].rank, nodes_[k].epoch, "reads", e);
        }
      }
    }
  }
  return Status();
}

// FastTrack's rules for one access of the race pass.
Status SharedMemory::access(int r, size_t i, const Slice& s, bool write) {
  size_t first = 0, count = 0;
  int owner = -1;
  if (!tracked(r, s, &first, &count, &owner)) return Status();
  if (owner >= 0 && owner != r && count > 0 && clock_[static_cast<size_t>(r) * p_ + owner] == 0) {
    return host_.fail_step(r, i, str_cat(write ? "writes " : "reads ", slice_str(s), " before rank ", owner,
                                         "'s call began: no wait orders it after rank ", owner, "'s first step"));
  }
  const uint32_t now = static_cast<uint32_t>(i + 1);
  for (size_t e = first; e < first + count; ++e) {
    const int w = writer_[e];
    if (w >= 0 && !ordered(r, w, written_at_[e])) return race(w, written_at_[e], "writes", r, i, write ? "writes" : "reads", e);
    if (write) {
      for (int32_t n = reads_[e]; n >= 0; n = nodes_[n].next) {
        if (!ordered(r, nodes_[n].rank, nodes_[n].epoch)) return race(nodes_[n].rank, nodes_[n].epoch, "reads", r, i, "writes", e);
      }
      release(reads_[e]);
      reads_[e] = -1;
      writer_[e] = static_cast<int16_t>(r);
      written_at_[e] = now;
      continue;
    }
    if (w < 0 && unwritten_.ok()) unwritten_ = unwritten(r, i, s, e);
    // (Taken before walking the list: growing nodes_ would move the links.)
    int32_t fresh = free_;
    if (fresh >= 0) {
      free_ = nodes_[fresh].next;
      nodes_[fresh] = {r, now, -1};
    } else {
      fresh = static_cast<int32_t>(nodes_.size());
      nodes_.push_back({r, now, -1});
    }
    // Reads this one comes after need no checking against later writes: drop them.
    int32_t* link = &reads_[e];
    while (*link >= 0) {
      ReadNode& node = nodes_[*link];
      if (ordered(r, node.rank, node.epoch)) {
        const int32_t dead = *link;
        *link = node.next;
        nodes_[dead].next = free_;
        free_ = dead;
      } else {
        link = &node.next;
      }
    }
    *link = fresh;
  }
  return Status();
}

void SharedMemory::release(int32_t list) {
  while (list >= 0) {
    const int32_t next = nodes_[list].next;
    nodes_[list].next = free_;
    free_ = list;
    list = next;
  }
}

Status SharedMemory::unwritten(int r, size_t i, const Slice& s, size_t cell) const {
  return host_.fail_step(r, i, str_cat("reads ", slice_str(s), " whose ", where(cell),
                                       " nothing wrote before (on this rank, or on a rank before a signal it waited for)"));
}

Status SharedMemory::read(int r, size_t i, const Slice& s, std::vector<int32_t>& out) {
  auto [first, count] = cells(s);
  out.assign(value_.begin() + first, value_.begin() + first + count);
  for (size_t e = first; e < first + count; ++e) {
    if (value_[e] == kUnwritten) return unwritten(r, i, s, e);  // (the race pass has ruled it out)
  }
  return Status();
}

Status SharedMemory::write(int r, size_t i, const Slice& s, const std::vector<int32_t>& values) {
  auto [first, count] = cells(s);
  std::copy(values.begin(), values.begin() + count, value_.begin() + first);
  return Status();
}

Status SharedMemory::race(int q, uint32_t epoch, const char* q_does, int r, size_t i, const char* r_does,
                          size_t cell) const {
  const size_t j = epoch - 1;
  return host_.fail_step(r, i, str_cat("race on ", where(cell), ": rank ", q, " step ", j, " (", step_label(s_[q].steps[j]),
                                       ") ", q_does, " ", touching(q, j, cell), " and this step ", r_does, " ",
                                       touching(r, i, cell), ", and no wait orders them"));
}

std::string SharedMemory::where(size_t cell) const {
  if (!rank_base_.empty() && cell >= rank_base_[0]) {
    const size_t k = std::upper_bound(rank_base_.begin(), rank_base_.end(), cell) - rank_base_.begin() - 1;
    return str_cat("element ", cell - rank_base_[k], " of rank ", k / 2, "'s ", buffer_name(static_cast<int>(k % 2)));
  }
  const size_t slot = std::upper_bound(base_.begin(), base_.end(), cell) - base_.begin() - 1;
  const size_t byte = (cell - base_[slot]) * es_;
  return str_cat("byte ", byte, " of rank ", slot / slots_, "'s slot ", slot % slots_, " (staging byte ",
                 slot * slot_bytes_ + byte, ")");
}

std::string SharedMemory::slice_str(const Slice& s) const {
  if (s.buffer != kBufStaging) return str_cat(buffer_name(s.buffer), " [", s.offset, ",", s.offset + s.bytes, ")");
  std::string out = str_cat("staging [", s.offset, ",", s.offset + s.bytes, ")");
  if (s.bytes > 0 && slot_bytes_ > 0 && slots_ > 0) {
    const size_t slot = s.offset / slot_bytes_;
    out += str_cat(" (rank ", slot / slots_, "'s slot ", slot % slots_, ")");
  }
  return out;
}

std::string SharedMemory::touching(int r, size_t i, size_t cell) const {
  const Step& st = s_[r].steps[i];
  auto covers = [&](const Slice& sl) {
    size_t first = 0, count = 0;
    int owner = -1;
    return tracked(r, sl, &first, &count, &owner) && cell >= first && cell < first + count;
  };
  if (covers(st.dst)) return slice_str(st.dst);
  for (const Slice& src : st.srcs) {
    if (covers(src)) return slice_str(src);
  }
  return "?";
}

}  // namespace kolo::verifier
