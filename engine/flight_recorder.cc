#include "engine/flight_recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "support/clock.h"
#include "support/env.h"
#include "support/log.h"

namespace kolo {

const char* call_state_name(CallState state) {
  switch (state) {
    case CallState::kEntered: return "entered";    // waiting for the call lock or device work before it
    case CallState::kRunning: return "running";
    case CallState::kDone: return "done";
    case CallState::kFailed: return "failed";
    case CallState::kOnStream: return "on_stream";  // a device call: enqueued, completes on its stream
  }
  return "?";
}

namespace {

// Ticks to wall-clock nanoseconds: the ticks' rate is measured between the first tick the
// process took and the dump, against the steady clock; the wall clock is read once, at the
// dump (the ranks of a host, and hosts with synchronised clocks, compare on one time line).
struct TickClock {
  uint64_t tick0;
  int64_t steady0;
  static int64_t steady_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  }
  static const TickClock& origin() {
    static const TickClock first{trace_ticks(), steady_ns()};
    return first;
  }
};

struct WallOfTicks {
  uint64_t tick_now;
  int64_t wall_now;
  double ns_per_tick;
  WallOfTicks() {
    const TickClock& o = TickClock::origin();
    tick_now = trace_ticks();
    const int64_t steady_now = TickClock::steady_ns();
    wall_now = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    ns_per_tick = tick_now > o.tick0 ? static_cast<double>(steady_now - o.steady0) / static_cast<double>(tick_now - o.tick0) : 1.0;
  }
  int64_t wall(uint64_t tick) const {
    if (tick == 0) return 0;
    return wall_now - static_cast<int64_t>(static_cast<double>(static_cast<int64_t>(tick_now - tick)) * ns_per_tick);
  }
};

std::mutex g_recorders_mutex;
std::set<const FlightRecorder*>& recorders() {
  static auto* all = new std::set<const FlightRecorder*>;  // never destroyed: recorders may outlive statics
  return *all;
}

std::string file_safe(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '_';
  }
  return out;
}

}  // namespace

FlightRecorder::FlightRecorder(size_t capacity, std::string comm, int rank, int size)
    : slots_(std::bit_ceil(capacity)), mask_(slots_.size() - 1), capacity_(capacity), comm_(std::move(comm)),
      rank_(rank), size_(size) {
  p2p_sent_.assign(size, 0);
  p2p_received_.assign(size, 0);
  (void)TickClock::origin();
  std::lock_guard<std::mutex> lock(g_recorders_mutex);
  recorders().insert(this);
}

FlightRecorder::~FlightRecorder() {
  std::lock_guard<std::mutex> lock(g_recorders_mutex);
  recorders().erase(this);
}

CallRecord FlightRecorder::Slot::get() const {
  auto get = [](const std::atomic<uint64_t>& field) { return field.load(std::memory_order_relaxed); };
  CallRecord r;
  r.seq = get(seq);
  r.count = get(count);
  r.entered = get(entered);
  r.started = get(started);
  r.ended = get(ended);
  const uint64_t sh = get(shape), pl = get(place), pd = get(p2p_device), out = get(outcome);
  r.kind = static_cast<CollKind>(sh & 0xff);
  r.dtype = static_cast<DType>(sh >> 8 & 0xff);
  r.wire = static_cast<DType>(sh >> 16 & 0xff);
  r.op = static_cast<ReduceOp>(sh >> 24 & 0xff);
  r.group_size = static_cast<uint16_t>(sh >> 32);
  r.group_index = static_cast<uint16_t>(sh >> 48);
  r.root = static_cast<int32_t>(static_cast<uint32_t>(pl));
  r.peer = static_cast<int32_t>(static_cast<uint32_t>(pl >> 32));
  r.device = (pd & 1) != 0;
  r.p2p_seq = pd >> 1;
  r.state = static_cast<CallState>(out & 0xff);
  r.planned = (out >> 8 & 1) != 0;
  r.executor = static_cast<ExecutorKind>(out >> 16 & 0xff);
  r.algorithm = static_cast<Algorithm>(out >> 24 & 0xff);
  r.protocol = static_cast<Protocol>(out >> 32 & 0xff);
  // A call that did not wait to start started when it entered (started() was not called).
  if (r.started == 0 && r.state != CallState::kEntered) r.started = r.entered;
  return r;
}

