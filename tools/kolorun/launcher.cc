#include "tools/kolorun/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <sstream>

#include "support/clock.h"
#include "tools/kolorun/binding.h"
#include "tools/kolorun/job.h"

extern char** environ;

namespace kolo::kolorun {
namespace {

// Output must not stop the job: a closed reader (kolorun | head) just loses the rest.
void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {  // an inherited non-blocking stdout
      pollfd wait_out{fd, POLLOUT, 0};
      ::poll(&wait_out, 1, 1000);
    } else {
      return;
    }
  }
}


// Finds `name` the way execvp would, but here in the parent: the child may only make
// async-signal-safe calls (the store's thread is running), so it gets a ready path.
std::optional<std::string> find_program(const std::string& name, const std::string& path_value) {
  auto runnable = [](const std::string& candidate) {
    struct stat info {};
    return ::stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(candidate.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    if (runnable(name)) return name;
    return std::nullopt;
  }
  size_t start = 0;
  while (start <= path_value.size()) {
    size_t colon = path_value.find(':', start);
    std::string dir = path_value.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (runnable(candidate)) return candidate;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return std::nullopt;
}

// "--ssh 'ssh -p 2222'": the program and its options, split on blanks (no quoting).
std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  std::string word;
  while (in >> word) words.push_back(word);
  return words;
}

std::vector<std::pair<std::string, std::string>> rank_variables(const JobSpec& job, const Placement& rank) {
  std::vector<std::pair<std::string, std::string>> vars;
  if (!rank.joins) {  // a joiner learns its rank when the job lets it in
    vars = {{"KOLO_RANK", std::to_string(rank.rank)}, {"KOLO_SIZE", std::to_string(job.ranks.size())}};
  }
  vars.insert(vars.end(), {{"KOLO_LOCAL_RANK", std::to_string(rank.local_rank)},
                           {"KOLO_LOCAL_SIZE", std::to_string(rank.local_size)},
                           {"KOLO_ADDR", job.addr},
                           {"KOLO_LAUNCHER", "kolorun"}});  // the store is kolorun's: rank 0 must not start one
  if (job.elastic) {
    vars.emplace_back("KOLO_ELASTIC", rank.joins ? "join" : "1");
    vars.emplace_back("KOLO_ELASTIC_HOST", rank.host.empty() ? "localhost" : rank.host);
  }
  return vars;
}


std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& text : strings) out.push_back(text.data());
  out.push_back(nullptr);
  return out;
}


}  // namespace

TimePoint after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}


