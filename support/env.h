// kolo's environment variables: declared once, in one table (env.cc), with a default and
// a line of help that `kolorun --help-env` prints. Values read from the environment are
// untrusted and are parsed with checks.
#pragma once

#include <string>
#include <vector>

#include "support/status.h"

namespace kolo {

struct EnvVar {
  const char* name;
  const char* default_value;  // "" = unset by default
  const char* help;
};

const std::vector<EnvVar>& env_table();

// The variable's value, or its table default when unset. Aborts in debug builds if
// `name` is not in the table, so every variable kolo reads is documented.
std::string env_string(const char* name);
bool env_is_set(const char* name);
// Parses the variable as a number; a malformed value is an error naming it.
Result<double> env_double(const char* name);
Result<long long> env_int(const char* name);

// Seconds for any wait (KOLO_TIMEOUT); falls back to the default on a bad value, and
// counts anything above 1e9 s (31 years; inf too) as 1e9 s.
double env_timeout_seconds();

// Help text for all variables, one block per variable.
std::string env_help();

}  // namespace kolo
