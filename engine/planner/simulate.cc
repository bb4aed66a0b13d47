#include "engine/planner/simulate.h"

#include <algorithm>
#include <queue>
#include <unordered_map>

#include "engine/verifier.h"

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
          return error(Code::kInternal, "simulate: ", s_[r].algorithm, " rank ", r, " step ", i,
                       " never runs (peer ", st.peer, " tag ", st.tag, "): deadlock or unmatched message");
        }
        end = std::max(end, ready_[r][i]);  // holds the completion time once done
      }
    }
    return end + m_.launch_us();
  }

 private:
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
        double end = start + m_.compute_us(r, st.dst.bytes, static_cast<int>(st.srcs.size()), st.kind == StepKind::kReduce);
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
