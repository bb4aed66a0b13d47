// The timeline: a Chrome trace-event JSON file (chrome://tracing, Perfetto) with one row
// per tensor and its phases in Horovod's names (NEGOTIATE_ALLREDUCE, QUEUE,
// MEMCPY_IN_FUSION_BUFFER, the collective with its algorithm, MEMCPY_OUT_FUSION_BUFFER) plus
// CYCLE_START marks. The data path only appends an event to a
// queue under a mutex; a thread of its own formats and writes, so a slow disk never
// stalls a collective. Closing the timeline completes the JSON document.
#pragma once

#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "support/status.h"

namespace kolo::runtime {

class Timeline {
 public:
  static Result<std::unique_ptr<Timeline>> open(const std::string& path, int rank);
  ~Timeline();  // writes what is queued and closes the document

  // A phase of one tensor, from start to end (now_seconds() values). args: a JSON object
  // body without braces, e.g. "\"algorithm\": \"ring\"", or empty.
  void span(const std::string& tensor, const char* phase, double start, double end, std::string args = "");
  // An instant on the cycle row (one per cycle that ran something).
  void mark(const char* what, double at, std::string args = "");
  const std::string& path() const { return path_; }

 private:
  struct Event {
    std::string tensor;  // empty = the cycle row
    const char* phase;
    double start, end;   // end < 0: an instant
    std::string args;
  };
  Timeline(std::FILE* file, std::string path, int rank);
  void writer_loop();
  void write(const Event& event);
  int row_of(const std::string& tensor);

  std::FILE* file_;
  std::string path_;
  int rank_;
  double origin_;  // timestamps are microseconds since the timeline opened
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Event> queue_;
  bool closing_ = false;
  std::unordered_map<std::string, int> rows_;  // writer thread only
  bool first_event_ = true;                    // writer thread only
  std::thread writer_;
};

// JSON string escaping for names that come from users.
std::string json_escape(const std::string& text);

}  // namespace kolo::runtime
