// kolorun's host lists: `-H a:2,b:4`, host files (`host slots=N`), and the placement of
// ranks on hosts. Pure functions over text, kept apart from the launcher so that the
// unit tests can check them without starting processes.
#pragma once

#include <string>
#include <vector>

#include "support/status.h"

namespace kolo::kolorun {

struct HostSlots {
  std::string name;
  int slots = 1;
  std::string origin;  // "FILE:LINE" for a host file's line (its errors name it), else empty
};

// Where one rank runs and who its neighbours on that host are.
struct Placement {
  int rank = 0;
  std::string host;     // as the user wrote it (ssh target for remote hosts)
  bool local = false;   // this machine: started with fork+exec, not ssh
  int local_rank = 0;   // index among the ranks on the same machine
  int local_size = 1;
  // Elastic jobs: started into the running job (KOLO_ELASTIC=join), without a rank of its
  // own until the job lets it in; `rank` is then only kolorun's number for it.
  bool joins = false;
};

// Most slots one host may declare; a typo like slots=80000000 should fail, not allocate.
constexpr int kMaxSlotsPerHost = 1 << 20;
// Most ranks one job may have (each costs the launcher three file descriptors).
constexpr int kMaxRanks = 1 << 16;

// Parses "host1:2,host2,[::1]:3" (slots default to 1). A host named twice gets the sum
// of its slots, in the position of its first mention. Errors name the offending entry.
Result<std::vector<HostSlots>> parse_host_list(const std::string& text);

// Parses a host file's contents: one `host [slots=N] [max_slots=N]` per line, `#` starts
// a comment, blank lines are skipped. Errors read "<origin>:<line>: ...".
Result<std::vector<HostSlots>> parse_hostfile(const std::string& text, const std::string& origin);
// Reads and parses the file at path.
Result<std::vector<HostSlots>> read_hostfile(const std::string& path);

// True for localhost, 127.x.x.x, ::1, and this machine's host name (full or short).
bool is_local_host(const std::string& host, const std::string& this_hostname);
// Every host that is not this one has an address (before anything starts; ssh's own
// aliases have none: kolorun skips this when --ssh is given). Errors name a host file's line.
Status check_hosts_resolve(const std::vector<HostSlots>& hosts, const std::string& this_hostname);
// gethostname(), or "localhost" if it fails.
std::string this_hostname();

// Places np ranks by filling the hosts in order. Local aliases (localhost, this machine's
// name) count as one machine for local_rank/local_size. Empty hosts = all ranks local.
Result<std::vector<Placement>> place_ranks(const std::vector<HostSlots>& hosts, int np,
                                           const std::string& this_hostname);

// Sum of the hosts' slots (saturating at kMaxRanks + 1, so a caller can say "too many").
int total_slots(const std::vector<HostSlots>& hosts);

// The --launcher template's words for one host: blank-separated words (no quoting, as
// --ssh), each "{host}" replaced by host.
std::vector<std::string> launcher_words(const std::string& launcher, const std::string& host);
// Why a --launcher template cannot be used (empty when it can): it must name a program
// first and contain {host}, which may not be part of that program's name.
std::string launcher_template_problem(const std::string& launcher);

}  // namespace kolo::kolorun
