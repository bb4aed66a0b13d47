#include "engine/schedules/schedule.h"

#include <algorithm>
#include <sstream>

namespace kolo {

void append_schedule(Schedule& head, const Schedule& tail) {
  const int step_base = static_cast<int>(head.steps.size());
  for (Step step : tail.steps) {
    step.call += head.calls();
    for (int& dep : step.deps) dep += step_base;
    auto shift = [&](Slice& slice) {
      if (slice.buffer == kBufScratch) slice.offset += head.scratch_bytes;
    };
    shift(step.dst);
    for (Slice& src : step.srcs) shift(src);
    head.steps.push_back(std::move(step));
  }
  head.scratch_bytes += tail.scratch_bytes;
  head.algorithms.insert(head.algorithms.end(), tail.algorithms.begin(), tail.algorithms.end());
}

std::string schedule_algorithm_name(const Schedule& schedule) {
  std::string name;
  for (size_t i = 0; i < schedule.algorithms.size(); ++i) {
    const Algorithm a = schedule.algorithms[i];
    if (std::find(schedule.algorithms.begin(), schedule.algorithms.begin() + i, a) !=
        schedule.algorithms.begin() + i) continue;
    if (!name.empty()) name += '+';
    name += algorithm_name(a);
  }
  return name;
}

static const char* buffer_name(int buffer) {
  return buffer == kBufInput ? "in" : buffer == kBufOutput ? "out" : buffer == kBufStaging ? "staging" : "scratch";
}

std::string schedule_to_string(const Schedule& schedule) {
  std::ostringstream out;
  out << "schedule " << schedule_algorithm_name(schedule) << ", " << schedule.steps.size() << " steps, scratch "
      << schedule.scratch_bytes << " B\n";
  auto slice = [&](const Slice& s) {
    out << buffer_name(s.buffer) << "[" << s.offset << "+" << s.bytes << "]";
  };
  for (size_t i = 0; i < schedule.steps.size(); ++i) {
    const Step& st = schedule.steps[i];
    out << i << ": call " << st.call << " ";
    switch (st.kind) {
      case StepKind::kSend: out << "send to " << st.peer << " tag " << st.tag << " "; slice(st.srcs[0]); break;
      case StepKind::kRecv: out << "recv from " << st.peer << " tag " << st.tag << " "; slice(st.dst); break;
      case StepKind::kReduce:
      case StepKind::kCopy:
        out << (st.kind == StepKind::kReduce ? "reduce " : "copy ");
        slice(st.dst);
        out << " <-";
        for (const Slice& s : st.srcs) { out << " "; slice(s); }
        break;
      case StepKind::kSignal: out << "signal counter " << st.counter << " = " << st.value; break;
      case StepKind::kWait:
        out << "wait for counter " << st.counter << " >= " << st.value << " of "
            << (st.peer < 0 ? std::string("every peer") : "rank " + std::to_string(st.peer));
        break;
    }
    if (!st.deps.empty()) {
      out << " after";
      for (int d : st.deps) out << " " << d;
    }
    out << "\n";
  }
  return out.str();
}

std::string schedule_to_json(const Schedule& schedule) {
  static const char* kKinds[] = {"send", "recv", "reduce", "copy", "signal", "wait"};
  static const char* kScales[] = {"none", "pre", "post", "both"};
  std::ostringstream out;
  auto slice = [&](const Slice& s) {
    out << "{\"buffer\": \"" << buffer_name(s.buffer) << "\", \"offset\": " << s.offset << ", \"bytes\": " << s.bytes << "}";
  };
  // Algorithm names are plain identifiers ("ring", "ring+direct"): no escaping needed.
  out << "{\"algorithm\": \"" << schedule_algorithm_name(schedule) << "\", \"scratch_bytes\": " << schedule.scratch_bytes
      << ", \"calls\": " << schedule.calls() << ", \"steps\": [";
  for (size_t i = 0; i < schedule.steps.size(); ++i) {
    const Step& st = schedule.steps[i];
    out << (i ? ",\n  " : "\n  ") << "{\"kind\": \"" << kKinds[static_cast<int>(st.kind)] << "\", \"call\": " << st.call;
    if (st.kind == StepKind::kSend || st.kind == StepKind::kRecv) out << ", \"peer\": " << st.peer << ", \"tag\": " << st.tag;
    if (st.kind == StepKind::kSignal || st.kind == StepKind::kWait) {
      out << ", \"counter\": " << st.counter << ", \"value\": " << st.value;
      if (st.kind == StepKind::kWait) out << ", \"peer\": " << st.peer;
    } else if (st.kind != StepKind::kRecv) {
      out << ", \"srcs\": [";
      for (size_t k = 0; k < st.srcs.size(); ++k) {
        if (k) out << ", ";
        slice(st.srcs[k]);
      }
      out << "]";
    }
    if (st.kind != StepKind::kSend && st.kind != StepKind::kSignal && st.kind != StepKind::kWait) {
      out << ", \"dst\": ";
      slice(st.dst);
    }
    if (st.kind == StepKind::kReduce || st.kind == StepKind::kCopy) {
      out << ", \"count\": " << st.count << ", \"scale\": \"" << kScales[static_cast<int>(st.scale)] << "\"";
    }
    out << ", \"deps\": [";
    for (size_t k = 0; k < st.deps.size(); ++k) out << (k ? ", " : "") << st.deps[k];
    out << "]}";
  }
  out << "\n]}\n";
  return out.str();
}

}  // namespace kolo
