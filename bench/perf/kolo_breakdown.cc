// kolo_breakdown: where a small host allreduce's time goes (issue 52). Under a launcher:
//   kolorun -np 2 kolo_breakdown [-b BYTES] [-n CALLS] [-w WARMUP]
// Rank 0 prints, in nanoseconds (median and p99 over the calls):
//   - the whole call, timed around kolo_allreduce with the CPU's timestamp counter;
//   - each phase between the probes of support/probe.h, where kolo was built with
//     -DKOLO_BREAKDOWN=ON (bench/perf/breakdown.sh builds such a kolo in a folder of its own);
//     the probes cost a few ns each, so the phases add up to a little more than a plain call;
//   - the floor: the same exchange with no kolo code, each process writing its payload and a
//     flag into one cache line of shared memory and spinning on the other's, the most any
//     software could get out of these two cores.
// Every figure is alternated in one run with the others, and the machine's CPU is printed.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "kolo/kolo.h"
#include "support/clock.h"
#include "support/probe.h"

namespace {

struct Options {
  size_t bytes = 8;
  int calls = 20000;
  int warmup = 2000;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

// Ticks per nanosecond: the timestamp counter against the steady clock over `ms`.
double ticks_per_ns(int ms) {
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t c0 = kolo::cpu_ticks();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(ms)) {
  }
  const uint64_t c1 = kolo::cpu_ticks();
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(c1 - c0) / ns;
}

// The floor: one 64-byte line per rank, [flag | payload], in shared memory that rank 0 makes
// and names to rank 1 through a broadcast.
struct alignas(128) FloorLine {
  std::atomic<uint64_t> flag;
  double payload[7];
};

std::vector<double> floor_exchange(kolo_comm_t comm, int rank, int calls, double tpn) {
  char name[64] = {0};
  if (rank == 0) std::snprintf(name, sizeof name, "/kolo-breakdown-%d", static_cast<int>(getpid()));
  if (kolo_broadcast(name, name, sizeof name, KOLO_UINT8, 0, comm, nullptr) != KOLO_SUCCESS) return {};
  // Made by rank 0 before rank 1 opens it, unlinked once both hold it; every rank learns
  // whether all could map it, so that no rank leaves the others waiting.
  int fd = rank == 0 ? shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600) : -1;
  if (fd >= 0 && ftruncate(fd, 4096) != 0) close(fd), fd = -1;
  kolo_barrier(comm);
  if (rank != 0) fd = shm_open(name, O_RDWR, 0600);
  void* map = fd >= 0 ? mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (fd >= 0) close(fd);
  int ok = map != MAP_FAILED, all_ok = 0;
  kolo_allreduce(&ok, &all_ok, 1, KOLO_INT32, KOLO_MIN, comm, nullptr);
  if (rank == 0) shm_unlink(name);
  if (!all_ok) {
    if (map != MAP_FAILED) munmap(map, 4096);
    return {};
  }
  FloorLine* lines = static_cast<FloorLine*>(map);
  FloorLine& mine = lines[rank];
  FloorLine& peer = lines[1 - rank];
  std::vector<double> ns;
  ns.reserve(calls);
  double sum = 0;
  for (int i = 1; i <= calls; ++i) {
    const uint64_t t0 = kolo::cpu_ticks();
    mine.payload[0] = i;
    mine.flag.store(i, std::memory_order_release);
    while (peer.flag.load(std::memory_order_acquire) < static_cast<uint64_t>(i)) {
    }
    sum += mine.payload[0] + peer.payload[0];
    ns.push_back(static_cast<double>(kolo::cpu_ticks() - t0) / tpn);
  }
  munmap(map, 4096);
  if (sum < 0) std::puts("");  // keeps the loop's reads
  return ns;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("usage: kolorun -np 2 kolo_breakdown [-b BYTES] [-n CALLS] [-w WARMUP]\n");
      return 0;
    }
    if ((arg != "-b" && arg != "-n" && arg != "-w") || i + 1 >= argc) {
      std::fprintf(stderr, "usage: kolorun -np 2 kolo_breakdown [-b BYTES] [-n CALLS] [-w WARMUP]\n");
      return 2;
    }
    const long long v = std::atoll(argv[++i]);
    if (v < (arg == "-w" ? 0 : 1) || v > (arg == "-b" ? 4096 : 100000000)) {
      std::fprintf(stderr, "kolo_breakdown: %s %s is out of range\n", arg.c_str(), argv[i]);
      return 2;
    }
    if (arg == "-b") o.bytes = static_cast<size_t>(v);
    if (arg == "-n") o.calls = static_cast<int>(v);
    if (arg == "-w") o.warmup = static_cast<int>(v);
  }
  kolo_comm_t comm = nullptr;
  if (kolo_init(&comm) != KOLO_SUCCESS) {
    std::fprintf(stderr, "kolo_init: %s\n", kolo_last_error());
    return 1;
  }
  const int rank = kolo_comm_rank(comm), size = kolo_comm_size(comm);
  const double tpn = ticks_per_ns(100);
  const size_t count = std::max<size_t>(1, o.bytes / sizeof(float));
  std::vector<float> send(count, 1.0f), recv(count);
  // Alternating halves, so that a slow moment of the machine falls on both: kolo, floor, kolo, floor.
  std::vector<double> whole, floor_ns;
  std::vector<std::vector<double>> phases(kolo::probe::kPoints);
  for (int half = 0; half < 2; ++half) {
    for (int i = 0; i < o.warmup + o.calls / 2; ++i) {
      const uint64_t t0 = kolo::cpu_ticks();
      if (kolo_allreduce(send.data(), recv.data(), count, KOLO_FLOAT32, KOLO_SUM, comm, nullptr) != KOLO_SUCCESS) {
        std::fprintf(stderr, "rank %d: kolo_allreduce: %s\n", rank, kolo_last_error());
        return 1;
      }
      const uint64_t t1 = kolo::cpu_ticks();
      if (i < o.warmup) continue;
      whole.push_back(static_cast<double>(t1 - t0) / tpn);
#if defined(KOLO_BREAKDOWN) && KOLO_BREAKDOWN
      const uint64_t* t = kolo::probe::t_stamps;
      for (int p = 1; p < kolo::probe::kPoints; ++p) {
        if (t[p] >= t[p - 1] && t[p - 1] >= t0) phases[p].push_back(static_cast<double>(t[p] - t[p - 1]) / tpn);
      }
#endif
    }
    std::vector<double> f = size == 2 ? floor_exchange(comm, rank, o.calls / 2, tpn) : std::vector<double>();
    floor_ns.insert(floor_ns.end(), f.begin(), f.end());
    kolo_barrier(comm);
  }
  if (rank == 0) {
    std::printf("# kolo_breakdown: %d ranks, %zu B allreduce of float, sum; %d calls after %d warm-up; %s; "
                "timestamp counter %.3f ticks/ns\n",
                size, count * sizeof(float), o.calls, o.warmup, cpu_model().c_str(), tpn);
    std::printf("%-36s %9s %9s\n", "phase", "p50 ns", "p99 ns");
    if (kolo::probe::kEnabled) {
      double sum = 0;
      for (int p = 1; p < kolo::probe::kPoints; ++p) {
        const std::string name = std::string(kolo::probe::point_name(p - 1)) + " -> " + kolo::probe::point_name(p);
        sum += percentile(phases[p], 0.5);
        std::printf("%-36s %9.1f %9.1f\n", name.c_str(), percentile(phases[p], 0.5), percentile(phases[p], 0.99));
      }
      std::printf("%-36s %9.1f\n", "sum of the phases' medians", sum);
    } else {
      std::printf("(phases: this kolo was built without -DKOLO_BREAKDOWN=ON; bench/perf/breakdown.sh builds one)\n");
    }
    // The mean too: the timestamp counter of some virtual machines moves in steps of ~10 ns,
    // which medians keep and a mean of many calls smooths.
    double mean = 0;
    for (double x : whole) mean += x / static_cast<double>(whole.size());
    std::printf("%-36s %9.1f %9.1f   mean %.1f\n", "whole call (kolo_allreduce)", percentile(whole, 0.5),
                percentile(whole, 0.99), mean);
    if (!floor_ns.empty()) {
      std::printf("%-36s %9.1f %9.1f\n", "floor: one line each way, no kolo", percentile(floor_ns, 0.5),
                  percentile(floor_ns, 0.99));
    }
  }
  kolo_comm_destroy(comm);
  return 0;
}