void say(const std::string& message) {
  std::string line = "kolorun: " + message + "\n";
  write_all(STDERR_FILENO, line.data(), line.size());
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

Job::~Job() {
  for (Rank& rank : ranks_) {
    close_fd(rank.out.fd);
    close_fd(rank.err.fd);
    close_fd(rank.stdin_fd);
  }
  close_fd(signal_fd_);
  close_fd(null_fd_);
}

Result<ExecPlan> Job::plan_for(const Rank& rank) const {
  ExecPlan plan;
  std::vector<std::pair<std::string, std::string>> vars = spec_.env;
  for (auto& var : rank_variables(spec_, rank.where)) vars.push_back(var);
  if (rank.where.local) {
    plan.path = *program_path_;
    plan.argv = spec_.argv;
    vars.emplace_back("KOLO_SECRET", spec_.secret_hex);
    std::set<std::string> replaced;
    for (auto& [name, value] : vars) replaced.insert(name);
    for (char** entry = environ; *entry != nullptr; ++entry) {
      std::string text = *entry;
      if (replaced.count(text.substr(0, text.find('='))) == 0) plan.env.push_back(text);
    }
    for (auto& [name, value] : vars) plan.env.push_back(name + "=" + value);
  } else if (!spec_.launcher.empty()) {
    // The launcher's own words, then the script as one argument: no remote shell parses
    // it again, as sshd's would, so it needs no extra quoting. The secret goes on stdin.
    plan.path = *ssh_path_;
    plan.argv = launcher_words(spec_.launcher, rank.where.host);
    for (const char* arg : {"sh", "-c"}) plan.argv.emplace_back(arg);
    plan.argv.push_back(remote_script(spec_, rank.where));
    for (char** entry = environ; *entry != nullptr; ++entry) plan.env.emplace_back(*entry);
  } else {
    // The secret stays off this command line and the remote one: it goes on stdin.
    plan.path = *ssh_path_;
    plan.argv = split_words(spec_.ssh);
    for (const char* arg : {"-o", "BatchMode=yes"}) plan.argv.emplace_back(arg);
    plan.argv.push_back(rank.where.host);
    plan.argv.push_back("sh -c " + shell_quote(remote_script(spec_, rank.where)));
    for (char** entry = environ; *entry != nullptr; ++entry) plan.env.emplace_back(*entry);
  }
  return plan;
}

Status Job::start(Rank& rank) {
  Result<ExecPlan> planned = plan_for(rank);
  if (!planned.ok()) return planned.status();
  ExecPlan& plan = planned.value();
  std::vector<char*> argv = pointers(plan.argv);
  std::vector<char*> envp = pointers(plan.env);

  int out[2] = {-1, -1}, err[2] = {-1, -1}, in[2] = {-1, -1}, report[2] = {-1, -1};
  auto close_all = [&] {
    for (int* pair : {out, err, in, report}) {
      close_fd(pair[0]);
      close_fd(pair[1]);
    }
  };
  bool remote = !rank.where.local;
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(report, O_CLOEXEC) != 0 ||
      (remote && ::pipe2(in, O_CLOEXEC) != 0)) {
    int saved = errno;
    close_all();
    if (saved == EMFILE || saved == ENFILE) {
      // kolorun holds 6-8 descriptors per rank it starts (its output, errors, reports).
      rlimit limit{};
      ::getrlimit(RLIMIT_NOFILE, &limit);
      return error(Code::kSystem, "pipe: ", std::strerror(saved), ": kolorun holds about 8 file descriptors per rank, and ",
                   "the limit is ", static_cast<long long>(limit.rlim_cur), " (hard ", static_cast<long long>(limit.rlim_max),
                   "): raise it with `ulimit -n`");
    }
    return error(Code::kSystem, "pipe: ", std::strerror(saved));
  }
  int stdin_source = remote ? in[0] : null_fd_;
  sigset_t no_signals;
  sigemptyset(&no_signals);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  pid_t parent = ::getpid();
  cpu_set_t bind;
  const bool pin = spec_.bind_to_core && !remote && cpu_for_local_rank(rank.where.local_rank, rank.where.local_size, &bind);

  pid_t pid = ::fork();
  if (pid < 0) {
    int saved = errno;
    close_all();
    return error(Code::kSystem, "fork: ", std::strerror(saved));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls from here to exec.
    ::setpgid(0, 0);  // own group: one kill reaches its children too
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // kolorun killed hard: no orphaned ranks
    if (::getppid() != parent) ::_exit(kExitCannotRun);
    // Default actions, whatever kolorun inherited: started as a background job of a script,
    // it has SIGINT and SIGQUIT ignored, and its ranks would keep that across exec and
    // never stop on the Ctrl-C that kolorun forwards.
    for (int signo : {SIGPIPE, SIGINT, SIGQUIT, SIGTERM, SIGHUP}) ::sigaction(signo, &default_action, nullptr);
    ::sigprocmask(SIG_SETMASK, &no_signals, nullptr);
    if (pin) ::sched_setaffinity(0, sizeof(bind), &bind);
    if (::dup2(stdin_source, STDIN_FILENO) < 0 || ::dup2(out[1], STDOUT_FILENO) < 0 ||
        ::dup2(err[1], STDERR_FILENO) < 0) {
      int saved = errno;
      (void)!::write(report[1], &saved, sizeof(saved));
      ::_exit(kExitCannotRun);
    }
    ::execve(plan.path.c_str(), argv.data(), envp.data());
    int saved = errno;
    (void)!::write(report[1], &saved, sizeof(saved));
    ::_exit(kExitCannotRun);
  }
  ::setpgid(pid, pid);  // also here, so no kill can race the child's own setpgid
  close_fd(out[1]);
  close_fd(err[1]);
  close_fd(in[0]);
  close_fd(report[1]);
  int child_errno = 0;
  ssize_t got;
  do {
    got = ::read(report[0], &child_errno, sizeof(child_errno));
  } while (got < 0 && errno == EINTR);
  close_fd(report[0]);
  if (got == static_cast<ssize_t>(sizeof(child_errno))) {  // exec failed; a success closes the pipe
    ::waitpid(pid, nullptr, 0);
    close_all();
    return error(Code::kSystem, "cannot execute '", plan.path, "': ", std::strerror(child_errno));
  }
  rank.pid = pid;
  rank.running = true;
  rank.out.fd = out[0];
  rank.err.fd = err[0];
  rank.err.out_fd = STDERR_FILENO;
  ::fcntl(rank.out.fd, F_SETFL, O_NONBLOCK);
  ::fcntl(rank.err.fd, F_SETFL, O_NONBLOCK);
  if (remote) {
    rank.stdin_fd = in[1];
    std::string line = spec_.secret_hex + "\n";  // far below a pipe's buffer: never blocks
    write_all(rank.stdin_fd, line.data(), line.size());
  }
  return Status::ok_status();
}

