// kolo-plan: what the planner would do on a machine. For a topology (this host, a file,
// a fixture or KOLO_TOPO_FILE) repeated over --hosts hosts, prints per size the chosen
// algorithm and every algorithm's predicted time and bus bandwidth; --dump prints one
// rank's schedule as text or JSON; --png plots predicted busbw against size.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "engine/connect.h"
#include "engine/executors/local/fast_box.h"
#include "engine/local/local_program.h"
#include "engine/planner/device_ipc_model.h"
#include "engine/planner/plan.h"
#include "engine/planner/local_model.h"
#include "engine/planner/selector.h"
#include "engine/planner/simulate.h"
#include "png_plot.h"
#include "tools/kolo_plan/model_communicator.h"
#include "transport/transport.h"
#include "support/env.h"
#include "support/host_rates.h"
#include "kernels/flagged_body.h"
#include "topology/discover.h"

namespace {

using namespace kolo;

const char* kUsage =
    "usage: kolo-plan [--file PATH | --fixture NAME] [--hosts N] [--ranks-per-host N] [--memory host|device]\n"
    "                 [--coll NAME] [--min-bytes N] [--max-bytes N] [--chunk BYTES] [--png PATH]\n"
    "                 [--dump ALGO --bytes N [--rank R] [--json]]\n"
    "  --file PATH        kolo JSON or NCCL XML topology of one host (KOLO_TOPO_FILE does the same;\n"
    "                     default: discover this host)\n"
    "  --fixture NAME     a file from topology/fixtures (dgx_h100, dgx_a100, pcie_8gpu, r750xa, cpu_vm)\n"
    "  --hosts N          hosts of that topology (default 1)\n"
    "  --ranks-per-host N ranks per host (default: its GPUs with device memory, else 2)\n"
    "  --memory host|device  buffers in host or GPU memory (default: device when the host has GPUs)\n"
    "  --coll NAME        allreduce (default), reduce_scatter, allgather, broadcast, reduce, alltoall\n"
    "  --min-bytes/--max-bytes N  sizes, doubling (default 1024 .. 1073741824)\n"
    "  --chunk BYTES      pipeline chunk (default KOLO_CHUNK_BYTES)\n"
    "  --png PATH         plot predicted busbw against size, one line per algorithm\n"
    "  --dump ALGO        print rank R's program with ALGO forced at --bytes, as plan() would run it:\n"
    "                     a schedule, or on one host the one-host executor's recorded pipeline\n"
    "                     (text; --json for JSON)\n";

constexpr uint32_t kLocalSlots = 4;  // the shm domain's slots per rank (transport/shm)

struct Options {
  std::string file, fixture, coll = "allreduce", png, dump, memory;
  int hosts = 1, per_host = 0, rank = 0;
  size_t min_bytes = 1024, max_bytes = size_t{1} << 30, bytes = 1 << 20, chunk = 0;
  bool json = false;
};

Result<CollKind> parse_coll(const std::string& name) {
  for (CollKind k : {CollKind::kAllreduce, CollKind::kReduceScatter, CollKind::kAllgather, CollKind::kBroadcast,
                     CollKind::kReduce, CollKind::kAlltoall}) {
    if (name == coll_name(k)) return k;
  }
  return error(Code::kInvalidArgument, "unknown collective '", name, "'");
}

// Bus bandwidth factor (nccl-tests doc/PERFORMANCE.md).
double bus_factor(CollKind kind, int p) {
  switch (kind) {
    case CollKind::kAllreduce: return 2.0 * (p - 1) / p;
    case CollKind::kAllgather: case CollKind::kReduceScatter: case CollKind::kAlltoall: return (p - 1.0) / p;
    default: return 1.0;
  }
}

std::string size_label(size_t bytes) {
  const char* units[] = {"B", "K", "M", "G", "T"};
  int u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, v == static_cast<int>(v) ? "%.0f%s" : "%.1f%s", v, units[u]);
  return buf;
}

// The spec of a collective moving `bytes` (per rank for allgather/reduce_scatter/alltoall
// as nccl-tests counts: the size is the whole buffer).
CollSpec spec_for(CollKind kind, size_t bytes, int p) {
  CollSpec spec;
  spec.kind = kind;
  size_t elems = std::max<size_t>(1, bytes / 4);
  if (kind == CollKind::kAllgather || kind == CollKind::kReduceScatter || kind == CollKind::kAlltoall) {
    elems = std::max<size_t>(1, elems / p);
  }
  spec.count = elems;
  return spec;
}

