// One rank of the start-up benchmark (bench/scale/startup.sh runs N of them under kolorun).
// It makes the world communicator, runs its first 8-byte allreduce, then measures what a
// rank holds (sockets, threads, memory) and the 8 B and 1 MB allreduce times. Rank 0
// gathers every rank's figures and prints one JSON line:
//   launch_to_first_s   from STARTUP_BENCH_LAUNCH (the script's clock before kolorun) to the
//                       last rank's first allreduce return
//   phases              the communicator's start-up steps, max over ranks (seconds)
//   cpu_per_rank_s      user + sys to the first allreduce, summed over ranks, / N
//   sockets, threads    per rank (max and median over ranks 1..N-1; rank 0's own, which
//                       serves the communicator's store: one connection per rank)
//   rss_mb, shared_mb   per rank (median), and rss summed over the ranks
//   allreduce_8b_us, allreduce_1mb_us   median over 200 / 20 calls (rank 0's)
#include <dirent.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "api/api_support.h"
#include "kolo/kolo.h"

namespace {

double wall_now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// Sockets among this process's descriptors.
int count_sockets() {
  int sockets = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (dirent* entry = readdir(dir)) {
    char link[64];
    std::string path = std::string("/proc/self/fd/") + entry->d_name;
    ssize_t n = readlink(path.c_str(), link, sizeof(link) - 1);
    if (n > 0 && std::strncmp(link, "socket:", 7) == 0) ++sockets;
  }
  closedir(dir);
  return sockets;
}

int count_threads() {
  int threads = 0;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  while (dirent* entry = readdir(dir)) threads += entry->d_name[0] != '.';
  closedir(dir);
  return threads;
}

// VmRSS and RssShmem of /proc/self/status, in MB.
void memory_mb(double* rss, double* shared) {
  std::ifstream in("/proc/self/status");
  std::string key;
  double kb = 0;
  *rss = *shared = 0;
  while (in >> key) {
    if (key == "VmRSS:" && in >> kb) *rss = kb / 1024;
    if (key == "RssShmem:" && in >> kb) *shared = kb / 1024;
  }
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double max_of(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

bool check(kolo_result_t r, const char* what) {
  if (r == KOLO_SUCCESS) return true;
  std::fprintf(stderr, "kolo-startup-probe: %s: %s\n", what, kolo_last_error());
  return false;
}

// Times `calls` allreduces of `count` floats, in microseconds each; the median.
double time_allreduce(kolo_comm_t comm, size_t count, int calls) {
  std::vector<float> buffer(count, 1.0f);
  std::vector<double> us;
  for (int i = 0; i < calls + 3; ++i) {
    const double t0 = wall_now();
    if (!check(kolo_allreduce(buffer.data(), buffer.data(), count, KOLO_FLOAT32, KOLO_SUM, comm, nullptr), "allreduce"))
      return -1;
    if (i >= 3) us.push_back((wall_now() - t0) * 1e6);
  }
  return median(us);
}

// One rank's figures, gathered at rank 0 (all doubles).
enum Field { kFirstDone, kCpu, kStore, kTree, kHosts, kTopology, kConnect, kCalibrate, kBarrier, kFirstCall, kSockets,
             kThreads, kRss, kShared, kFieldCount };

}  // namespace

int main() {
  const char* launch_text = std::getenv("STARTUP_BENCH_LAUNCH");
  const double launch = launch_text != nullptr ? std::atof(launch_text) : wall_now();
  kolo_comm_t comm = nullptr;
  if (!check(kolo_init(&comm), "kolo_init")) return 1;
  const double init_done = wall_now();
  float one = 1.0f;
  if (!check(kolo_allreduce(&one, &one, 1, KOLO_FLOAT32, KOLO_SUM, comm, nullptr), "first allreduce")) return 1;
  const int size = kolo_comm_size(comm), rank = kolo_comm_rank(comm);
  std::vector<double> mine(kFieldCount);
  mine[kFirstDone] = wall_now();
  mine[kCpu] = cpu_seconds();
  const auto& t = comm->impl->startup_times();
  mine[kStore] = t.store;
  mine[kTree] = t.tree;
  mine[kHosts] = t.hosts;
  mine[kTopology] = t.topology;
  mine[kConnect] = t.connect;
  mine[kCalibrate] = t.calibrate;
  mine[kBarrier] = t.barrier;
  mine[kFirstCall] = mine[kFirstDone] - init_done;
  if (one != static_cast<float>(size)) {
    std::fprintf(stderr, "kolo-startup-probe: rank %d: allreduce gave %g, not %d\n", rank, one, size);
    return 1;
  }
  mine[kSockets] = count_sockets();
  mine[kThreads] = count_threads();
  memory_mb(&mine[kRss], &mine[kShared]);
  std::vector<double> all(static_cast<size_t>(kFieldCount) * size);
  if (!check(kolo_allgather(mine.data(), all.data(), kFieldCount, KOLO_FLOAT64, comm, nullptr), "allgather")) return 1;
  const double small_us = time_allreduce(comm, 2, 200);
  const double large_us = time_allreduce(comm, 1 << 18, 20);
  if (rank == 0) {
    auto column = [&](int field) {
      std::vector<double> v(size);
      for (int r = 0; r < size; ++r) v[r] = all[static_cast<size_t>(r) * kFieldCount + field];
      return v;
    };
    double cpu_sum = 0, rss_sum = 0;
    for (double c : column(kCpu)) cpu_sum += c;
    for (double m : column(kRss)) rss_sum += m;
    std::vector<double> sockets = column(kSockets);
    const double sockets_rank0 = sockets[0];
    if (size > 1) sockets.erase(sockets.begin());
    std::printf(
        "{\"ranks\": %d, \"launch_to_first_s\": %.3f, \"phases\": {\"store\": %.3f, \"tree\": %.3f, \"hosts\": %.3f, "
        "\"topology\": %.3f, \"connect\": %.3f, \"calibrate\": %.3f, \"barrier\": %.3f, \"first_call\": %.3f}, "
        "\"cpu_per_rank_s\": %.4f, \"sockets_max\": %.0f, \"sockets_median\": %.0f, \"sockets_rank0\": %.0f, "
        "\"threads_max\": %.0f, "
        "\"rss_mb_median\": %.1f, \"shared_mb_median\": %.1f, \"rss_mb_sum\": %.0f, "
        "\"allreduce_8b_us\": %.1f, \"allreduce_1mb_us\": %.1f}\n",
        size, max_of(column(kFirstDone)) - launch, max_of(column(kStore)), max_of(column(kTree)), max_of(column(kHosts)),
        max_of(column(kTopology)), max_of(column(kConnect)), max_of(column(kCalibrate)), max_of(column(kBarrier)),
        max_of(column(kFirstCall)), cpu_sum / size, max_of(sockets), median(sockets), sockets_rank0,
        max_of(column(kThreads)), median(column(kRss)), median(column(kShared)), rss_sum, small_us, large_us);
    std::fflush(stdout);
  }
  return check(kolo_comm_destroy(comm), "kolo_comm_destroy") ? 0 : 1;
}
