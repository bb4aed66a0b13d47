#include "kernels/codec_trace.h"

namespace kolo {
namespace {
thread_local CodecTrace* t_trace = nullptr;
}  // namespace

void CodecTrace::add(bool encode, double start, double end) {
  (encode ? encode_seconds : decode_seconds) += end - start;
  for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
    if (it->encode != encode) continue;
    if (start - it->end <= kJoinSeconds) {
      it->end = end;
      return;
    }
    break;
  }
  spans.push_back(CodecSpan{encode, start, end});
}

CodecTrace* thread_codec_trace() { return t_trace; }

ScopedCodecTrace::ScopedCodecTrace(CodecTrace* trace) : previous_(t_trace) { t_trace = trace; }
ScopedCodecTrace::~ScopedCodecTrace() { t_trace = previous_; }

}  // namespace kolo
