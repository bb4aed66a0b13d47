// kolo's environment variables: declared once, in one table (env.cc), with their type,
// the values allowed, a default and a line of help that `kolorun --help-env` prints (and
// README.md's table is). Values read from the environment are untrusted: env_check_all()
// checks every one that is set when a communicator is made, so a bad value fails there,
// once, naming the variable, the value and what is allowed. An empty value counts as unset.
#pragma once

#include <string>
#include <vector>

#include "support/status.h"

namespace kolo {

enum class EnvKind {
  kText,      // anything (a name, an address, a secret)
  kPath,      // a file or library path; whether it exists is checked where it is used
  kInt,       // an integer in [min, max]
  kNumber,    // a number in [min, max]
  kSeconds,   // a number of seconds > 0 (inf too)
  kBool,      // 0 or 1
  kEnum,      // one of `choices`
  kEnumList,  // comma-separated names, each one of `choices`
};

struct EnvVar {
  const char* name;
  EnvKind kind;
  const char* default_value;  // what the readers get when it is unset; "" = none
  const char* unset_text;     // what "unset" means, shown as the default when default_value is ""
  const char* help;
  const char* choices = "";   // kEnum, kEnumList: the names, comma-separated
  bool any_case = false;      // kEnum, kEnumList: names match in any case (env_string gives the table's)
  double min = 0, max = 0;    // kInt, kNumber: both included; max may be infinity
};

const std::vector<EnvVar>& env_table();

// The variable's value, or its table default when unset or empty. Aborts in debug builds
// if `name` is not in the table, so every variable kolo reads is documented. A name of an
// any-case variable comes back spelled as in the table ("info" -> "INFO").
std::string env_string(const char* name);
bool env_is_set(const char* name);  // set and not empty
// Parses the variable as a number within the table's range; a malformed or out-of-range
// value is an error naming it.
Result<double> env_double(const char* name);
Result<long long> env_int(const char* name);
// The names of a kEnumList variable (or its default), in the table's spelling.
std::vector<std::string> env_list(const char* name);

// Seconds for any wait (KOLO_TIMEOUT); the default on a bad value (env_check_all reports
// it), and anything above 1e9 s (31 years; inf too) counts as 1e9 s.
double env_timeout_seconds();

// Checks `value` against the variable's kind and allowed values: an error naming the
// variable, the value and what is allowed.
Status env_check(const EnvVar& var, const std::string& value);
// Checks every KOLO_* variable of the table that is set (kInvalidArgument listing each bad
// one), and warns once per process about KOLO_* variables that are set but not in the
// table, naming the closest known one. Called where communicators are made from the
// environment (kolo_init, kolo_comm_init_rank) and where the runtime reads its settings.
Status env_check_all();
// The warnings env_check_all logs about unknown KOLO_* variables: one line each.
std::vector<std::string> env_unknown_variables();

// What the variable allows, in words ("an integer in [4096, 1073741824]").
std::string env_allowed(const EnvVar& var);
// Help for all variables: text, one block per variable (kolorun --help-env), or a
// Markdown table (kolorun --help-env=markdown, README.md's table).
std::string env_help();
std::string env_help_markdown();

}  // namespace kolo
