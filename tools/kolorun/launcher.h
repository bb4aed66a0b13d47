// kolorun's process side: starts every rank (fork+exec here, ssh elsewhere), relays
// their output with a "[rank] " prefix, and ends the job as a whole when one rank fails,
// the user interrupts, or the time limit passes.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "support/status.h"
#include "tools/kolorun/hosts.h"

namespace kolo::kolorun {

struct JobSpec {
  std::vector<std::string> argv;  // program and its arguments, as the user gave them
  std::vector<Placement> ranks;
  // Variables every rank gets (kolorun's KOLO_* and -x ones). Local ranks also inherit
  // kolorun's whole environment; remote ranks get only these.
  std::vector<std::pair<std::string, std::string>> env;
  std::string addr;        // KOLO_ADDR: host:port of the store
  std::string secret_hex;  // KOLO_SECRET: never on a command line
  bool prefix = true;
  // Pin each rank on this machine to one CPU (local rank i -> the i-th allowed CPU), as
  // mpirun does; only when there are no more local ranks than CPUs.
  bool bind_to_core = false;
  double timeout_s = 0;    // wall-clock limit for the job; 0 = none
  std::string ssh = "ssh";
  // --launcher: when set, remote ranks are started with these words ({host} replaced by
  // the rank's host) followed by `sh -c SCRIPT`, instead of through ssh.
  std::string launcher;
  std::string cwd;         // remote ranks cd here first
  // Elastic (--min-np/--max-np): a rank that fails is dropped and the job goes on while at
  // least min_np ranks run (the survivors rebuild their world, engine/elastic.h); hosts the
  // discovery script lists get new ranks, up to max_np, which join the running world.
  bool elastic = false;
  int min_np = 1;
  int max_np = 0;
  std::string discovery_script;       // polled every discovery_interval_s; empty = fixed hosts
  double discovery_interval_s = 1.0;
  std::string this_hostname;          // which discovered hosts are this machine
  bool store_on_loopback = false;     // then remote hosts cannot join
  // KOLO_TRACE_DIR of the ranks (kolorun's own folder unless the user set one; "" with
  // --no-trace): when a rank fails, the others dump there before the job is stopped.
  std::string trace_dir;
};

// Exit codes of kolorun itself (a rank's failure passes its own code on).
constexpr int kExitUsage = 2;
constexpr int kExitTimeout = 124;
constexpr int kExitCannotRun = 127;

// Seconds between SIGTERM and SIGKILL when the job is being stopped.
constexpr double kKillGraceSeconds = 3.0;
// Seconds between a rank's failure and stopping the others, where they dump their flight
// recorders: their own errors (most come within milliseconds) and dumps are written by then.
constexpr double kDumpGraceSeconds = 1.0;

// Blocks the signals that run_job takes through a signalfd (SIGCHLD, SIGINT, SIGTERM,
// SIGHUP) and ignores SIGPIPE. Call before any thread starts (the store's server
// thread), so that no thread takes them asynchronously.
Status block_job_signals();

// Runs the job to the end and returns kolorun's exit status: 0 when every rank exited
// 0; otherwise the first failing rank's code (128+signal when killed), 124 on timeout,
// 128+signal when kolorun itself was interrupted.
int run_job(const JobSpec& job);

// The variables kolorun sets per rank; users may not set them with -x.
bool is_per_rank_variable(const std::string& name);

// `'text'` with embedded quotes escaped, for POSIX shells.
std::string shell_quote(const std::string& text);
// The POSIX sh script a remote rank runs: reads KOLO_SECRET from stdin, cds to the
// job's directory, runs the program with the rank's variables, and stops it when
// kolorun's end of stdin closes (ssh gone).
std::string remote_script(const JobSpec& job, const Placement& rank);

// "SIGSEGV" etc.; "signal N" for unnamed ones.
std::string signal_name(int signal);

}  // namespace kolo::kolorun