// Whole lines go out at once so that ranks' lines never interleave mid-line.
void Job::relay(Stream& stream, const char* data, size_t size, const std::string& prefix) {
  if (!spec_.prefix) {
    write_all(stream.out_fd, data, size);
    return;
  }
  stream.pending.append(data, size);
  std::string ready;
  size_t begin = 0;
  size_t newline;
  while ((newline = stream.pending.find('\n', begin)) != std::string::npos) {
    if (stream.at_line_start) ready += prefix;
    ready.append(stream.pending, begin, newline + 1 - begin);
    stream.at_line_start = true;
    begin = newline + 1;
  }
  stream.pending.erase(0, begin);
  if (stream.pending.size() >= kMaxPendingLine) {
    if (stream.at_line_start) ready += prefix;
    ready += stream.pending;
    stream.pending.clear();
    stream.at_line_start = false;
  }
  write_all(stream.out_fd, ready.data(), ready.size());
}

void Job::finish_stream(Rank& rank, Stream& stream) {
  if (!stream.pending.empty()) {
    std::string rest = (stream.at_line_start ? "[" + std::to_string(rank.where.rank) + "] " : "") + stream.pending + "\n";
    write_all(stream.out_fd, rest.data(), rest.size());
    stream.pending.clear();
  }
  close_fd(stream.fd);
}

void Job::pump(Rank& rank, Stream& stream, int max_reads) {
  std::string prefix = "[" + std::to_string(rank.where.rank) + "] ";
  char buffer[kReadChunk];
  for (int reads = 0; stream.fd >= 0 && reads < max_reads; ++reads) {
    ssize_t n = ::read(stream.fd, buffer, sizeof(buffer));
    if (n > 0) {
      relay(stream, buffer, static_cast<size_t>(n), prefix);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return;
    } else {
      finish_stream(rank, stream);  // EOF, or an error that ends the stream as well
    }
  }
}

void Job::reap() {
  while (true) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    Rank* rank = nullptr;
    for (Rank& candidate : ranks_) {
      if (candidate.pid == pid && candidate.running) rank = &candidate;
    }
    if (rank == nullptr) continue;
    rank->running = false;
    ::kill(-pid, SIGTERM);  // what the rank left behind in its group ends with it
    close_fd(rank->stdin_fd);
    // Its last words are in the pipes already; show them before the verdict.
    pump(*rank, rank->out, 1024);
    pump(*rank, rank->err, 1024);
    bool exited = WIFEXITED(status);
    int code = exited ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    // A rank that finished (not one that left because its host went) means the job ends.
    if (code == 0 && spec_.elastic && !rank->leave_by && !finished_) {
      finished_ = true;
      stop_joiners_at_ = after(kJoinerGraceSeconds);
    }
    if (code == 0 && rank->leave_by) say(str_cat("rank ", rank->where.rank, " left (its host is no longer listed)"));
    if (code == 0 || terminating_) continue;
    if (spec_.elastic) {
      lost(*rank, exited ? str_cat("exited with status ", code) : str_cat("killed by signal ", signal_name(WTERMSIG(status))), code);
      continue;
    }
    std::string r = std::to_string(rank->where.rank);
    if (exited) {
      say(str_cat("rank ", r, " exited with status ", code));
      if (!rank->where.local && code == 255 && spec_.launcher.empty()) say(str_cat("rank ", r, ": 255 is ssh's status when it cannot reach '", rank->where.host, "'"));
    } else {
      say(str_cat("rank ", r, " killed by signal ", signal_name(WTERMSIG(status))));
    }
    set_exit(code);
    dump_then_terminate();
  }
}

void Job::dump_then_terminate() {
  if (spec_.trace_dir.empty()) return terminate();
  if (terminate_at_) return;  // a later rank's failure: the grace runs already
  terminate_at_ = after(kDumpGraceSeconds);
  for (Rank& rank : ranks_) {
    // Only a process whose kolo installed the handler (it leaves a mark): SIGUSR1 would
    // end any other. Ranks elsewhere dump on their own failure.
    if (!rank.running || !rank.where.local) continue;
    if (::access(str_cat(spec_.trace_dir, "/.kolo-armed.", rank.pid).c_str(), F_OK) == 0) ::kill(rank.pid, SIGUSR1);
  }
}

