#include "engine/runtime/timeline.h"

#include <cerrno>
#include <cstring>

#include "support/clock.h"

namespace kolo::runtime {

std::string json_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

Result<std::unique_ptr<Timeline>> Timeline::open(const std::string& path, int rank) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    return error(Code::kSystem, "cannot open timeline file '", path, "': ", std::strerror(errno));
  }
  return std::unique_ptr<Timeline>(new Timeline(file, path, rank));
}

Timeline::Timeline(std::FILE* file, std::string path, int rank)
    : file_(file), path_(std::move(path)), rank_(rank), origin_(now_seconds()) {
  std::fprintf(file_, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
  writer_ = std::thread([this] { writer_loop(); });
}

Timeline::~Timeline() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
  }
  wake_.notify_one();
  writer_.join();
  std::fprintf(file_, "\n]}\n");
  std::fclose(file_);
}

void Timeline::span(const std::string& tensor, const char* phase, double start, double end, std::string args) {
  std::lock_guard<std::mutex> lock(mutex_);
  queue_.push_back(Event{tensor, phase, start, end, std::move(args)});
}

void Timeline::mark(const char* what, double at, std::string args) {
  std::lock_guard<std::mutex> lock(mutex_);
  queue_.push_back(Event{"", what, at, -1, std::move(args)});
}

void Timeline::writer_loop() {
  std::vector<Event> batch;
  for (;;) {
    bool last = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Batches of events every 100 ms keep the writer's wake-ups off the data path.
      wake_.wait_for(lock, std::chrono::milliseconds(100), [&] { return closing_; });
      batch.swap(queue_);
      last = closing_;
    }
    for (const Event& e : batch) write(e);
    batch.clear();
    std::fflush(file_);
    if (last) return;
  }
}

int Timeline::row_of(const std::string& tensor) {
  auto [it, inserted] = rows_.emplace(tensor, static_cast<int>(rows_.size()) + 1);
  if (inserted) {
    // Metadata names the row after the tensor; row 0 is the cycle marks.
    std::fprintf(file_, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"%s\"}}",
                 rank_, it->second, json_escape(tensor).c_str());
    std::fprintf(file_, ",\n{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"sort_index\": %d}}",
                 rank_, it->second, it->second);
  }
  return it->second;
}

void Timeline::write(const Event& e) {
  if (first_event_) {
    std::fprintf(file_, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"args\": {\"name\": \"rank %d\"}}",
                 rank_, rank_);
    std::fprintf(file_, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"args\": {\"name\": \"cycles\"}}",
                 rank_);
    first_event_ = false;
  }
  const int tid = e.tensor.empty() ? 0 : row_of(e.tensor);
  const double ts = (e.start - origin_) * 1e6;
  if (e.end < 0) {
    std::fprintf(file_, ",\n{\"name\": \"%s\", \"ph\": \"i\", \"s\": \"t\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"args\": {%s}}",
                 e.phase, rank_, tid, ts, e.args.c_str());
  } else {
    std::fprintf(file_, ",\n{\"name\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, \"args\": {%s}}",
                 e.phase, rank_, tid, ts, (e.end - e.start) * 1e6, e.args.c_str());
  }
}

}  // namespace kolo::runtime
