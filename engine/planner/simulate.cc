#include "engine/planner/simulate.h"
#include "engine/planner/plan.h"

#include <algorithm>
#include <queue>
#include <unordered_map>

#include "engine/verifier/verifier.h"

namespace kolo {
namespace {

struct Event {
  double t;
  int rank;
  int step;
  bool operator>(const Event& o) const {
    if (t != o.t) return t > o.t;
    if (rank != o.rank) return rank > o.rank;
    return step > o.step;
  }
};

constexpr int kCounters = 4;  // per rank, in one-host programs (engine/local/local_ops.h)

bool one_host_step(const Step& st) {
  if (st.kind == StepKind::kSignal || st.kind == StepKind::kWait) return true;
  if (st.kind != StepKind::kSend && st.dst.buffer == kBufStaging) return true;
  for (const Slice& src : st.srcs) {
    if (src.buffer == kBufStaging) return true;
  }
  return false;
}

struct Message {
  double arrival = -1;     // set when the send has been simulated
  int recv_rank = -1;      // a receive waiting for it
  int recv_step = -1;
  double recv_ready = 0;
};

class Simulation {
 public:
  Simulation(const std::vector<Schedule>& s, const CostModel& m)
      : s_(s), m_(m), p_(static_cast<int>(s.size())), egress_(p_, 0), ingress_(p_, 0), cpu_(p_, 0),
        nic_out_(m.nic_count(), 0), nic_in_(m.nic_count(), 0) {}

  Result<double> run() {
    if (p_ != m_.size()) return error(Code::kInternal, "simulate: ", p_, " schedules for a model of ", m_.size(), " ranks");
    setup_one_host();
    size_t total = 0;
    remaining_.resize(p_);
    ready_.resize(p_);
    dependents_.resize(p_);
    for (int r = 0; r < p_; ++r) {
      const auto& steps = s_[r].steps;
      total += steps.size();
      remaining_[r].assign(steps.size(), 0);
      ready_[r].assign(steps.size(), 0);
      // Dependents in compressed form: offsets then targets.
      std::vector<int> count(steps.size() + 1, 0);
      for (size_t i = 0; i < steps.size(); ++i) {
        for (int d : steps[i].deps) {
          if (d < 0 || d >= static_cast<int>(i)) return error(Code::kInternal, "simulate: rank ", r, " step ", i, " has a bad dependency");
          ++count[d + 1];
        }
        remaining_[r][i] = static_cast<int>(steps[i].deps.size());
      }
      for (size_t i = 1; i < count.size(); ++i) count[i] += count[i - 1];
      auto& dep = dependents_[r];
      dep.first = count;
      dep.second.assign(count.back(), 0);
      for (size_t i = 0; i < steps.size(); ++i) {
        for (int d : steps[i].deps) dep.second[count[d]++] = static_cast<int>(i);
      }
      for (size_t i = 0; i < steps.size(); ++i) {
        if (remaining_[r][i] == 0) queue_.push({0.0, r, static_cast<int>(i)});
      }
    }
    messages_.reserve(total);
    double end = 0;
    while (!queue_.empty()) {
      Event e = queue_.top();
      queue_.pop();
      KOLO_TRY(process(e));
    }
    for (int r = 0; r < p_; ++r) {
      for (size_t i = 0; i < s_[r].steps.size(); ++i) {
        if (remaining_[r][i] != -1) {
          const Step& st = s_[r].steps[i];
          if (st.kind == StepKind::kWait) {
            return error(Code::kInternal, "simulate: ", schedule_algorithm_name(s_[r]), " rank ", r, " step ", i, " waits for rank ",
                         st.peer, "'s counter ", st.counter, " >= ", st.value, ", which never gets there: deadlock");
          }
          return error(Code::kInternal, "simulate: ", schedule_algorithm_name(s_[r]), " rank ", r, " step ", i,
                       " never runs (peer ", st.peer, " tag ", st.tag, "): deadlock or unmatched message");
        }
        end = std::max(end, ready_[r][i]);  // holds the completion time once done
      }
    }
    return end + m_.launch_us() + (one_host_ ? m_.params().shm_call_us : 0.0);
  }

