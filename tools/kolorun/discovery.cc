#include "tools/kolorun/discovery.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "support/clock.h"

namespace kolo::kolorun {

Result<std::vector<HostSlots>> parse_discovered_hosts(const std::string& text) {
  std::istringstream in(text);
  std::string list;
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    line = line.substr(first, line.find_last_not_of(" \t\r") + 1 - first);
    list += (list.empty() ? "" : ",") + line;
  }
  if (list.empty()) return std::vector<HostSlots>();  // no host now: the job goes on with what runs
  return parse_host_list(list);
}

Result<std::vector<HostSlots>> discover_hosts(const std::string& script, double timeout_s) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return error(Code::kSystem, "pipe: ", std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(out[0]);
    ::close(out[1]);
    return error(Code::kSystem, "fork: ", std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group: a script that overruns goes with all it started
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);  // kolorun blocks its job signals
    ::dup2(out[1], STDOUT_FILENO);
    ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so that the kill below cannot race the child's own
  ::close(out[1]);
  std::string text;
  const Deadline deadline(timeout_s);
  bool timed_out = false;
  while (true) {
    pollfd p{out[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, deadline.remaining_ms(1000));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {  // nothing yet: never read() then, it would block past the deadline
      if (deadline.expired()) {
        timed_out = true;
        break;
      }
      continue;
    }
    char buf[4096];
    const ssize_t n = ::read(out[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > (1u << 20)) break;  // a host list is not a megabyte
  }
  ::close(out[0]);
  if (timed_out) ::kill(-pid, SIGKILL);
  int status = 0;
  // kolorun's reaper may have taken the status first (waitpid(-1)): ECHILD is not an error.
  const bool reaped = ::waitpid(pid, &status, 0) == pid;
  if (timed_out) return error(Code::kTimeout, "--host-discovery-script '", script, "' ran past ", timeout_s, " s");
  if (reaped && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
    return error(Code::kInvalidArgument, "--host-discovery-script '", script, "' failed (status ",
                 WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), ")");
  }
  auto hosts = parse_discovered_hosts(text);
  if (!hosts.ok()) return hosts.status().with_context(str_cat("--host-discovery-script '", script, "': "));
  return hosts;
}

}  // namespace kolo::kolorun