size_t parse_size(const char* text) {
  char* end = nullptr;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text || v == 0) {
    std::cerr << "kolo-plan: '" << text << "' is not a positive number\n";
    std::exit(2);
  }
  return static_cast<size_t>(v);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::cerr << "kolo-plan: " << arg << " needs a value\n" << kUsage;
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--file") o.file = value();
    else if (arg == "--fixture") o.fixture = value();
    else if (arg == "--hosts") o.hosts = static_cast<int>(parse_size(value()));
    else if (arg == "--ranks-per-host") o.per_host = static_cast<int>(parse_size(value()));
    else if (arg == "--memory") o.memory = value();
    else if (arg == "--coll") o.coll = value();
    else if (arg == "--min-bytes") o.min_bytes = parse_size(value());
    else if (arg == "--max-bytes") o.max_bytes = parse_size(value());
    else if (arg == "--chunk") o.chunk = parse_size(value());
    else if (arg == "--png") o.png = value();
    else if (arg == "--dump") o.dump = value();
    else if (arg == "--bytes") o.bytes = parse_size(value());
    else if (arg == "--rank") o.rank = std::atoi(value());
    else if (arg == "--json") o.json = true;
    else if (arg == "-h" || arg == "--help") { std::cout << kUsage; std::exit(0); }
    else { std::cerr << "kolo-plan: unknown argument '" << arg << "'\n" << kUsage; std::exit(2); }
  }
  auto bad = [](const std::string& what) {
    std::cerr << "kolo-plan: " << what << "\n" << kUsage;
    std::exit(2);
  };
  if (o.hosts < 1 || o.hosts > 4096) bad("--hosts " + std::to_string(o.hosts) + ": give 1 to 4096 hosts");
  if (o.per_host < 0 || o.per_host > 1024) {
    bad("--ranks-per-host " + std::to_string(o.per_host) + ": give 0 to 1024 (0: one per GPU of the topology, else 2)");
  }
  if (o.min_bytes > o.max_bytes) bad("--min-bytes is above --max-bytes");
  if (o.memory != "" && o.memory != "host" && o.memory != "device") {
    bad("--memory '" + o.memory + "': give host or device (device: GPU buffers)");
  }
  return o;
}

// The fixtures: installed beside this program (<prefix>/share/kolo/fixtures), else in the
// source tree it was built from.
std::filesystem::path fixture_folder() {
  std::error_code ignored;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ignored);
  const std::filesystem::path installed = self.parent_path() / ".." / "share" / "kolo" / "fixtures";
  if (!self.empty() && std::filesystem::is_directory(installed, ignored)) return installed;
  return std::filesystem::path(KOLO_SOURCE_DIR) / "topology" / "fixtures";
}