 private:
  // One-host programs (engine/local/) are charged as the closed-form one-host model charges
  // them (local_model.cc): copies and reduces at the shm_* rates with no per-step overhead,
  // the caller's input and output from DRAM once the working set leaves the cache, a call
  // overhead, and a hand-off (shm_sync_us) from a signal to the wait it releases. Assumes a
  // core per rank: the model's oversubscribed terms need the core count, which the cost
  // model keeps to itself.
  void setup_one_host() {
    one_host_ = false;
    double io = 0, largest_slot_use = 0;
    for (const Schedule& sch : s_) {
      double extent[kBufStaging] = {0, 0, 0};
      for (const Step& st : sch.steps) {
        one_host_ = one_host_ || one_host_step(st);
        auto note = [&](const Slice& sl) {
          const double end = static_cast<double>(sl.offset + sl.bytes);
          if (sl.buffer >= kBufInput && sl.buffer < kBufStaging) extent[sl.buffer] = std::max(extent[sl.buffer], end);
          if (sl.buffer == kBufStaging && sch.slot_bytes > 0) {
            largest_slot_use = std::max(largest_slot_use, static_cast<double>(sl.offset % sch.slot_bytes + sl.bytes));
          }
        };
        for (const Slice& src : st.srcs) note(src);
        if (st.kind != StepKind::kSend) note(st.dst);
      }
      io += extent[kBufInput] + extent[kBufOutput];
    }
    // As the model: every rank's input and output, and all its slots as full as the fullest.
    const double slots = s_.empty() ? 0 : static_cast<double>(s_[0].slots);
    const double working_set = io + p_ * slots * largest_slot_use;
    const PlannerParams& pp = m_.params();
    dram_us_ = working_set > pp.shm_cache_bytes ? 1 / (pp.shm_dram_gbs * 1e3) : 0.0;
    signals_.assign(static_cast<size_t>(p_) * kCounters, {});
    parked_.assign(static_cast<size_t>(p_) * kCounters, {});
  }

  double shm_compute_us(const Step& st) const {
    const PlannerParams& pp = m_.params();
    const double bytes = static_cast<double>(st.dst.bytes);
    // A reduce of k slots reads k streams and writes one: (k + 1) / 3 of a 2-input reduce.
    double us = st.kind == StepKind::kReduce ? bytes * (st.srcs.size() + 1) / 3.0 / (pp.shm_reduce_gbs * 1e3)
                                             : bytes / (pp.shm_copy_gbs * 1e3);
    if (dram_us_ > 0) {
      auto caller = [](const Slice& sl) { return sl.buffer == kBufInput || sl.buffer == kBufOutput ? sl.bytes : 0; };
      double stream = static_cast<double>(caller(st.dst));
      for (const Slice& src : st.srcs) stream += static_cast<double>(caller(src));
      us += stream * dram_us_;
    }
    return us;
  }

  // A wait completes a hand-off after the last of the signals it needs, or parks on the
  // first rank whose counter is short until that rank signals it.
  void try_wait(int r, int i, double ready) {
    const Step& st = s_[r].steps[i];
    double t = ready;
    for (int q = 0; q < p_ && st.value > 0; ++q) {
      if (q == r || (st.peer >= 0 && q != st.peer)) continue;
      const auto& list = signals_[q * kCounters + st.counter];
      if (list.empty() || list.back().first < st.value) {
        parked_[q * kCounters + st.counter].push_back({r, i, ready});
        return;
      }
      auto it = std::lower_bound(list.begin(), list.end(), st.value,
                                 [](const std::pair<uint64_t, double>& s, uint64_t v) { return s.first < v; });
      t = std::max(t, it->second + m_.params().shm_sync_us);
    }
    complete(r, i, t);
  }

  uint64_t key(int from, int to, uint32_t tag) const {
    return ((static_cast<uint64_t>(from) * static_cast<uint64_t>(p_) + static_cast<uint64_t>(to)) << 32) | tag;
  }

  void complete(int r, int i, double t) {
    remaining_[r][i] = -1;
    ready_[r][i] = t;
    const auto& dep = dependents_[r];
    for (int k = dep.first[i]; k < dep.first[i + 1]; ++k) {
      int j = dep.second[k];
      ready_[r][j] = std::max(ready_[r][j], t);
      if (--remaining_[r][j] == 0) queue_.push({ready_[r][j], r, j});
    }
  }

  // When a receive completes: on an oversubscribed host the receiver must be woken,
  // which takes its CPU.
  double received(int r, double arrival, double posted) {
    double t = std::max(arrival, posted);
    const double wake = m_.wakeup_us(r);
    if (wake > 0) t = cpu_[r] = std::max(t, cpu_[r]) + wake;
    return t;
  }

