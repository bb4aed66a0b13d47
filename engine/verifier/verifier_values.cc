#include "engine/verifier/verifier_values.h"

#include <algorithm>

#include "engine/verifier/verifier.h"

namespace kolo::verifier {

int32_t ValueTable::add(Value v) {
  values_.push_back(v);
  return static_cast<int32_t>(values_.size() - 1);
}

int32_t ValueTable::original(int rank, uint64_t index) {
  Value v;
  v.index = index;
  v.first = static_cast<uint32_t>(ranges_.size());
  v.intervals = 1;
  ranges_.push_back({static_cast<uint32_t>(rank), static_cast<uint32_t>(rank) + 1});
  return add(v);
}

int32_t ValueTable::combine(const int32_t* ids, size_t n, std::string* why) {
  if (n == 1) return ids[0];
  tmp_.clear();
  const Value& head = values_[ids[0]];
  for (size_t k = 0; k < n; ++k) {
    const Value& v = values_[ids[k]];
    if (v.index != head.index) {
      *why = str_cat("combines element ", head.index, " with element ", v.index, " of the inputs");
      return -1;
    }
    if (v.pre != head.pre) {
      *why = "combines pre-scaled with not pre-scaled contributions";
      return -1;
    }
    if (v.post != 0) {
      *why = str_cat("combines a value that is already post-scaled (", describe(ids[k]), ")");
      return -1;
    }
    for (uint32_t j = 0; j < v.intervals; ++j) tmp_.push_back(ranges_[v.first + j]);
  }
  std::sort(tmp_.begin(), tmp_.end());
  Value out;
  out.index = head.index;
  out.pre = head.pre;
  out.first = static_cast<uint32_t>(ranges_.size());
  for (size_t k = 0; k < tmp_.size(); ++k) {
    if (k > 0 && tmp_[k].first < tmp_[k - 1].second) {
      *why = str_cat("double counts rank ", tmp_[k].first, "'s contribution to element ", head.index);
      ranges_.resize(out.first);
      return -1;
    }
    // Adjacent intervals merge so the list stays short.
    if (ranges_.size() > out.first && ranges_.back().second == tmp_[k].first) {
      ranges_.back().second = tmp_[k].second;
    } else {
      ranges_.push_back(tmp_[k]);
    }
  }
  out.intervals = static_cast<uint32_t>(ranges_.size() - out.first);
  return add(out);
}

int32_t ValueTable::scaled(int32_t id, ScaleUse use, std::string* why) {
  if (use == ScaleUse::kNone) return id;
  Value v = values_[id];
  if (use == ScaleUse::kPre || use == ScaleUse::kBoth) {
    if (v.pre) {
      *why = str_cat("applies the pre-scale twice to ", describe(id));
      return -1;
    }
    if (ranks_in(id) != 1) {
      *why = str_cat("applies the pre-scale after combining (", describe(id), ")");
      return -1;
    }
    v.pre = true;
  }
  if (use == ScaleUse::kPost || use == ScaleUse::kBoth) {
    if (v.post != 0) {
      *why = str_cat("applies the post-scale twice to ", describe(id));
      return -1;
    }
    v.post = 1;
  }
  return add(v);
}

size_t ValueTable::ranks_in(int32_t id) const {
  const Value& v = values_[id];
  size_t n = 0;
  for (uint32_t j = 0; j < v.intervals; ++j) n += ranges_[v.first + j].second - ranges_[v.first + j].first;
  return n;
}

bool ValueTable::is_single(int32_t id, int rank) const {
  const Value& v = values_[id];
  return v.intervals == 1 && ranges_[v.first].first == static_cast<uint32_t>(rank) &&
         ranges_[v.first].second == static_cast<uint32_t>(rank) + 1;
}

bool ValueTable::covers_all(int32_t id, int p) const {
  const Value& v = values_[id];
  return v.intervals == 1 && ranges_[v.first].first == 0 && ranges_[v.first].second == static_cast<uint32_t>(p);
}

std::string ValueTable::describe(int32_t id) const {
  if (id < 0) return "nothing (never written)";
  const Value& v = values_[id];
  std::string ranks;
  for (uint32_t j = 0; j < v.intervals; ++j) {
    auto [lo, hi] = ranges_[v.first + j];
    if (!ranks.empty()) ranks += ",";
    ranks += hi == lo + 1 ? str_cat(lo) : str_cat(lo, "-", hi - 1);
  }
  return str_cat("element ", v.index, " of ranks {", ranks, "}", v.pre ? ", pre-scaled" : "",
                 v.post != 0 ? ", post-scaled" : "");
}

Layout layout_for(const CollSpec& spec, int rank, int p, size_t scratch_bytes) {
  const size_t es = dtype_size(spec.dtype);
  const size_t n = spec.count * es;
  const size_t all = n * static_cast<size_t>(p);
  Layout l;
  size_t alias_at = 0;  // output byte where the input lives when in place
  bool input_in_output = false, output_in_input = false;
  switch (spec.kind) {
    case CollKind::kAllreduce: case CollKind::kBroadcast:
      l.bytes[kBufInput] = l.bytes[kBufOutput] = n;
      input_in_output = spec.in_place;
      break;
    case CollKind::kReduce:
      l.bytes[kBufInput] = n;
      l.bytes[kBufOutput] = rank == spec.root ? n : 0;
      input_in_output = spec.in_place && rank == spec.root;
      break;
    case CollKind::kAllgather:
      l.bytes[kBufInput] = n;
      l.bytes[kBufOutput] = all;
      input_in_output = spec.in_place;
      alias_at = n * rank;
      break;
    case CollKind::kAllgatherv: {
      size_t end = 0;
      for (size_t q = 0; q < spec.counts.size() && q < spec.displs.size(); ++q) {
        end = std::max(end, spec.displs[q] + spec.counts[q]);
      }
      l.bytes[kBufInput] = n;
      l.bytes[kBufOutput] = end * es;
      input_in_output = spec.in_place && static_cast<size_t>(rank) < spec.displs.size();
      alias_at = input_in_output ? spec.displs[rank] * es : 0;
      break;
    }
    case CollKind::kReduceScatter:
      l.bytes[kBufInput] = all;
      l.bytes[kBufOutput] = n;
      output_in_input = spec.in_place;
      alias_at = n * rank;
      break;
    case CollKind::kAlltoall:
      l.bytes[kBufInput] = l.bytes[kBufOutput] = all;
      input_in_output = spec.in_place;
      break;
    case CollKind::kSend: l.bytes[kBufInput] = n; break;
    case CollKind::kRecv: l.bytes[kBufOutput] = n; break;
    case CollKind::kBarrier: break;
  }
  l.bytes[kBufScratch] = scratch_bytes;
  for (int b = 0; b < 3; ++b) l.region_elems[b] = (l.bytes[b] + es - 1) / es;
  if (input_in_output) {
    l.region[kBufInput] = kBufOutput;
    l.base[kBufInput] = alias_at / es;
    l.region_elems[kBufInput] = 0;
  } else if (output_in_input) {
    l.region[kBufOutput] = kBufInput;
    l.base[kBufOutput] = alias_at / es;
    l.region_elems[kBufOutput] = 0;
  }
  return l;
}

std::pair<int, int> owner_of(int rank, int buffer) {
  if (buffer < kBufRanks) return {rank, buffer};
  return {(buffer - kBufRanks) / 2, (buffer - kBufRanks) % 2};
}

std::string buffer_name(int buffer) {
  if (buffer >= kBufRanks) {
    const auto [owner, b] = owner_of(0, buffer);
    return str_cat("rank ", owner, "'s ", buffer_name(b));
  }
  return buffer == kBufInput    ? "input"
         : buffer == kBufOutput ? "output"
         : buffer == kBufScratch ? "scratch"
         : buffer == kBufStaging ? "staging"
                                 : "?";
}

std::string counter_name(int counter) {
  static const char* const names[] = {"posted", "reduced", "consumed", "barriers"};
  if (counter >= 0 && counter < 4) return names[counter];
  if (counter >= flag_counter(0, 0) && counter < kProgramCounters) {
    return str_cat("flag to rank ", (counter - flag_counter(0, 0)) / 2, " parity ", (counter - flag_counter(0, 0)) % 2);
  }
  return str_cat("counter ", counter);
}

std::string step_label(const Step& st) {
  switch (st.kind) {
    case StepKind::kSignal: return str_cat("signal ", counter_name(st.counter), " = ", st.value);
    case StepKind::kWait:
      return str_cat("wait for ", st.peer < 0 ? std::string("every rank") : str_cat("rank ", st.peer), "'s ",
                     counter_name(st.counter), " >= ", st.value);
    default:
      return str_cat(step_kind_name(st.kind), st.peer >= 0 ? str_cat(" peer ", st.peer, " tag ", st.tag) : std::string());
  }
}

const char* step_kind_name(StepKind kind) {
  switch (kind) {
    case StepKind::kSend: return "send";
    case StepKind::kRecv: return "recv";
    case StepKind::kReduce: return "reduce";
    case StepKind::kCopy: return "copy";
    case StepKind::kSignal: return "signal";
    case StepKind::kWait: return "wait";
  }
  return "?";
}

}  // namespace kolo::verifier
