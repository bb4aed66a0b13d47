// horovodrun's command-line flags, taken by kolorun as they are, so that a Horovod user's
// command line runs with `horovodrun` replaced by `kolorun`. Each maps to what kolo has:
// a variable for every rank (--fusion-threshold-mb: KOLO_FUSION_THRESHOLD), an ssh option
// (-p: ssh -p), or nothing with a note (--gloo, --mpi: kolo uses its own transports).
// -np, -H, --hostfile, --min-np, --max-np and --host-discovery-script are kolorun's own.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "support/status.h"

namespace kolo::kolorun {

struct HorovodFlags {
  std::vector<std::pair<std::string, std::string>> exports;  // for every rank, unless -x sets the same
  std::vector<std::string> ssh_args;                         // added to the ssh command
  std::vector<std::string> notes;                            // said once, on stderr
};

// Whether `arg` (without an inline "=value") is one of horovodrun's flags kolorun takes,
// and whether it takes a value.
bool is_horovod_flag(const std::string& arg, bool* takes_value);
// Applies one (value empty for those without); a bad value is an error naming the flag.
Status apply_horovod_flag(const std::string& arg, const std::string& value, HorovodFlags& into);
// The lines of kolorun --help that list them.
const char* horovod_flags_help();

}  // namespace kolo::kolorun
