#include "support/status.h"

#include <cstdio>

namespace kolo {

const char* code_name(Code code) {
  switch (code) {
    case Code::kOk: return "success";
    case Code::kInProgress: return "in progress";
    case Code::kInvalidArgument: return "invalid argument";
    case Code::kInvalidUsage: return "invalid usage";
    case Code::kMismatch: return "mismatch between ranks";
    case Code::kRemote: return "remote peer failed";
    case Code::kTimeout: return "timeout";
    case Code::kAborted: return "aborted";
    case Code::kUnsupported: return "unsupported";
    case Code::kSystem: return "system error";
    case Code::kInternal: return "internal error";
  }
  return "unknown";
}

const std::string& Status::no_message() {
  static const std::string empty;
  return empty;
}

std::string Status::to_string() const {
  if (ok()) return "success";
  return str_cat(code_name(failure_->code), ": ", failure_->message);
}

Status Status::with_context(const std::string& context) const {
  if (ok()) return Status();
  return Status(failure_->code, context + failure_->message);
}

std::string rank_list(const std::vector<int>& ranks, size_t most) {
  if (ranks.empty()) return "none";
  std::string text;
  size_t items = 0, i = 0;
  for (; i < ranks.size() && items < most; ++items) {
    size_t j = i;  // the run ranks[i..j] of consecutive ranks
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (j < i + 2) j = i;  // fewer than three: one at a time
    text += str_cat(items ? "," : "", ranks[i]);
    if (j > i) text += str_cat("-", ranks[j]);
    i = j + 1;
  }
  if (i < ranks.size()) text += str_cat(",...(", ranks.size() - i, " more)");
  return text;
}

std::string fixed_decimals(double x, int digits) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, x);
  return text;
}

}  // namespace kolo