void Job::signal_running(int signo) {
  for (Rank& rank : ranks_) {
    if (rank.running) ::kill(-rank.pid, signo);
  }
}

void Job::terminate() {
  if (terminating_) return;
  terminating_ = true;
  for (Rank& rank : ranks_) close_fd(rank.stdin_fd);
  signal_running(SIGTERM);
  kill_at_ = after(kKillGraceSeconds);
}

void Job::on_signal(int signo) {
  if (signo == SIGCHLD) {
    reap();
    return;
  }
  if (!terminating_) {
    say(str_cat("got ", signal_name(signo), "; stopping all ranks"));
    set_exit(128 + signo);
    terminate();
  } else if (!killed_) {
    say(str_cat("got ", signal_name(signo), " again; killing all ranks"));
    signal_running(SIGKILL);
    killed_ = true;
  }
}

bool Job::any_running() const {
  for (const Rank& rank : ranks_) {
    if (rank.running) return true;
  }
  return false;
}

bool Job::any_stream_open() const {
  for (const Rank& rank : ranks_) {
    if (rank.out.fd >= 0 || rank.err.fd >= 0) return true;
  }
  return false;
}

int Job::poll_timeout_ms() const {
  std::optional<TimePoint> next;
  for (const auto& at : {terminating_ ? std::optional<TimePoint>() : timeout_at_, kill_at_, terminate_at_, drain_until_,
                         terminating_ ? std::optional<TimePoint>() : next_discovery_, stop_joiners_at_}) {
    if (at && (!next || *at < *next)) next = at;
  }
  if (!next) return -1;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*next - Clock::now()).count() + 1;
  return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 60'000));
}

int Job::run() {
  sigset_t mask;
  sigemptyset(&mask);
  for (int signo : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&mask, signo);
  signal_fd_ = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  null_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (signal_fd_ < 0 || null_fd_ < 0) {
    say(str_cat("cannot set up: ", std::strerror(errno)));
    return 1;
  }

  ranks_.resize(spec_.ranks.size());
  bool any_local = false, any_remote = false;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    ranks_[i].where = spec_.ranks[i];
    (spec_.ranks[i].local ? any_local : any_remote) = true;
  }
  next_number_ = static_cast<int>(ranks_.size());
  if (!spec_.discovery_script.empty()) any_local = true;  // hosts may come: find the program now
  const char* path_env = std::getenv("PATH");
  std::string path_value = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
  if (any_local && !(program_path_ = find_program(spec_.argv[0], path_value))) {
    const std::string& program = spec_.argv[0];
    struct stat st{};
    if (program.find('/') != std::string::npos && ::stat(program.c_str(), &st) == 0) {
      say(S_ISDIR(st.st_mode) ? str_cat("program '", program, "' is a directory")
                              : str_cat("program '", program, "' is not executable (chmod +x it, or name its "
                                        "interpreter: kolorun -np N python3 ", program, ")"));
    } else {
      say(str_cat("cannot find program '", program, "'", program.find('/') == std::string::npos ? " in PATH" : ""));
    }
    return kExitCannotRun;
  }
  // ssh_path_ is the program that starts remote ranks: ssh's, or the --launcher's.
  std::vector<std::string> ssh_words = split_words(spec_.launcher.empty() ? spec_.ssh : spec_.launcher);
  if (!spec_.discovery_script.empty() && !ssh_words.empty()) ssh_path_ = find_program(ssh_words[0], path_value);
  if (any_remote && (ssh_words.empty() || !(ssh_path_ = find_program(ssh_words[0], path_value)))) {
    say(spec_.launcher.empty() ? str_cat("cannot find the ssh program '", spec_.ssh, "'")
                               : str_cat("cannot find the launcher program '", ssh_words.empty() ? "" : ssh_words[0],
                                         "' of --launcher '", spec_.launcher, "'"));
    return kExitCannotRun;
  }

  if (spec_.timeout_s > 0) timeout_at_ = after(spec_.timeout_s);
  if (!spec_.discovery_script.empty()) next_discovery_ = after(spec_.discovery_interval_s);
  for (Rank& rank : ranks_) {
    Status started = start(rank);
    if (!started.ok()) {
      say(str_cat("rank ", rank.where.rank, ": ", started.message()));
      set_exit(kExitCannotRun);
      terminate();
      break;
    }
  }

  std::vector<pollfd> fds;
  std::vector<std::pair<Rank*, Stream*>> owners;
  while (true) {
    if (!any_running()) {
      if (!any_stream_open()) break;
      if (!drain_until_) drain_until_ = after(kDrainSeconds);
    }
    TimePoint now = Clock::now();
    if (drain_until_ && now >= *drain_until_) break;
    if (timeout_at_ && now >= *timeout_at_ && !terminating_) {
      say(str_cat("the job ran past its time limit (", spec_.timeout_s, " s); stopping all ranks"));
      set_exit(kExitTimeout);
      terminate();
    }
    if (spec_.elastic && !terminating_) elastic_tick(now);
    if (terminate_at_ && now >= *terminate_at_) {
      terminate_at_.reset();
      terminate();
    }
    if (kill_at_ && now >= *kill_at_) {
      signal_running(SIGKILL);
      killed_ = true;
      kill_at_.reset();
    }

    fds.clear();
    owners.clear();
    fds.push_back({signal_fd_, POLLIN, 0});
    owners.emplace_back(nullptr, nullptr);
    for (Rank& rank : ranks_) {
      for (Stream* stream : {&rank.out, &rank.err}) {
        if (stream->fd < 0) continue;
        fds.push_back({stream->fd, POLLIN, 0});
        owners.emplace_back(&rank, stream);
      }
    }
    int ready = ::poll(fds.data(), fds.size(), poll_timeout_ms());
    if (ready < 0) {
      if (errno == EINTR) continue;
      say(str_cat("poll: ", std::strerror(errno)));
      set_exit(1);
      terminate();
      continue;
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) pump(*owners[i].first, *owners[i].second, 16);
    }
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo info{};
      while (::read(signal_fd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
        on_signal(static_cast<int>(info.ssi_signo));
      }
    }
  }

  for (Rank& rank : ranks_) {
    // Output still open after the drain: something of the rank's outlived it.
    if (rank.pid > 0 && (rank.out.fd >= 0 || rank.err.fd >= 0)) ::kill(-rank.pid, SIGKILL);
    finish_stream(rank, rank.out);
    finish_stream(rank, rank.err);
  }
  return exit_code_.value_or(0);
}


