// One rank of the fault matrix (tools/fault-matrix.sh): runs one collective in a loop
// until a call fails (a peer was killed, stopped or cut off by the script), then reports
// when (CLOCK_REALTIME, so the script can subtract the moment it struck), destroys the
// communicator and reports what it left behind against what the process had before
// kolo_init: file descriptors, threads, mappings of shared memory.
//   FM_COLL     allreduce (default), allgather, broadcast, reduce_scatter, alltoall, barrier,
//               split (kolo_comm_split, an allreduce on the half, its destroy: made and
//               used without the unique id's maker, which the script strikes)
//   FM_BYTES    bytes per call (default 4 MB)
//   FM_ID_FILE  join through kolo_comm_init_rank with the kolo_unique_id in this file (hex),
//               written by a process started with FM_ROLE=store, which hosts the store and
//               is not a rank; without it, kolo_init from the environment (rank 0 hosts).
// SIGUSR1 makes this rank shut down one of the TCP connections to a peer that the
// collective is using (the "close" fault: to the peer it looks like this rank closed that
// connection); it prints which.
// Exit status: 0 = an error was seen, the communicator was destroyed and nothing leaked
// (rank 0, when it hosts the rendezvous store for the life of the process, may keep that
// store's thread and sockets); 3 = something leaked; 1 = no error was seen.
#include <arpa/inet.h>
#include <dirent.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
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

int port_of(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return -1;
}

// Bytes this TCP socket has moved both ways so far (-1: not a TCP socket).
long long tcp_traffic(int fd) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return -1;
  return static_cast<long long>(info.tcpi_bytes_acked + info.tcpi_bytes_received);
}

// The "close" fault: on SIGUSR1, shut down one connected TCP socket that the collective
// is using (it moved bytes within 20 ms), other than the store's (neither end on the
// store's port). An idle connection would not do: a ring never uses the one between
// ranks 0 and 2, and a link closed while idle is, rightly, only an error when next used.
// Runs on its own thread (SIGUSR1 is blocked everywhere else), so it may use what a
// signal handler may not; the thread lives as long as the process, so that the leak count
// before and after matches.
void close_one_socket(int store_port) {
  std::vector<std::pair<int, long long>> sockets;  // fd, traffic so far
  DIR* d = opendir("/proc/self/fd");
  while (dirent* e = d != nullptr ? readdir(d) : nullptr) {
    if (e->d_name[0] == '.') continue;
    const int fd = std::atoi(e->d_name);
    struct stat st{};
    int listening = 0;
    socklen_t len = sizeof listening;
    sockaddr_storage mine{}, peer{};
    socklen_t ml = sizeof mine, pl = sizeof peer;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || listening != 0) continue;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &ml) != 0 ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0)
      continue;
    if (port_of(mine) < 0 || port_of(mine) == store_port || port_of(peer) == store_port) continue;
    sockets.emplace_back(fd, tcp_traffic(fd));
  }
  if (d != nullptr) closedir(d);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::vector<int> active;
  for (const auto& [fd, before] : sockets) {
    if (before >= 0 && tcp_traffic(fd) > before) active.push_back(fd);
  }
  if (active.empty()) {
    std::printf("close: no TCP socket to a peer in use (%zu idle)\n", sockets.size());
    std::fflush(stdout);
    return;
  }
  const int fd = active[static_cast<size_t>(now_realtime() * 1e6) % active.size()];
  // Said first: once the socket is down this rank fails, and may exit before a line
  // printed afterwards got out.
  std::printf("close: shut down socket %d at %.6f, one of %zu in use (%zu in all)\n", fd, now_realtime(),
              active.size(), sockets.size());
  std::fflush(stdout);
  ::shutdown(fd, SHUT_RDWR);
}

void close_sockets_on_signal(int store_port) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  for (int sig = 0; sigwait(&set, &sig) == 0;) close_one_socket(store_port);
}

int store_port_from_env() {
  const char* addr = std::getenv("KOLO_ADDR");
  const char* colon = addr != nullptr ? std::strrchr(addr, ':') : nullptr;
  return colon != nullptr ? std::atoi(colon + 1) : -1;
}

// FM_ROLE=store: host the store (kolo_get_unique_id), hand the id to the ranks through a
// file, and live until the script ends it.
int host_store(const char* id_file) {
  kolo_unique_id id;
  if (kolo_get_unique_id(&id) != KOLO_SUCCESS) {
    std::printf("store: kolo_get_unique_id failed: %s\n", kolo_last_error());
    return 1;
  }
  const std::string tmp = std::string(id_file) + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return 1;
  for (unsigned char c : id.internal) std::fprintf(f, "%02x", c);
  std::fclose(f);
  std::rename(tmp.c_str(), id_file);  // the ranks never see half an id
  std::printf("store: hosting\n");
  std::fflush(stdout);
  for (;;) pause();
}

kolo_result_t join(const char* id_file, kolo_comm_t* comm) {
  if (id_file == nullptr) return kolo_init(comm);
  std::ifstream in(id_file);
  std::string hex;
  in >> hex;
  kolo_unique_id id{};
  const bool is_hex = hex.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (hex.size() != 2 * sizeof id.internal || !is_hex) {
    std::printf("no id in %s (want %zu hex digits)\n", id_file, 2 * sizeof id.internal);
    return KOLO_ERR_INVALID_ARGUMENT;
  }
  for (size_t i = 0; i < sizeof id.internal; ++i) {
    id.internal[i] = static_cast<char>(std::strtoul(hex.substr(2 * i, 2).c_str(), nullptr, 16));
  }
  const char* rank = std::getenv("KOLO_RANK");
  const char* size = std::getenv("KOLO_SIZE");
  return kolo_comm_init_rank(comm, size != nullptr ? std::atoi(size) : 0, &id, rank != nullptr ? std::atoi(rank) : -1);
}

kolo_result_t run_once(const std::string& coll, std::vector<float>& a, std::vector<float>& b, size_t count, int p,
                       kolo_comm_t comm) {
  const size_t per = count / p;
  if (coll == "split") {
    kolo_comm_t half = nullptr;
    const int r = kolo_comm_rank(comm);
    kolo_result_t rc = kolo_comm_split(comm, r % 2, r, &half);
    if (rc != KOLO_SUCCESS) return rc;
    rc = kolo_allreduce(a.data(), b.data(), per, KOLO_FLOAT32, KOLO_SUM, half, nullptr);
    const kolo_result_t destroyed = kolo_comm_destroy(half);
    return rc != KOLO_SUCCESS ? rc : destroyed;
  }
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
  const char* role = std::getenv("FM_ROLE");
  const char* id_file = std::getenv("FM_ID_FILE");
  if (role != nullptr && std::strcmp(role, "store") == 0) return host_store(id_file != nullptr ? id_file : "fm.id");
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, nullptr);  // kolo's threads inherit it: only the closer takes SIGUSR1
  std::thread(close_sockets_on_signal, store_port_from_env()).detach();
  const Counts before = counts();
  kolo_comm_t comm = nullptr;
  if (join(id_file, &comm) != KOLO_SUCCESS) {
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
  // Rank 0, unless the ranks joined a store hosted elsewhere, hosts the store for the life
  // of the process: its thread and sockets stay.
  const bool hosts_store = r == 0 && id_file == nullptr;
  const bool clean = leaked.maps == 0 && (hosts_store || (leaked.fds == 0 && leaked.threads == 0));
  return clean ? 0 : 3;
}
