// kolorun's running job, shared by launcher.cc (starts, watches and stops the ranks) and
// job_elastic.cc (elastic jobs: drops failed ranks, starts joiners). Internal to kolorun.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "support/clock.h"
#include "transport/bootstrap/store.h"
#include "tools/kolorun/launcher.h"

namespace kolo::kolorun {

// A line longer than this is relayed in pieces rather than held without bound.
constexpr size_t kMaxPendingLine = 64 * 1024;
constexpr size_t kReadChunk = 64 * 1024;
// After the last rank exits, how long output from its leftovers may still trickle in.
constexpr double kDrainSeconds = 1.0;
// Elastic: how long after the first rank finished a joiner not let in is left running.
constexpr double kJoinerGraceSeconds = 30.0;
// Elastic: how long a rank asked to leave (its host no longer listed) may take to reach a
// commit and go before it is stopped.
constexpr double kLeaveGraceSeconds = 60.0;

using TimePoint = Clock::time_point;

TimePoint after(double seconds);
// One "kolorun: " line on stderr.
void say(const std::string& message);
void close_fd(int& fd);

// What one fork+exec needs, prepared before the fork.
struct ExecPlan {
  std::string path;
  std::vector<std::string> argv;
  std::vector<std::string> env;
};

struct Stream {
  int fd = -1;
  int out_fd = STDOUT_FILENO;
  std::string pending;
  bool at_line_start = true;
};

struct Rank {
  Placement where;
  pid_t pid = -1;
  bool running = false;
  Stream out, err;
  // Remote ranks: the write end of ssh's stdin. It carries the secret, then stays open
  // as a lifeline: closing it makes the remote script stop the program.
  int stdin_fd = -1;
  bool stopped = false;  // elastic: stopped by kolorun (its host is no longer listed)
  // Elastic: asked to leave (its host is no longer listed); stopped if it still runs then.
  std::optional<TimePoint> leave_by;
};

class Job {
 public:
  explicit Job(const JobSpec& spec) : spec_(spec) {}
  ~Job();
  int run();

 private:
  Result<ExecPlan> plan_for(const Rank& rank) const;
  Status start(Rank& rank);
  void relay(Stream& stream, const char* data, size_t size, const std::string& prefix);
  void pump(Rank& rank, Stream& stream, int max_reads);
  void finish_stream(Rank& rank, Stream& stream);
  void reap();
  void on_signal(int signo);
  void terminate();
  // A rank failed: the ranks of this machine whose kolo armed its dump signal dump their
  // flight recorders (SIGUSR1), and the job ends kDumpGraceSeconds later, so that the
  // survivors' own errors and dumps come through first (JobSpec::trace_dir).
  void dump_then_terminate();
  void signal_running(int signo);
  void set_exit(int code) {
    if (!exit_code_) exit_code_ = code;
  }
  bool any_running() const;
  bool any_stream_open() const;
  int poll_timeout_ms() const;
  // Elastic jobs.
  int running_count(const std::string* host = nullptr) const;
  void lost(Rank& rank, const std::string& how, int code);
  void discover();
  void start_joiner(const HostSlots& host, int local_rank);
  Status mark_host(const std::string& host, bool leaving);
  // Once per loop of run(): the discovery script when due, ranks that did not leave in
  // time, joiners never let in before the job finished.
  void elastic_tick(TimePoint now);
  bool on_host(const Rank& rank, const std::string& host) const;
  void stop(Rank& rank);  // SIGTERM, counted as stopped by kolorun

  const JobSpec& spec_;
  std::vector<Rank> ranks_;
  std::optional<int> exit_code_;
  bool terminating_ = false;
  bool killed_ = false;
  int signal_fd_ = -1;
  int null_fd_ = -1;
  std::optional<std::string> program_path_;
  std::optional<std::string> ssh_path_;
  std::optional<TimePoint> timeout_at_;
  std::optional<TimePoint> kill_at_;
  std::optional<TimePoint> terminate_at_;  // dump_then_terminate's
  std::optional<TimePoint> drain_until_;
  std::optional<TimePoint> next_discovery_;
  // Elastic: a rank has finished (exited 0), so the job is ending: no new ranks, and
  // joiners still waiting to be let in are stopped at stop_joiners_at_.
  bool finished_ = false;
  std::optional<TimePoint> stop_joiners_at_;
  int next_number_ = 0;             // kolorun's number for the next rank it starts
  // Elastic: kolorun's own client of its store, to mark the hosts whose ranks should leave.
  std::unique_ptr<StoreClient> store_;
  std::set<std::string> leaving_hosts_;
  std::vector<std::string> lost_;   // elastic: ranks that failed, for the final message
  std::string last_discovery_error_;
};

}  // namespace kolo::kolorun