  Status process(const Event& e) {
    const Step& st = s_[e.rank].steps[e.step];
    const int r = e.rank;
    switch (st.kind) {
      case StepKind::kCopy:
      case StepKind::kReduce: {
        double start = std::max(e.t, cpu_[r]);
        double end = start + (one_host_ ? shm_compute_us(st)
                                        : m_.compute_us(r, st.dst.bytes, static_cast<int>(st.srcs.size()),
                                                        st.kind == StepKind::kReduce));
        cpu_[r] = end;
        complete(r, e.step, end);
        return Status();
      }
      case StepKind::kSend: {
        if (st.peer < 0 || st.peer >= p_) return error(Code::kInternal, "simulate: rank ", r, " sends to ", st.peer);
        LinkCost lc = m_.link(r, st.peer);
        // A message inside a host occupies the two ranks' ports; one across hosts the two
        // NICs instead (NVLink and the NIC are separate paths out of a GPU).
        const bool net = lc.nic_a >= 0 && lc.nic_b >= 0;
        double& out = net ? nic_out_[lc.nic_a] : egress_[r];
        double& in = net ? nic_in_[lc.nic_b] : ingress_[st.peer];
        const double start = std::max({e.t + m_.step_us(r), out, in});
        const double sent = start + static_cast<double>(st.srcs[0].bytes) / (lc.gbs * 1e3);
        out = in = sent;
        Message& msg = messages_[key(r, st.peer, st.tag)];
        msg.arrival = sent + lc.alpha_us;
        complete(r, e.step, sent);
        if (msg.recv_rank >= 0) complete(msg.recv_rank, msg.recv_step, received(msg.recv_rank, msg.arrival, msg.recv_ready));
        return Status();
      }
      case StepKind::kRecv: {
        if (st.peer < 0 || st.peer >= p_) return error(Code::kInternal, "simulate: rank ", r, " receives from ", st.peer);
        Message& msg = messages_[key(st.peer, r, st.tag)];
        const double posted = e.t + m_.step_us(r);
        if (msg.arrival >= 0) {
          complete(r, e.step, received(r, msg.arrival, posted));
        } else {
          msg.recv_rank = r;
          msg.recv_step = e.step;
          msg.recv_ready = posted;
        }
        return Status();
      }
      case StepKind::kSignal: {
        if (st.counter < 0 || st.counter >= kCounters) return error(Code::kInternal, "simulate: rank ", r, " signals counter ", st.counter);
        const double t = std::max(e.t, cpu_[r]);
        auto& list = signals_[r * kCounters + st.counter];
        if (list.empty() || st.value > list.back().first) list.push_back({st.value, t});
        complete(r, e.step, t);
        std::vector<ParkedWait> woken;
        woken.swap(parked_[r * kCounters + st.counter]);
        for (const ParkedWait& w : woken) try_wait(w.rank, w.step, w.ready);
        return Status();
      }
      case StepKind::kWait: {
        if (st.counter < 0 || st.counter >= kCounters || st.peer < -1 || st.peer >= p_ || st.peer == r) {
          return error(Code::kInternal, "simulate: rank ", r, " waits for rank ", st.peer, "'s counter ", st.counter);
        }
        try_wait(r, e.step, std::max(e.t, cpu_[r]));
        return Status();
      }
    }
    return Status();
  }

  const std::vector<Schedule>& s_;
  const CostModel& m_;
  int p_;
  std::vector<double> egress_, ingress_, cpu_, nic_out_, nic_in_;
  std::vector<std::vector<int>> remaining_;  // deps left; -1 once done
  std::vector<std::vector<double>> ready_;   // max of the deps' completion; completion once done
  std::vector<std::pair<std::vector<int>, std::vector<int>>> dependents_;
  std::unordered_map<uint64_t, Message> messages_;
  // One-host programs.
  struct ParkedWait {
    int rank, step;
    double ready;
  };
  bool one_host_ = false;
  double dram_us_ = 0;                                              // per caller byte, once past the cache
  std::vector<std::vector<std::pair<uint64_t, double>>> signals_;  // per (rank, counter): (value, time) rises
  std::vector<std::vector<ParkedWait>> parked_;                    // per (rank, counter): waits for it
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> queue_;
};

}  // namespace

Result<double> simulate_us(const std::vector<Schedule>& schedules, const CostModel& model) {
  return Simulation(schedules, model).run();
}

std::vector<Schedule> schedules_for_all(const CollSpec& spec, const PlanContext& ctx, Algorithm algorithm) {
  std::vector<Schedule> out;
  out.reserve(ctx.size);
  for (int r = 0; r < ctx.size; ++r) {
    CollSpec s = spec_for_rank(spec, r);
    s.algorithm = algorithm;
    PlanContext c = ctx;
    c.rank = r;
    out.push_back(build_schedule(s, c));
  }
  return out;
}

Result<double> predict_us(const CollSpec& spec, const PlanContext& ctx, Algorithm algorithm, const CostModel& model) {
  return simulate_us(schedules_for_all(spec, ctx, algorithm), model);
}

}  // namespace kolo
