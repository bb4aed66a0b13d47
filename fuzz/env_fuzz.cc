// libFuzzer target: kolo's environment variables (support/env.h), which users and
// launchers set and kolo reads with checks. The input is lines; each line's first byte
// picks a variable from the list below and the rest is its value (up to its first NUL,
// as the environment holds it). Then every parser kolo runs on them at start-up reads them:
//   env_check_all (the table's check of every set KOLO_* value);
//   env_int / env_double / env_timeout_seconds on every numeric KOLO_* variable;
//   RuntimeSettings::from_environment (KOLO_CYCLE_TIME, KOLO_FUSION_THRESHOLD, ...);
//   parse_algorithm_name (KOLO_ALGO), parse_transports (KOLO_TRANSPORTS), each
//   transport's check_env (KOLO_SHM_CHUNK_BYTES, KOLO_SHM_SINGLE_COPY);
//   world_from_environment (KOLO_RANK/KOLO_SIZE/KOLO_ADDR, the Open MPI and Slurm
//   variables with the Slurm node list) and job_secret (KOLO_SECRET, hex);
//   parse_host_port (KOLO_ADDR).
// Every variable is unset again after the input.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/runtime/runtime.h"
#include "engine/schedules/algorithms.h"
#include "engine/world.h"
#include "fuzz/fuzz_check.h"
#include "support/clock.h"
#include "support/env.h"
#include "transport/socket.h"
#include "transport/transport.h"

namespace {

using namespace kolo;

constexpr const char* kVariables[] = {
    "KOLO_TIMEOUT",          "KOLO_ALGO",           "KOLO_TRANSPORTS",       "KOLO_SHM_SINGLE_COPY",
    "KOLO_SHM_CHUNK_BYTES",  "KOLO_SHM_STREAM_BYTES", "KOLO_CHUNK_BYTES",    "KOLO_FUSION_THRESHOLD",
    "KOLO_CYCLE_TIME",       "KOLO_CACHE_CAPACITY", "KOLO_STALL_CHECK_TIME", "KOLO_STALL_SHUTDOWN_TIME",
    "KOLO_AUTOTUNE",         "KOLO_RANK",           "KOLO_SIZE",             "KOLO_ADDR",
    "KOLO_SECRET",           "KOLO_INSECURE",       "KOLO_LAUNCHER",         "KOLO_BACKEND",
    "OMPI_COMM_WORLD_RANK",  "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID",         "SLURM_NTASKS",
    "SLURM_JOB_NODELIST",    "SLURM_JOB_ID",        "SLURM_STEP_ID",         "SLURM_STEP_NODELIST",
    "PMI_RANK",              "PMI_SIZE",
};
constexpr size_t kCount = sizeof(kVariables) / sizeof(kVariables[0]);
// The ones kolo reads as numbers (in env_table).
constexpr const char* kNumeric[] = {
    "KOLO_TIMEOUT",        "KOLO_SHM_CHUNK_BYTES", "KOLO_SHM_STREAM_BYTES", "KOLO_CHUNK_BYTES",
    "KOLO_FUSION_THRESHOLD", "KOLO_CYCLE_TIME",    "KOLO_CACHE_CAPACITY",   "KOLO_STALL_CHECK_TIME",
    "KOLO_STALL_SHUTDOWN_TIME", "KOLO_RANK",       "KOLO_SIZE",
};

void read_everything() {
  (void)env_check_all();  // the table's check of every value, as at a communicator's init
  for (const char* name : kNumeric) {
    (void)env_int(name);
    (void)env_double(name);
  }
  double timeout = env_timeout_seconds();
  KOLO_FUZZ_CHECK(timeout > 0);
  Deadline deadline(timeout);  // what every wait does with it
  (void)deadline.remaining_ms();
  Result<runtime::RuntimeSettings> settings = runtime::RuntimeSettings::from_environment();
  if (settings.ok()) {  // what the runtime does with them: durations, deadlines
    using namespace std::chrono;
    (void)duration_cast<steady_clock::duration>(duration<double, std::milli>(settings.value().cycle_ms));
    (void)Deadline(settings.value().stall.check_seconds).remaining_ms();
    (void)Deadline(settings.value().stall.shutdown_seconds).remaining_ms();
  }
  Result<Algorithm> algorithm = parse_algorithm_name(env_string("KOLO_ALGO"));
  if (algorithm.ok() && algorithm.value() != Algorithm::kAuto) {
    KOLO_FUZZ_CHECK(env_string("KOLO_ALGO") == algorithm_name(algorithm.value()));
  }
  Result<std::vector<std::string>> transports = parse_transports(env_string("KOLO_TRANSPORTS"));
  if (transports.ok()) KOLO_FUZZ_CHECK(!transports.value().empty());
  for (const TransportRow& row : transport_table()) (void)row.check_env();
  Result<WorldInfo> world = world_from_environment();
  if (world.ok()) {
    KOLO_FUZZ_CHECK(world.value().size < 1 || (world.value().rank >= 0 && world.value().rank < world.value().size));
    (void)job_secret(world.value().size);
    if (!world.value().store_addr.empty()) (void)parse_host_port(world.value().store_addr);
  }
  Result<std::string> secret = job_secret(2);
  if (secret.ok() && !secret.value().empty()) KOLO_FUZZ_CHECK(secret.value().size() >= 16);
  (void)parse_host_port(env_string("KOLO_ADDR"));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ::setenv("KOLO_DEBUG", "NONE", 1);  // the warnings about bad values would flood the run
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // "NAME=value" per variable, handed to putenv: glibc's setenv never frees the strings it
  // makes, so millions of inputs would grow the process to the fuzzer's memory limit.
  static std::string entries[kCount];
  bool set[kCount] = {};
  std::string_view input(reinterpret_cast<const char*>(data), size);
  while (!input.empty()) {
    size_t end = input.find('\n');
    std::string_view line = input.substr(0, end);
    input.remove_prefix(end == std::string_view::npos ? input.size() : end + 1);
    if (line.empty()) continue;
    const size_t i = static_cast<uint8_t>(line[0]) % kCount;
    if (set[i]) ::unsetenv(kVariables[i]);  // environ points into entries[i], about to change
    entries[i] = std::string(kVariables[i]) + "=" + std::string(line.substr(1)).c_str();
    ::putenv(entries[i].data());
    set[i] = true;
  }
  read_everything();
  for (size_t i = 0; i < kCount; ++i) {
    if (set[i]) ::unsetenv(kVariables[i]);
  }
  return 0;
}
