// One rank of the fault matrix (tools/fault-matrix.sh): runs one collective in a loop
// until a call fails (a peer was killed, stopped or cut off by the script), then reports
// when (CLOCK_REALTIME, so the script can subtract the moment it struck), destroys the
// communicator and reports what it left behind against what the process had before
// kolo_init: file descriptors, threads, mappings of shared memory.
//   FM_COLL   allreduce (default), allgather, broadcast, reduce_scatter, alltoall, barrier
//   FM_BYTES  bytes per call (default 4 MB)
// Exit status: 0 = an error was seen, the communicator was destroyed and nothing leaked
// (rank 0, which hosts the rendezvous store for the life of the process, may keep that
// store's thread and sockets); 3 = something leaked; 1 = no error was seen.
#include <dirent.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "kolo/kolo.h"

namespace {

int count_dir(const char* path) {
  DIR* d = opendir(path);
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n - (std::strcmp(path, "/proc/self/fd") == 0 ? 1 : 0);  // the DIR's own descriptor
}

// Shared-memory mappings: memfd segments and anything under /dev/shm.
int count_shared_maps() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int n = 0;
  while (std::getline(maps, line)) n += line.find("memfd:") != std::string::npos || line.find("/dev/shm") != std::string::npos;
  return n;
}

struct Counts {
  int fds, threads, maps;
};
Counts counts() { return {count_dir("/proc/self/fd"), count_dir("/proc/self/task"), count_shared_maps()}; }

double now_realtime() {
  timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

kolo_result_t run_once(const std::string& coll, std::vector<float>& a, std::vector<float>& b, size_t count, int p,
                       kolo_comm_t comm) {
  const size_t per = count / p;
  if (coll == "allgather") return kolo_allgather(a.data(), b.data(), per, KOLO_FLOAT32, comm, nullptr);
  if (coll == "broadcast") return kolo_broadcast(a.data(), b.data(), count, KOLO_FLOAT32, 0, comm, nullptr);
  if (coll == "reduce_scatter") return kolo_reduce_scatter(a.data(), b.data(), per, KOLO_FLOAT32, KOLO_SUM, comm, nullptr);
  if (coll == "alltoall") return kolo_alltoall(a.data(), b.data(), per, KOLO_FLOAT32, comm, nullptr);
  if (coll == "barrier") return kolo_barrier(comm);
  return kolo_allreduce(a.data(), b.data(), count, KOLO_FLOAT32, KOLO_SUM, comm, nullptr);
}

}  // namespace

int main() {
  const char* coll_env = std::getenv("FM_COLL");
  const char* bytes_env = std::getenv("FM_BYTES");
  const std::string coll = coll_env != nullptr ? coll_env : "allreduce";
  const size_t count = (bytes_env != nullptr ? std::strtoull(bytes_env, nullptr, 10) : size_t{4} << 20) / 4;
  const Counts before = counts();
  kolo_comm_t comm = nullptr;
  if (kolo_init(&comm) != KOLO_SUCCESS) {
    std::printf("init failed: %s\n", kolo_last_error());
    return 1;
  }
  const int r = kolo_comm_rank(comm), p = kolo_comm_size(comm);
  std::vector<float> a(count, 1.0f), b(count, 0.0f);
  kolo_result_t rc = KOLO_SUCCESS;
  for (long i = 0; rc == KOLO_SUCCESS; ++i) {
    rc = run_once(coll, a, b, count, p, comm);
    if (i == 0 && rc == KOLO_SUCCESS) {
      std::printf("rank %d: running\n", r);
      std::fflush(stdout);
    }
  }
  const double failed_at = now_realtime();
  std::printf("rank %d: error at %.6f: %s: %s\n", r, failed_at, kolo_result_string(rc), kolo_last_error());
  std::fflush(stdout);  // before the destroy, which the script's deadline may cut short
  const kolo_result_t destroyed = kolo_comm_destroy(comm);
  const Counts after = counts();
  const Counts leaked{after.fds - before.fds, after.threads - before.threads, after.maps - before.maps};
  std::printf("rank %d: destroy %s; left behind: %d fds, %d threads, %d shared mappings\n", r,
              kolo_result_string(destroyed), leaked.fds, leaked.threads, leaked.maps);
  std::fflush(stdout);
  // Rank 0 hosts the store for the life of the process: its thread and sockets stay.
  const bool clean = leaked.maps == 0 && (r == 0 || (leaked.fds == 0 && leaked.threads == 0));
  return clean ? 0 : 3;
}
