// The table of environment variables (support/env.h): every set KOLO_* value is checked
// against its type and allowed values, once, where a communicator is made; typos of the
// names are warned about once; the table agrees with what the planner and the transports
// accept.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "engine/collective.h"
#include "engine/runtime/runtime.h"
#include "engine/schedules/algorithms.h"
#include "kolo/kolo.h"
#include "support/env.h"
#include "transport/transport.h"

namespace kolo {
namespace {

// Sets (or unsets, with nullptr) a variable for the scope and puts back what was there.
class ScopedVar {
 public:
  ScopedVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedVar() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

const EnvVar& var_named(const std::string& name) {
  for (const EnvVar& var : env_table()) {
    if (name == var.name) return var;
  }
  ADD_FAILURE() << name << " is not in env_table()";
  return env_table().front();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

struct Bad {
  const char* name;
  const char* value;
  const char* allowed;  // a part of what the error must say is allowed
};

// What users set and kolo took silently or with a warning only, and a few more.
const Bad kBad[] = {
    {"KOLO_ALGO", "fastest", "auto, ring, direct, tree, halving_doubling, hierarchical, one_shot or two_shot"},
    {"KOLO_ALGO", "Ring", "auto, ring"},  // lowercase names match exactly
    {"KOLO_TRANSPORTS", "shm,ib", "a comma-separated list of shm, tcp, ucx ('ib' is not one of them)"},
    {"KOLO_TRANSPORTS", "shm,", "a comma-separated list of shm, tcp, ucx"},
    {"KOLO_BACKEND", "mpi", "kolo or nccl"},
    {"KOLO_TIMEOUT", "abc", "a number of seconds > 0"},
    {"KOLO_TIMEOUT", "0", "a number of seconds > 0"},
    {"KOLO_TIMEOUT", "nan", "a number of seconds > 0"},
    {"KOLO_DEVICE", "gpu", "auto, cuda, emulated or none"},
    {"KOLO_DEBUG", "VERBOSE", "NONE, WARN, INFO or TRACE (any case)"},
    {"KOLO_DEBUG_SUBSYS", "FOO", "INIT, BOOTSTRAP, TRANSPORT, PLAN, EXEC, ENGINE, TOPO (any case) ('FOO' is not"},
    {"KOLO_DEBUG_SUBSYS", "INIT,FOO", "('FOO' is not one of them)"},
    {"KOLO_SHM_CHUNK_BYTES", "100", "an integer in [4096, 1073741824]"},
    {"KOLO_SHM_CHUNK_BYTES", "64k", "an integer in [4096, 1073741824]"},
    {"KOLO_CHUNK_BYTES", "512", "an integer >= 1024"},
    {"KOLO_SHM_STREAM_BYTES", "-1", "an integer >= 0"},
    {"KOLO_SHM_SINGLE_COPY", "yes", "0 or 1"},
    {"KOLO_INSECURE", "true", "0 or 1"},
    {"KOLO_DEVICE_IPC", "2", "0 or 1"},
    {"KOLO_CYCLE_TIME", "-1", "a number in [0, 1000000000]"},
    {"KOLO_FUSION_THRESHOLD", "1e300", "a number in [0, 9007199254740992]"},
    {"KOLO_RANK", "-1", "an integer in [0, 16777215]"},
    {"KOLO_SIZE", "0", "an integer in [1, 16777216]"},
    {"KOLO_DEVICE_BARRIER", "spin", "auto, kernel or host"},
    {"KOLO_LAUNCHER", "mpirun", "kolorun"},
};

TEST(EnvTable, BadValuesAreErrorsNamingVariableValueAndAllowed) {
  for (const Bad& bad : kBad) {
    ScopedVar set(bad.name, bad.value);
    const Status s = env_check_all();
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad.name << "=" << bad.value;
    const std::string named = str_cat(bad.name, "='", bad.value, "' is not ");
    EXPECT_TRUE(contains(s.message(), named)) << s.message();
    EXPECT_TRUE(contains(s.message(), bad.allowed)) << s.message();
    EXPECT_TRUE(contains(s.message(), "kolorun --help-env")) << s.message();
  }
}

TEST(EnvTable, EveryBadValueIsInTheOneError) {
  ScopedVar timeout("KOLO_TIMEOUT", "abc");
  ScopedVar debug("KOLO_DEBUG", "VERBOSE");
  const Status s = env_check_all();
  EXPECT_TRUE(contains(s.message(), "KOLO_TIMEOUT='abc'")) << s.message();
  EXPECT_TRUE(contains(s.message(), "KOLO_DEBUG='VERBOSE'")) << s.message();
}

TEST(EnvTable, GoodValuesPass) {
  const std::pair<const char*, const char*> good[] = {
      {"KOLO_DEBUG", "info"},           {"KOLO_DEBUG", "INFO"},
      {"KOLO_DEBUG", "Trace"},          {"KOLO_DEBUG", "none"},
      {"KOLO_DEBUG_SUBSYS", "init,Plan"}, {"KOLO_DEBUG_SUBSYS", "TOPO"},
      {"KOLO_TIMEOUT", "0.5"},          {"KOLO_TIMEOUT", "inf"},
      {"KOLO_TIMEOUT", ""},             // empty counts as unset
      {"KOLO_TRANSPORTS", "tcp,shm"},   {"KOLO_TRANSPORTS", "shm,shm"},
      {"KOLO_ALGO", "auto"},            {"KOLO_ALGO", "two_shot"},
      {"KOLO_DEVICE", "emulated"},      {"KOLO_BACKEND", "nccl"},
      {"KOLO_SHM_CHUNK_BYTES", "4096"}, {"KOLO_SHM_CHUNK_BYTES", "1073741824"},
      {"KOLO_FUSION_THRESHOLD", "1e6"}, {"KOLO_SHM_SINGLE_COPY", "0"},
      {"KOLO_RANK", "3"},               {"KOLO_SECRET", "anything"},
      {"KOLO_LIBRARY", "/opt/kolo/lib/libkolo.so"},
  };
  for (const auto& [name, value] : good) {
    ScopedVar set(name, value);
    const Status s = env_check_all();
    EXPECT_TRUE(s.ok()) << name << "=" << value << ": " << s.message();
  }
}

TEST(EnvTable, DefaultsAreAllowedValues) {
  for (const EnvVar& var : env_table()) {
    EXPECT_TRUE(env_check(var, var.default_value).ok()) << var.name << " default '" << var.default_value << "'";
    EXPECT_NE(std::string(var.help), "") << var.name;
  }
}

TEST(EnvTable, LogNamesInAnyCaseComeBackInTheTablesSpelling) {
  {
    ScopedVar set("KOLO_DEBUG", "info");
    EXPECT_EQ(env_string("KOLO_DEBUG"), "INFO");
  }
  {
    ScopedVar set("KOLO_DEBUG", "");
    EXPECT_EQ(env_string("KOLO_DEBUG"), "WARN");  // empty: the default
  }
  ScopedVar set("KOLO_DEBUG_SUBSYS", "init,Plan");
  EXPECT_EQ(env_list("KOLO_DEBUG_SUBSYS"), (std::vector<std::string>{"INIT", "PLAN"}));
}

TEST(EnvTable, NumbersAreReadWithinTheTablesRange) {
  {
    ScopedVar set("KOLO_SHM_CHUNK_BYTES", "100");
    EXPECT_FALSE(env_int("KOLO_SHM_CHUNK_BYTES").ok());
  }
  {
    ScopedVar set("KOLO_SHM_CHUNK_BYTES", "8192");
    ASSERT_TRUE(env_int("KOLO_SHM_CHUNK_BYTES").ok());
    EXPECT_EQ(env_int("KOLO_SHM_CHUNK_BYTES").value(), 8192);
  }
  ScopedVar unset("KOLO_SHM_CHUNK_BYTES", nullptr);
  EXPECT_EQ(env_int("KOLO_SHM_CHUNK_BYTES").value(), 1048576);
}

TEST(EnvTable, UnknownVariablesGetTheClosestName) {
  ScopedVar typo("KOLO_TIMEOUTT", "5");
  ScopedVar foo("KOLO_FOO", "1");
  ScopedVar test_harness("KOLO_TEST_HOSTS", "2");  // read by tests/multiproc's workers: not a typo
  const std::vector<std::string> lines = env_unknown_variables();
  std::string all;
  for (const std::string& line : lines) all += line + "\n";
  EXPECT_TRUE(contains(all, "KOLO_TIMEOUTT is set but is not a kolo variable (did you mean KOLO_TIMEOUT?")) << all;
  EXPECT_TRUE(contains(all, "KOLO_FOO is set but is not a kolo variable (did you mean KOLO_")) << all;
  EXPECT_FALSE(contains(all, "KOLO_TEST_HOSTS")) << all;
  EXPECT_TRUE(env_check_all().ok()) << "an unknown name is a warning, not an error";
}

// Runs `body` in a fresh process (gtest's threadsafe death test re-executes this binary),
// its stderr in a file that `body` gets to read; `body` reports by its exit code.
template <class Body>
void in_child(Body body) {
  const std::string style = GTEST_FLAG_GET(death_test_style);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        for (const char* v : {"KOLO_RANK", "KOLO_SIZE", "KOLO_ADDR", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}) {
          unsetenv(v);
        }
        std::FILE* log = std::tmpfile();
        ::dup2(fileno(log), 2);
        auto logged = [log] {
          std::fflush(stderr);
          std::string text;
          std::rewind(log);
          for (int c; (c = std::fgetc(log)) != EOF;) text += static_cast<char>(c);
          return text;
        };
        std::exit(body(logged));
      },
      testing::ExitedWithCode(0), "");
  GTEST_FLAG_SET(death_test_style, style);
}

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(EnvTable, UnknownVariableIsWarnedAboutOncePerProcess) {
  in_child([](auto logged) {
    setenv("KOLO_TIMEOUTT", "5", 1);
    if (!env_check_all().ok() || !env_check_all().ok()) return 1;
    const std::string text = logged();
    return count(text, "KOLO_TIMEOUTT is set") == 1 && contains(text, "did you mean KOLO_TIMEOUT?") ? 0 : 2;
  });
}

// The report that came twice per rank as a warning is now the error of every way a
// communicator is made, and nothing else says it.
TEST(EnvTable, TimeoutAbcIsAnErrorAtInit) {
  in_child([](auto logged) {
    setenv("KOLO_TIMEOUT", "abc", 1);
    const std::string expected = "KOLO_TIMEOUT='abc' is not a number of seconds > 0";
    kolo_comm_t comm = nullptr;
    if (kolo_init(&comm) != KOLO_ERR_INVALID_ARGUMENT) return 1;
    if (!contains(kolo_last_error(), "kolo_init: " + expected)) return 2;
    kolo_unique_id id;
    if (kolo_get_unique_id(&id) != KOLO_SUCCESS) return 3;
    if (kolo_comm_init_rank(&comm, 1, &id, 0) != KOLO_ERR_INVALID_ARGUMENT) return 4;
    if (!contains(kolo_last_error(), expected)) return 5;
    Result<runtime::RuntimeSettings> settings = runtime::RuntimeSettings::from_environment();
    if (settings.ok() || !contains(settings.status().message(), expected)) return 6;
    if (env_timeout_seconds() != 300) return 7;  // what a wait outside a communicator gets
    const std::string text = logged();
    if (contains(text, "KOLO_TIMEOUT")) {
      std::fprintf(stdout, "also logged: %s\n", text.c_str());
      return 8;
    }
    return 0;
  });
}

TEST(EnvTable, AlgorithmNamesAreThePlanners) {
  const EnvVar& algo = var_named("KOLO_ALGO");
  for (int a = 1; a < kAlgorithmCount; ++a) {
    const std::string name = algorithm_name(static_cast<Algorithm>(a));
    EXPECT_TRUE(env_check(algo, name).ok()) << name << " is missing from KOLO_ALGO's names";
  }
  for (const char* name : {"auto", "ring", "direct", "tree", "halving_doubling", "hierarchical", "one_shot", "two_shot"}) {
    EXPECT_TRUE(parse_algorithm_name(name).ok()) << name << " is in the table but not the planner's";
  }
}

TEST(EnvTable, TransportNamesAreTheTransportTables) {
  const EnvVar& transports = var_named("KOLO_TRANSPORTS");
  for (const TransportRow& row : transport_table()) {
    EXPECT_TRUE(env_check(transports, row.name).ok()) << row.name << " is missing from KOLO_TRANSPORTS's names";
  }
}

TEST(EnvTable, HelpListsEveryVariableWithItsValues) {
  const std::string text = env_help(), markdown = env_help_markdown();
  for (const EnvVar& var : env_table()) {
    EXPECT_TRUE(contains(text, str_cat(var.name, " (default: "))) << var.name;
    EXPECT_TRUE(contains(markdown, str_cat("| `", var.name, "` | "))) << var.name;
  }
  EXPECT_TRUE(contains(text, "values: NONE, WARN, INFO or TRACE (any case)")) << text;
  EXPECT_TRUE(contains(markdown, "| `KOLO_LIBRARY` |")) << "the Python package's variable";
}

}  // namespace
}  // namespace kolo
