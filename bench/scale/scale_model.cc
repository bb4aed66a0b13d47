// kolo-scale-model: the start-up model (engine/planner/startup_model.h) against measured
// figures, and projected to clusters.
//
//   kolo-scale-model                          projection: 8 ranks per host, 1k to 100k ranks
//   kolo-scale-model --validate FILE [--hosts H] [--cores C]
//                                             FILE: startup.sh's JSON lines; measured vs model
//   kolo-scale-model --measure-store [--clients K]
//                                             this machine's store: the server's time per
//                                             authenticated connection and per request
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/planner/startup_model.h"
#include "support/status.h"
#include "transport/bootstrap/store.h"

namespace {

using kolo::StartupEstimate;

void print_estimate_header() {
  std::printf("| ranks | hosts | ranks' CPU s | store s | host store s | tree s | links s | total s | bound |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
}

void print_estimate(int hosts, int per_host, const StartupEstimate& e) {
  std::printf("| %d | %d | %.3f | %.3f | %.4f | %.4f | %.4f | %.2f | %s |\n", hosts * per_host, hosts, e.launch_s,
              e.store_s, e.host_store_s, e.tree_s, e.links_s, e.total_s, e.bound.c_str());
}

int project() {
  const kolo::StartupParams p = kolo::cluster_startup_params();
  std::printf("# projection: 8 ranks per host on 8 cores, %.0f Gbit/s links, %.0f us between hosts\n",
              p.net_gbs * 8, p.net_latency_s * 1e6);
  print_estimate_header();
  for (int n : {1024, 4096, 10240, 32768, 102400}) print_estimate(n / 8, 8, kolo::estimate_startup(n / 8, 8, 8, p));
  return 0;
}

int validate(const std::string& file, int hosts, int cores) {
  std::ifstream in(file);
  if (!in) {
    std::fprintf(stderr, "kolo-scale-model: cannot read %s\n", file.c_str());
    return 2;
  }
  std::map<int, std::vector<double>> measured;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '{') continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("ranks")) continue;
    measured[j["ranks"].get<int>()].push_back(j["launch_to_first_s"].get<double>());
  }
  const kolo::StartupParams p = kolo::fitted_startup_params();
  std::printf("| ranks | hosts | measured s (median) | model s | model / measured | bound |\n|---|---|---|---|---|---|\n");
  for (auto& [n, runs] : measured) {
    std::sort(runs.begin(), runs.end());
    const double m = runs[runs.size() / 2];
    const int h = std::max(1, hosts);
    const StartupEstimate e = kolo::estimate_startup(h, (n + h - 1) / h, cores, p);
    std::printf("| %d | %d | %.2f | %.2f | %.2f | %s |\n", n, h, m, e.total_s, e.total_s / m, e.bound.c_str());
  }
  return 0;
}

// K clients at once, each connecting and making R requests: the server's thread is the
// queue, so wall time / operations is its cost per operation.
int measure_store(int clients) {
  const std::string secret(32, 's');
  auto server = kolo::StoreServer::start("127.0.0.1", 0, secret);
  if (!server.ok()) {
    std::fprintf(stderr, "kolo-scale-model: %s\n", server.status().to_string().c_str());
    return 1;
  }
  const kolo::HostPort at{"127.0.0.1", server.value()->port()};
  auto timed = [&](int requests) {
    std::atomic<int> failures{0};
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&, c] {
        auto client = kolo::StoreClient::connect(at, secret, kolo::Deadline(30));
        if (!client.ok()) {
          failures++;
          return;
        }
        for (int r = 0; r < requests; ++r) {
          if (!client.value()->set(kolo::str_cat("k/", c, "/", r), "v", kolo::Deadline(30)).ok()) failures++;
        }
      });
    }
    for (auto& t : threads) t.join();
    if (failures > 0) std::fprintf(stderr, "kolo-scale-model: %d store operations failed\n", failures.load());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const int requests = 50;
  const double connect_only = timed(0);
  const double with_requests = timed(requests);
  const double per_connection = connect_only / clients;
  const double per_request = (with_requests - connect_only) / (static_cast<double>(clients) * requests);
  std::printf("{\"clients\": %d, \"store_connection_us\": %.1f, \"store_request_us\": %.2f}\n", clients,
              per_connection * 1e6, per_request * 1e6);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string validate_file;
  int hosts = 1, cores = static_cast<int>(std::thread::hardware_concurrency()), clients = 64;
  bool store = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kolo-scale-model: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--validate") validate_file = value();
    else if (arg == "--hosts") hosts = std::atoi(value().c_str());
    else if (arg == "--cores") cores = std::atoi(value().c_str());
    else if (arg == "--clients") clients = std::atoi(value().c_str());
    else if (arg == "--measure-store") store = true;
    else {
      std::fprintf(stderr, "usage: kolo-scale-model [--validate FILE [--hosts H] [--cores C]] [--measure-store [--clients K]]\n");
      return 2;
    }
  }
  if (hosts < 1 || cores < 1 || clients < 1) {
    std::fprintf(stderr, "kolo-scale-model: --hosts, --cores and --clients take positive numbers\n");
    return 2;
  }
  if (store) return measure_store(clients);
  if (!validate_file.empty()) return validate(validate_file, hosts, cores);
  return project();
}
