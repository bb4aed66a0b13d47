// Reads the flight recorder's dumps of every rank (engine/flight_recorder.h) and says, on one
// screen, where a job stands: the last call each rank completed, where the ranks part (who
// never entered call K, who mismatched it, who failed in it, who left no dump), the first
// error, and the ranks that enter calls late (stragglers). kolo-trace prints it; kolorun
// prints it when a job fails.
#pragma once

#include <string>
#include <vector>

namespace kolo::trace {

struct CallEntry {
  long long seq = 0;
  std::string kind, dtype, state;  // state: entered, running, done, failed, on_stream
  long long count = 0;
  int root = -1, peer = -1;
  double entered_ms = 0, started_ms = 0, ended_ms = 0;  // wall clock, ms since the epoch (0 = not yet)
  bool p2p() const { return kind == "send" || kind == "recv"; }
  std::string what() const;  // "allreduce of 1024 x float"
};

struct RankDump {
  std::string file, comm, host, reason, error;
  int rank = -1, size = 0;
  double dumped_ms = 0;
  long long calls_recorded = 0;
  std::vector<CallEntry> calls;  // oldest first
};

struct Problem {  // a file that is not a dump kolo-trace can read
  std::string file, why;
};

struct Dumps {
  std::vector<RankDump> ranks;
  std::vector<Problem> problems;
};

// Every kolo-trace.*.json file in `folder`; unreadable ones are problems, never guesses.
Dumps read_folder(const std::string& folder);
// One dump's text (tests; read_folder uses it).
bool parse_dump(const std::string& text, RankDump* out, std::string* why);

// The summary, one block per communicator (those with a failure first).
std::string report(const Dumps& dumps, const std::string& folder);

}  // namespace kolo::trace
