#include "support/status.h"

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

std::string Status::to_string() const {
  if (ok()) return "success";
  return str_cat(code_name(code_), ": ", message_);
}

Status Status::with_context(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + message_);
}

std::string rank_list(const std::vector<int>& ranks, size_t most) {
  if (ranks.empty()) return "none";
  std::string text;
  for (size_t i = 0; i < ranks.size() && i < most; ++i) text += str_cat(i ? "," : "", ranks[i]);
  if (ranks.size() > most) text += str_cat(",...(", ranks.size() - most, " more)");
  return text;
}

}  // namespace kolo
