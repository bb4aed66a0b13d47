// One rank of the plan agreement check (plan_agreement_test.sh, issue 50): kolo-plan must
// print the Plans a communicator runs. Under KOLO_TOPO_FILE (a fixture) and KOLO_TEST_HOSTS
// (emulated hosts), for every KOLO_* planner setting below, this rank makes a communicator
// with the setting (a split of the world, which reads the settings again and sets up its
// own transports) and plans a matrix of calls twice: with the communicator's PlanContext,
// and with kolo-plan's model of the same job (tools/kolo_plan/model_communicator.h) fed
// the same settings, fixture and transports. The figures the machine measures at start-up
// (the one-host model scaled to its copy rate, its cores) are the communicator's in both:
// they are not settings, and kolo-plan states its own. Every difference is printed.
// Exit status: 0 = every Plan equal, 1 = some differ, 2 = set-up failed.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "api/api_support.h"
#include "engine/communicator.h"
#include "engine/planner/plan.h"
#include "kolo/kolo.h"
#include "support/device/device.h"
#include "support/env.h"
#include "tools/kolo_plan/model_communicator.h"
#include "topology/discover.h"
#include "transport/transport.h"

namespace {

using namespace kolo;

int env_or(const char* name, int fallback) {
  const char* value = std::getenv(name);  // env-table: exempt (the launcher's and the test's own)
  return value != nullptr && *value != '\0' ? std::atoi(value) : fallback;
}

// The planner settings, one at a time (KOLO_BACKEND=nccl needs NCCL and a GPU to make a
// communicator at all; KOLO_TRANSPORTS is the transports' choice at start-up, which a
// split keeps: the script runs it as a job of its own).
const std::vector<std::vector<std::pair<const char*, const char*>>> kSettings = {
    {},
    {{"KOLO_ALGO", "ring"}},
    {{"KOLO_ALGO", "two_shot"}},
    {{"KOLO_ALGO", "hierarchical"}},
    {{"KOLO_ALGO", "tree"}},
    {{"KOLO_CHUNK_BYTES", "65536"}},
    {{"KOLO_LAZY_CONNECT", "0"}},
    {{"KOLO_DEVICE_IPC", "0"}},
    {{"KOLO_DEVICE_FLAGGED", "0"}},
    {{"KOLO_DEVICE_AUTO_REGISTER", "0"}},
    {{"KOLO_DEVICE_BARRIER", "host"}},
    {{"KOLO_SHM_STREAM_BYTES", "1048576"}},
    {{"KOLO_SHM_CHUNK_BYTES", "65536"}},
};

std::vector<CollSpec> matrix(int size, int rank) {
  std::vector<CollSpec> specs;
  const CollKind kinds[] = {CollKind::kAllreduce, CollKind::kReduce, CollKind::kBroadcast, CollKind::kAllgather,
                            CollKind::kAllgatherv, CollKind::kReduceScatter, CollKind::kAlltoall, CollKind::kBarrier};
  for (CollKind kind : kinds) {
    for (size_t bytes : {size_t{8}, size_t{4} << 10, size_t{1} << 20, size_t{64} << 20}) {
      for (bool device : {false, true}) {
        for (int variant = 0; variant < 3; ++variant) {  // plain, compressed (fp16), registered
          if (variant == 1 && kind != CollKind::kAllreduce) continue;
          if (variant == 2 && !device) continue;
          CollSpec s;
          s.kind = kind;
          s.dtype = DType::kFloat32;
          size_t count = std::max<size_t>(1, bytes / 4);
          if (kind == CollKind::kAllgather || kind == CollKind::kReduceScatter || kind == CollKind::kAlltoall) {
            count = std::max<size_t>(1, count / size);
          }
          s.count = kind == CollKind::kBarrier ? 0 : count;
          if (kind == CollKind::kBarrier) s.dtype = DType::kUint8;
          if (kind == CollKind::kAllgatherv) {
            for (int r = 0; r < size; ++r) s.counts.push_back(count / size + r), s.displs.push_back(0);
            for (int r = 1; r < size; ++r) s.displs[r] = s.displs[r - 1] + s.counts[r - 1];
            s.count = s.counts[rank];
          }
          s.device = device;
          if (variant == 1) s.wire = DType::kFloat16;
          s.registered = variant == 2;
          specs.push_back(s);
        }
      }
    }
  }
  return specs;
}

}  // namespace

int main() {
  const int rank = env_or("KOLO_RANK", 0), size = env_or("KOLO_SIZE", 1), hosts = env_or("KOLO_TEST_HOSTS", 1);
  if (hosts > 1) setenv("KOLO_HOSTID", ("emulated-host-" + std::to_string(rank * hosts / size)).c_str(), 1);
  const std::string fixture = env_string("KOLO_TOPO_FILE");
  Result<HostTopology> host = load_topology_file(fixture);
  kolo_comm_t world = nullptr;
  if (!host.ok() || kolo_init(&world) != KOLO_SUCCESS) {
    std::fprintf(stderr, "rank %d: set-up failed: %s\n", rank, host.ok() ? kolo_last_error() : host.status().message().c_str());
    return 2;
  }
  int differences = 0, compared = 0;
  for (const auto& settings : kSettings) {
    std::string label = settings.empty() ? "defaults" : "";
    for (const auto& [name, value] : settings) setenv(name, value, 1), label += str_cat(name, "=", value, " ");
    kolo_comm_t comm = nullptr;
    if (kolo_comm_split(world, 0, rank, &comm) != KOLO_SUCCESS) {
      std::fprintf(stderr, "rank %d: %s: the communicator failed: %s\n", rank, label.c_str(), kolo_last_error());
      return 2;
    }
    const PlanContext& real = comm->impl->plan_context();
    Result<CommSettings> read = read_comm_settings();
    Result<std::vector<std::string>> transports = parse_transports(env_string("KOLO_TRANSPORTS"));
    if (!read.ok() || !transports.ok()) return 2;
    ModelRequest request;
    request.host = host.value();
    request.hosts = hosts;
    request.per_host = size / hosts;
    request.device = device::runtime().kind.maps_peers;
    request.transports = transports.value();
    request.local_params = real.local_params;
    request.cores = real.agreed_cores;
    request.after_device_setup = false;  // this communicator has made no device call yet
    auto model = model_communicator(read.value(), request);
    if (!model.ok()) {
      std::fprintf(stderr, "rank %d: %s: %s\n", rank, label.c_str(), model.status().message().c_str());
      return 2;
    }
    PlanContext modelled = model.value()->ctx;
    modelled.rank = rank;
    for (const CollSpec& spec : matrix(size, rank)) {
      const std::string a = plan_label(plan(spec, real)), b = plan_label(plan(spec, modelled));
      ++compared;
      if (a == b) continue;
      if (++differences <= 20) {
        std::fprintf(stderr, "rank %d, %s: %s%s of %zu B: the communicator plans \"%s\", kolo-plan \"%s\"\n", rank,
                     label.c_str(), spec.device ? "device " : "", coll_name(spec.kind), spec.bytes(), a.c_str(), b.c_str());
      }
    }
    kolo_comm_destroy(comm);
    for (const auto& setting : settings) unsetenv(setting.first);
  }
  kolo_comm_destroy(world);
  if (rank == 0) {
    std::printf("plan agreement: %s on %d host(s) x %d ranks: %d plans compared over %zu settings, %d differ\n",
                fixture.c_str(), hosts, size / hosts, compared, kSettings.size(), differences);
  }
  return differences == 0 ? 0 : 1;
}