Status block_job_signals() {
  sigset_t mask;
  sigemptyset(&mask);
  for (int signo : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&mask, signo);
  if (::sigprocmask(SIG_BLOCK, &mask, nullptr) != 0) return error(Code::kSystem, "sigprocmask: ", std::strerror(errno));
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  if (::sigaction(SIGPIPE, &ignore, nullptr) != 0) return error(Code::kSystem, "sigaction: ", std::strerror(errno));
  return Status::ok_status();
}

int run_job(const JobSpec& job) {
  Job running(job);
  return running.run();
}

bool is_per_rank_variable(const std::string& name) {
  return name == "KOLO_RANK" || name == "KOLO_SIZE" || name == "KOLO_LOCAL_RANK" || name == "KOLO_LOCAL_SIZE" ||
         name == "KOLO_ADDR" || name == "KOLO_SECRET" || name == "KOLO_LAUNCHER" || name == "KOLO_ELASTIC_HOST";
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::string remote_script(const JobSpec& job, const Placement& rank) {
  // fd 3 keeps ssh's stdin for the watcher, a background job started first: when kolorun
  // closes its end (or ssh dies), the watcher's read ends and it stops the program, whose
  // pid is the shell's ($$): the shell execs it. Without a terminal nothing else would tell
  // a remote rank to stop. The program is not itself a background job: sh would start it
  // with SIGINT and SIGQUIT ignored, and kolorun's Ctrl-C would not reach it.
  std::string script = "IFS= read -r KOLO_SECRET || exit 255; export KOLO_SECRET; cd " + shell_quote(job.cwd) +
                       " || exit 127; exec 3<&0; { while read -r _ <&3; do :; done; kill -TERM $$; } "
                       "</dev/null >/dev/null 2>&1 & exec env";
  std::vector<std::pair<std::string, std::string>> vars = job.env;
  for (auto& var : rank_variables(job, rank)) vars.push_back(var);
  for (auto& [name, value] : vars) script += " " + shell_quote(name + "=" + value);
  for (const std::string& arg : job.argv) script += " " + shell_quote(arg);
  script += " </dev/null 3<&-";
  return script;
}

std::string signal_name(int signo) {
  const char* abbrev = ::sigabbrev_np(signo);
  if (abbrev != nullptr) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(signo);
}

}  // namespace kolo::kolorun