std::string FlightRecorder::to_json(const DumpRequest& request) const {
  const WallOfTicks clock;
  nlohmann::json calls = nlohmann::json::array();
  const uint64_t written = written_.load(std::memory_order_acquire);
  const uint64_t first = written > capacity_ ? written - capacity_ : 0;
  uint64_t torn = 0;
  for (uint64_t i = first; i < written; ++i) {
    const Slot& s = slots_[i & mask_];
    CallRecord r;
    bool whole = false;
    for (int attempt = 0; attempt < 3 && !whole; ++attempt) {  // a slot the call thread writes now is retried
      const uint64_t before = s.version.load(std::memory_order_acquire);
      if (before & 1) continue;
      r = s.get();
      std::atomic_thread_fence(std::memory_order_acquire);
      whole = s.version.load(std::memory_order_relaxed) == before;
    }
    if (!whole) {
      ++torn;
      continue;
    }
    nlohmann::json c = {{"seq", r.seq},
                        {"kind", coll_name(r.kind)},
                        {"dtype", dtype_name(r.dtype)},
                        {"count", r.count},
                        {"state", call_state_name(r.state)},
                        {"entered_ns", clock.wall(r.entered)},
                        {"started_ns", clock.wall(r.started)},
                        {"ended_ns", clock.wall(r.ended)}};
    if (r.kind == CollKind::kSend || r.kind == CollKind::kRecv) {
      c["peer"] = r.peer;
      c["p2p_seq"] = r.p2p_seq;
    }
    if (r.kind == CollKind::kBroadcast || r.kind == CollKind::kReduce) c["root"] = r.root;
    if (r.kind == CollKind::kAllreduce || r.kind == CollKind::kReduce || r.kind == CollKind::kReduceScatter) {
      c["op"] = op_name(r.op);
    }
    if (r.wire != DType::kCount) c["wire"] = dtype_name(r.wire);
    if (r.group_size > 1) c["group"] = {r.group_index, r.group_size};
    if (r.device) c["device"] = true;
    if (r.planned) {
      c["executor"] = executor_name(r.executor);
      c["algorithm"] = algorithm_name(r.algorithm);
      c["protocol"] = protocol_name(r.protocol);
    }
    calls.push_back(std::move(c));
  }
  char host[256] = {0};
  (void)gethostname(host, sizeof host - 1);
  nlohmann::json dump = {{"format", "kolo-flight-recorder"},
                         {"version", 1},
                         {"comm", comm_},
                         {"rank", rank_},
                         {"size", size_},
                         {"host", host},
                         {"pid", static_cast<int64_t>(getpid())},
                         {"reason", request.reason},
                         {"dumped_ns", clock.wall_now},
                         {"capacity", capacity_},
                         {"calls_recorded", written},
                         {"calls_torn", torn},
                         {"calls", std::move(calls)}};
  if (!request.error.empty()) dump["error"] = request.error;
  return dump.dump(1);
}

Result<std::string> FlightRecorder::dump(const DumpRequest& request) const {
  const std::string folder = request.folder.empty() ? env_string("KOLO_TRACE_DIR") : request.folder;
  if (folder.empty()) {
    return error(Code::kInvalidArgument, "rank ", rank_, ": no folder for the flight recorder's dump (name one, or set "
                 "KOLO_TRACE_DIR)");
  }
  const std::string path = str_cat(folder, "/kolo-trace.", file_safe(comm_), ".rank", rank_, ".json");
  const std::string temporary = str_cat(path, ".tmp", getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    if (!out) return error(Code::kSystem, "rank ", rank_, ": cannot write the flight recorder's dump ", temporary);
    out << to_json(request) << '\n';
    out.close();
    if (!out) return error(Code::kSystem, "rank ", rank_, ": writing the flight recorder's dump ", temporary, " failed");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    (void)std::remove(temporary.c_str());
    return error(Code::kSystem, "rank ", rank_, ": cannot rename the flight recorder's dump into ", path);
  }
  if (request.reason == "failure") failure_dumped_.store(true, std::memory_order_release);
  return path;
}

size_t trace_capacity() {
  Result<long long> n = env_int("KOLO_TRACE_CALLS");
  return n.ok() ? static_cast<size_t>(n.value()) : 1024;
}

Result<int> dump_all_recorders(const DumpRequest& request) {
  std::lock_guard<std::mutex> lock(g_recorders_mutex);
  int written = 0;
  Status first;
  for (const FlightRecorder* r : recorders()) {
    if (request.reason == "signal" && r->failure_dumped()) continue;
    Result<std::string> path = r->dump(request);
    if (path.ok()) {
      ++written;
    } else {
      log_warn(Subsys::kExec, path.status().message());
      if (first.ok()) first = path.status();
    }
  }
  if (!first.ok()) return first;
  return written;
}

namespace {

int g_signal_pipe[2] = {-1, -1};

void on_dump_signal(int) {
  const int saved = errno;
  const char byte = 1;
  (void)!write(g_signal_pipe[1], &byte, 1);  // a full pipe: a dump is pending anyway
  errno = saved;
}

}  // namespace

void arm_trace_signal() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!env_is_set("KOLO_TRACE_DIR")) return;
    struct sigaction current {};
    if (sigaction(SIGUSR1, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;
    if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) return;
    (void)fcntl(g_signal_pipe[1], F_SETFL, O_NONBLOCK);
    // The dump is written by a thread of its own: a signal handler may not allocate.
    std::thread([] {
      char byte;
      while (true) {
        const ssize_t n = read(g_signal_pipe[0], &byte, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        (void)dump_all_recorders(DumpRequest{"", "signal", ""});
      }
    }).detach();
    struct sigaction dump {};
    dump.sa_handler = on_dump_signal;
    sigemptyset(&dump.sa_mask);
    dump.sa_flags = SA_RESTART;
    (void)sigaction(SIGUSR1, &dump, nullptr);
    // kolorun signals only the ranks that leave this mark: SIGUSR1 ends any other process.
    if (env_string("KOLO_LAUNCHER") == "kolorun") {
      const std::string mark = str_cat(env_string("KOLO_TRACE_DIR"), "/.kolo-armed.", getpid());
      const int fd = ::open(mark.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
      if (fd >= 0) ::close(fd);
    }
  });
}

}  // namespace kolo
