// kolorun --host-discovery-script: the hosts an elastic job may use now, as the script
// prints them (one "host:slots" or "host" per line, as horovodrun's). The job starts new
// ranks where it finds room (launcher.cc).
#pragma once

#include <string>
#include <vector>

#include "support/status.h"
#include "tools/kolorun/hosts.h"

namespace kolo::kolorun {

// Runs `script` (through /bin/sh -c, in kolorun's environment) and parses what it prints.
// A script that fails, prints something that is not a host list, or runs longer than
// timeout_s is an error naming it.
Result<std::vector<HostSlots>> discover_hosts(const std::string& script, double timeout_s);
// The parsing alone: lines of host[:slots], blank lines and '#' comments skipped.
Result<std::vector<HostSlots>> parse_discovered_hosts(const std::string& text);

}  // namespace kolo::kolorun
