// Where the host codecs' time goes, for the runtime's timeline: while a thread has a trace
// installed (ScopedCodecTrace), every host codec call on it (kernels/compress.h) adds an
// encode span (calls that write a wire buffer) or a decode span, joined to the previous
// span of its kind when it follows within kJoinSeconds. Without a trace the cost is one
// thread-local read per call. The codecs of a compressed collective interleave with its
// transfers (chunk by chunk), so they show as many short spans inside the collective's.
#pragma once

#include <vector>

namespace kolo {

struct CodecSpan {
  bool encode = false;
  double start = 0, end = 0;  // now_seconds()
};

struct CodecTrace {
  static constexpr double kJoinSeconds = 5e-6;
  std::vector<CodecSpan> spans;
  double encode_seconds = 0, decode_seconds = 0;  // totals, before joining
  void add(bool encode, double start, double end);
};

// The calling thread's trace, or null.
CodecTrace* thread_codec_trace();

class ScopedCodecTrace {
 public:
  explicit ScopedCodecTrace(CodecTrace* trace);  // null: nothing is traced
  ~ScopedCodecTrace();
  ScopedCodecTrace(const ScopedCodecTrace&) = delete;
  ScopedCodecTrace& operator=(const ScopedCodecTrace&) = delete;

 private:
  CodecTrace* previous_;
};

}  // namespace kolo