Result<HostTopology> load(const Options& o) {
  std::string path = o.file;
  if (!o.fixture.empty()) {
    path = o.fixture;
    if (!std::filesystem::exists(path)) {
      std::string name = o.fixture.find('.') == std::string::npos ? o.fixture + ".json" : o.fixture;
      const std::filesystem::path folder = fixture_folder();
      path = (folder / name).string();
      if (!std::filesystem::exists(path)) {
        std::string names;
        std::error_code ignored;
        for (const auto& entry : std::filesystem::directory_iterator(folder, ignored)) {
          const std::string ext = entry.path().extension().string();
          if (ext == ".json" || ext == ".xml") names += " " + entry.path().stem().string();
        }
        return error(Code::kInvalidArgument, "--fixture '", o.fixture, "': no such file, and no fixture of that name in ",
                     folder.string(), "; the fixtures are:", names.empty() ? " (none found)" : names);
      }
    }
  }
  if (path.empty()) path = env_string("KOLO_TOPO_FILE");
  return path.empty() ? host_topology() : load_topology_file(path);
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  // The KOLO_* values a communicator would refuse, refused here too (the plan is theirs).
  if (Status env = env_check_all(); !env.ok()) {
    std::cerr << "kolo-plan: " << env.message() << "\n";
    return 2;
  }
  Result<HostTopology> host = load(o);
  if (!host.ok()) {
    std::cerr << "kolo-plan: " << host.status().message() << "\n";
    return 1;
  }
  Result<CollKind> kind = parse_coll(o.coll);
  if (!kind.ok()) {
    std::cerr << "kolo-plan: " << kind.status().message() << "\n" << kUsage;
    return 2;
  }
  const int gpus = static_cast<int>(host.value().of_kind(NodeKind::kGpu).size());
  const bool device = o.memory.empty() ? gpus > 0 : o.memory == "device";
  const int per_host = o.per_host > 0 ? o.per_host : (device && gpus > 0 ? gpus : 2);
  // The communicator a job here would make, planned as it plans (model_communicator.h):
  // the KOLO_* settings, the transports (ranks of one host share memory when shm comes
  // first), the executors' declarations and, for device memory, device_ipc as after its
  // set-up found every peer mapped.
  Result<CommSettings> settings = read_comm_settings();
  Result<std::vector<std::string>> transports = parse_transports(env_string("KOLO_TRANSPORTS"));
  if (!settings.ok() || !transports.ok()) {
    std::cerr << "kolo-plan: " << (settings.ok() ? transports.status() : settings.status()).message() << "\n";
    return 2;
  }
  if (o.chunk != 0) settings.value().chunk_bytes = o.chunk;
  ModelRequest request;
  request.host = host.value();
  request.hosts = o.hosts;
  request.per_host = per_host;
  request.device = device;
  request.transports = transports.value();
  auto modelled = model_communicator(settings.value(), request);
  if (!modelled.ok()) {
    std::cerr << "kolo-plan: " << modelled.status().message() << "\n";
    return 2;
  }
  const int p = per_host * o.hosts;
  // local_ctx: what plan() reads; ctx: the same without shared memory, whose schedules are
  // the other columns ("tcp": what runs with KOLO_TRANSPORTS=tcp).
  PlanContext local_ctx = modelled.value()->ctx;
  PlanContext ctx = local_ctx;
  ctx.shared_memory = false;
  ctx.device_memory = device;
  CostModel model(ctx);
  const bool local = modelled.value()->shared_memory && !device;
  const bool local_choice = kind.value() == CollKind::kAllreduce || kind.value() == CollKind::kReduce;
  const size_t slot_bytes = modelled.value()->slot_bytes;
  const HostRates& rates = host_rates();
  const int cores = local_ctx.agreed_cores;
  const PlannerParams& local_params = local_ctx.local_params != nullptr ? *local_ctx.local_params : planner_params();

  if (!o.dump.empty()) {
    Result<Algorithm> algo = parse_algorithm_name(o.dump);
    if (!algo.ok() || o.rank < 0 || o.rank >= p) {
      std::cerr << "kolo-plan: --dump needs an algorithm name and --rank in 0.." << p - 1 << "\n";
      return 2;
    }
    CollSpec spec = spec_for(kind.value(), o.bytes, p);
    spec.algorithm = algo.value();
    ctx.rank = o.rank;
    const Plan chosen = plan(spec, local_ctx);
    // The program that would run: a schedule, or the one-host executor's pipeline recorded.
    const Schedule s = chosen.executor == ExecutorKind::kLocal
                           ? record_local_programs(spec, p, chosen.algorithm, slot_bytes, kLocalSlots)[o.rank]
                           : schedule_of(chosen.algorithm, spec, ctx);
    if (!o.json) std::cout << "# " << plan_summary(spec, p, chosen) << "\n";
    if (chosen.protocol == Protocol::kFastBox && !o.json) {
      std::cout << "# fast boxes: each rank publishes its contribution in one box of its own and reads its peers' "
                   "(engine/executors/local/fast_box.h); the staging-slot program below runs for larger calls\n";
    }
    std::cout << (o.json ? schedule_to_json(s) : schedule_to_string(s));
    return 0;
  }

  std::printf("# kolo-plan: %s %s, %s\n", host.value().host.c_str(), coll_name(kind.value()), model.describe().c_str());
  std::printf("# time in us, busbw in GB/s; chunk %zu B\n", ctx.chunk_bytes);
  if (local) {
    std::printf("# one host: shared-memory path, slot %zu B; schedules only with KOLO_TRANSPORTS=tcp\n", slot_bytes);
    std::printf("# this host: memcpy of 4 MiB %.1f GB/s (the model was fitted at %.1f), last-level cache %.0f MiB\n",
                rates.copy_gbs, planner_params().shm_fitted_copy_gbs, rates.cache_bytes / (1 << 20));
  }
  std::vector<std::string> names;
  std::vector<double> xs;
  std::vector<std::string> ticks;
  std::vector<std::vector<double>> busbw;
  auto column = [&](const std::string& name) {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return i;
    names.push_back(name);
    busbw.emplace_back();
    return names.size() - 1;
  };
  for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 2) {
    CollSpec spec = spec_for(kind.value(), bytes, p);
    std::vector<Candidate> all = predict_all(spec, ctx, model);
    spec.device = device;  // as a communicator plans it: device_ipc, else staged through host memory
    Plan chosen = plan(spec, local_ctx);
    if (chosen.share_buffers) {  // plain cudaMalloc buffers, shared as a communicator shares them
      spec.registered = true;
      chosen = plan(spec, local_ctx);
    }
    const std::string what = str_cat(executor_name(chosen.executor), " ", algorithm_name(chosen.algorithm),
                                     chosen.protocol == Protocol::kSteps ? "" : str_cat("/", protocol_name(chosen.protocol)));
    if (local) {
      std::printf("%8s  chosen %-18s tcp %-16s", size_label(bytes).c_str(), what.c_str(),
                  algorithm_name(choose_algorithm(spec, ctx)));
    } else {
      std::printf("%8s  chosen %-18s", size_label(bytes).c_str(), what.c_str());
    }
    xs.push_back(static_cast<double>(bytes));
    int log2 = 0;
    while ((size_t{1} << log2) < bytes) ++log2;
    ticks.push_back(log2 % 3 == 0 ? size_label(bytes) : "");
    auto add = [&](const std::string& name, double us) {
      double bw = static_cast<double>(bytes) / (us * 1e3) * bus_factor(kind.value(), p);
      std::printf("  %s %.1f/%.2f", name.c_str(), us, bw);
      std::vector<double>& col = busbw[column(name)];
      col.resize(xs.size() - 1, -1);
      col.push_back(bw);
    };
    if (local && local_choice) {
      add("shm_one_shot", predict_local_us(kind.value(), LocalAlgorithm::kOneShot, bytes, p, slot_bytes, cores, local_params));
      add("shm_two_shot", predict_local_us(kind.value(), LocalAlgorithm::kTwoShot, bytes, p, slot_bytes, cores, local_params));
    } else if (local) {
      add("shm", predict_local_us(kind.value(), LocalAlgorithm::kOneShot, bytes, p, slot_bytes, cores, local_params));
    }
    if (chosen.executor == ExecutorKind::kLocal) {
      // The chosen one-host program, recorded from the executor's code and simulated: the
      // event simulation agrees with the closed-form shm_* formulas above.
      Result<double> us = simulate_us(record_local_programs(spec, p, chosen.algorithm, slot_bytes, kLocalSlots), model);
      if (us.ok()) add("shm_chosen_simulated", us.value());
    }
    if (local_ctx.device_ipc && kind.value() == CollKind::kAllreduce) {
      // device_ipc's forms (engine/planner/device_ipc_model.h), the slot ones with their
      // copy into the slot; the one-kernel form up to its box size.
      const DeviceIpcCost d = predict_device_ipc_allreduce(bytes, model);
      if (bytes <= kFlaggedMaxBytes) add("ipc_flagged", d.flagged_us);
      add("ipc_one_shot", d.one_shot_us + d.copy_in_us);
      add("ipc_two_shot", d.two_shot_us + d.copy_in_us);
      add("ipc_zero_copy", d.zero_copy_us);
    }
    for (const Candidate& c : all) add(algorithm_name(c.algorithm), c.us);
    std::printf("\n");
    if (bytes > o.max_bytes / 2) break;
  }
  if (!o.png.empty()) {
    plot::Chart chart;
    chart.title = str_cat("PREDICTED ", coll_name(kind.value()), " BUSBW - ", host.value().host, " X", o.hosts, " (", p,
                          " RANKS)");
    chart.x_label = "SIZE (BYTES)";
    chart.y_label = "BUSBW GB/S";
    chart.x = xs;
    chart.x_ticks = ticks;
    for (size_t i = 0; i < names.size(); ++i) {
      busbw[i].resize(xs.size(), -1);
      chart.series.push_back({names[i], busbw[i]});
    }
    std::string why;
    if (!plot::write_png(chart, o.png, &why)) {
      std::cerr << "kolo-plan: " << why << "\n";
      return 1;
    }
    std::fprintf(stderr, "kolo-plan: wrote %s\n", o.png.c_str());
  }
  return 0;
}
