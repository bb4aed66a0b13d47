// What PyTorch's ProcessGroupNCCL does with libnccl.so.2, repeated by a program written
// against NVIDIA's nccl.h (and kolo.h, for the same checks on kolo's own C API), on kolo's
// drop-in. Ranks are plain processes started by run_ranks.sh (RANK, WORLD_SIZE, as torchrun
// sets them): rank 0 makes the unique id and hands it over through a private folder, as
// torch does through its store.
//
//   process_group_test sequence DIR [device]
//       ProcessGroupNCCL's calls in its order: ncclCommInitRankConfig with a nonblocking
//       config and ncclCommGetAsyncError polled until the communicator is ready; the
//       collectives, coalesced ones in a group; ncclCommSplit with NCCL_SPLIT_NOCOLOR
//       (new_group); all-to-all as a group of sends and receives with the self pair
//       (all_to_all_single with splits) and as ncclAlltoAll; batched point-to-point
//       (batch_isend_irecv); ncclMemAlloc and ncclCommRegister (its allocator hooks);
//       ncclCommWindowRegister (symmetric memory; device buffers); ncclCommInitRankScalable
//       (TORCH_NCCL_RANKS_PER_ROOT); ncclCommShrink (shrink_group, the last rank excluded);
//       the watchdog's ncclCommGetAsyncError; shutdown by ncclCommFinalize, polling, and
//       ncclCommDestroy. "device": buffers from ncclMemAlloc on KOLO_DEVICE=emulated.
//   process_group_test early_exit DIR nccl|kolo [device] [last_split]
//       Rank 0 leaves the job right after its last collective (exit) or, with last_split,
//       its last split, which leaves it out (_exit); the others go on with the
//       communicators made before, split them again, and destroy them. Nothing may depend on rank 0's process (the maker of the unique id)
//       beyond its own connections' last messages.
//   process_group_test watchdog DIR kill|stuck
//       The last rank dies by SIGKILL (kill) or never calls (stuck) while the others wait
//       in an allreduce; their watchdog thread, as ProcessGroupNCCL's, polls
//       ncclCommGetAsyncError and calls ncclCommAbort after 3 s: the allreduce returns an
//       error, the abort succeeds, and nothing hangs or crashes.
#include <nccl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kolo/kolo.h"

namespace {

int g_rank = 0;
int g_checks = 0;
int g_failures = 0;
bool g_device = false;

void check(bool ok, const std::string& what) {
  ++g_checks;
  if (!ok) {
    ++g_failures;
    std::printf("rank %d: FAIL: %s\n", g_rank, what.c_str());
    std::fflush(stdout);
  }
}

void must(ncclResult_t r, const std::string& what) {
  if (r == ncclSuccess) return;
  std::printf("rank %d: FAIL: %s: %s (%s)\n", g_rank, what.c_str(), ncclGetErrorString(r), ncclGetLastError(nullptr));
  std::fflush(stdout);
  std::_Exit(1);
}

void must_kolo(kolo_result_t r, const std::string& what) {
  if (r == KOLO_SUCCESS) return;
  std::printf("rank %d: FAIL: %s: %s (%s)\n", g_rank, what.c_str(), kolo_result_string(r), kolo_last_error());
  std::fflush(stdout);
  std::_Exit(1);
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) {
    std::printf("%s is not set: start this program with run_ranks.sh\n", name);
    std::exit(2);
  }
  return std::atoi(v);
}

// The unique id from rank 0 through DIR/name (rank 0 writes it, the others poll for it).
template <typename Id>
Id exchange_id(const std::string& dir, int rank, const char* name, const std::function<void(Id*)>& make) {
  Id id;
  const std::string path = dir + "/" + name;
  if (rank == 0) {
    make(&id);
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(reinterpret_cast<const char*>(&id), sizeof id);
    if (std::rename(tmp.c_str(), path.c_str()) != 0) std::perror("rename"), std::exit(1);
    return id;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path, std::ios::binary);
    if (in && in.read(reinterpret_cast<char*>(&id), sizeof id)) return id;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::printf("rank %d: FAIL: no unique id in %s after 60 s\n", rank, path.c_str());
  std::exit(1);
}

ncclUniqueId nccl_id(const std::string& dir, int rank, const char* name) {
  return exchange_id<ncclUniqueId>(dir, rank, name, [](ncclUniqueId* id) { must(ncclGetUniqueId(id), "ncclGetUniqueId"); });
}

// cudaStreamSynchronize / cudaMalloc-like helpers for the emulated device (emulated_device_sync.cc).
extern "C" int nccl_test_stream_synchronize(void* stream);

// A buffer of n int64 values: host memory, or device memory from ncclMemAlloc (readable by
// the host on the emulated device, where it is memfd-backed host memory).
struct Buffer {
  int64_t* p = nullptr;
  size_t n = 0;
  explicit Buffer(size_t count) : n(count) {
    if (g_device) {
      must(ncclMemAlloc(reinterpret_cast<void**>(&p), count * sizeof(int64_t)), "ncclMemAlloc");
    } else {
      p = static_cast<int64_t*>(std::malloc(count * sizeof(int64_t)));
    }
  }
  ~Buffer() {
    if (g_device) {
      ncclMemFree(p);
    } else {
      std::free(p);
    }
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

void synchronize() {
  if (g_device) check(nccl_test_stream_synchronize(nullptr) == 0, "stream synchronize");
}

// Blocks until a nonblocking init or split is done, as ProcessGroupNCCL's waitUntilInitialized.
void wait_ready(ncclComm_t comm, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
    must(ncclCommGetAsyncError(comm, &state), std::string("ncclCommGetAsyncError (") + what + ")");
    if (state == ncclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  check(state == ncclSuccess, std::string(what) + ": ready, not " + ncclGetErrorString(state));
}

int64_t sum_of_ranks(const std::vector<int>& ranks) {
  int64_t s = 0;
  for (int r : ranks) s += r;
  return s;
}

// ---- sequence ---------------------------------------------------------------------------

void coalesced_collectives(ncclComm_t comm, int rank, int size) {
  const size_t n = 33;
  Buffer a(n), b(n), gathered(n * size), scattered(n);
  for (size_t i = 0; i < n; ++i) a.p[i] = rank + static_cast<int64_t>(i), b.p[i] = 2 * rank;
  // allreduce_coalesced: several allreduces in one group.
  must(ncclGroupStart(), "ncclGroupStart (coalesced)");
  must(ncclAllReduce(a.p, a.p, n, ncclInt64, ncclSum, comm, nullptr), "ncclAllReduce (coalesced 1)");
  must(ncclAllReduce(b.p, b.p, n, ncclInt64, ncclMax, comm, nullptr), "ncclAllReduce (coalesced 2)");
  must(ncclGroupEnd(), "ncclGroupEnd (coalesced)");
  synchronize();
  bool ok = true;
  for (size_t i = 0; i < n; ++i) {
    ok = ok && a.p[i] == static_cast<int64_t>(size) * (size - 1) / 2 + static_cast<int64_t>(i) * size &&
         b.p[i] == 2 * (size - 1);
  }
  check(ok, "coalesced allreduces (sum, max)");
  // all_gather_into_tensor, reduce_scatter_tensor, broadcast.
  for (size_t i = 0; i < n; ++i) a.p[i] = rank * 100 + static_cast<int64_t>(i);
  must(ncclAllGather(a.p, gathered.p, n, ncclInt64, comm, nullptr), "ncclAllGather");
  synchronize();
  ok = true;
  for (int q = 0; q < size; ++q) {
    for (size_t i = 0; i < n; ++i) ok = ok && gathered.p[q * n + i] == q * 100 + static_cast<int64_t>(i);
  }
  check(ok, "allgather");
  must(ncclReduceScatter(gathered.p, scattered.p, n, ncclInt64, ncclSum, comm, nullptr), "ncclReduceScatter");
  synchronize();
  ok = true;
  for (size_t i = 0; i < n; ++i) ok = ok && scattered.p[i] == size * (rank * 100 + static_cast<int64_t>(i));
  check(ok, "reduce_scatter");
  for (size_t i = 0; i < n; ++i) a.p[i] = rank == size - 1 ? 7 * static_cast<int64_t>(i) : -1;
  must(ncclBroadcast(a.p, a.p, n, ncclInt64, size - 1, comm, nullptr), "ncclBroadcast");
  synchronize();
  ok = true;
  for (size_t i = 0; i < n; ++i) ok = ok && a.p[i] == 7 * static_cast<int64_t>(i);
  check(ok, "broadcast from the last rank");
}

// all_to_all_single with uneven splits: rank r sends r + q + 1 values to rank q (itself too),
// as a group of ncclSend/ncclRecv; then the even form, ncclAlltoAll.
void all_to_all(ncclComm_t comm, int rank, int size) {
  size_t out_total = 0, in_total = 0;
  for (int q = 0; q < size; ++q) out_total += rank + q + 1, in_total += q + rank + 1;
  Buffer out(out_total), in(in_total);
  size_t at = 0;
  for (int q = 0; q < size; ++q) {
    for (int i = 0; i < rank + q + 1; ++i) out.p[at++] = rank * 1000 + q;
  }
  must(ncclGroupStart(), "ncclGroupStart (all_to_all_single)");
  size_t send_at = 0, recv_at = 0;
  for (int q = 0; q < size; ++q) {
    must(ncclSend(out.p + send_at, rank + q + 1, ncclInt64, q, comm, nullptr), "ncclSend (all_to_all_single)");
    must(ncclRecv(in.p + recv_at, q + rank + 1, ncclInt64, q, comm, nullptr), "ncclRecv (all_to_all_single)");
    send_at += rank + q + 1;
    recv_at += q + rank + 1;
  }
  must(ncclGroupEnd(), "ncclGroupEnd (all_to_all_single)");
  synchronize();
  bool ok = true;
  at = 0;
  for (int q = 0; q < size; ++q) {
    for (int i = 0; i < q + rank + 1; ++i) ok = ok && in.p[at++] == q * 1000 + rank;
  }
  check(ok, "all_to_all_single with uneven splits (self included)");

  const size_t per = 5;
  Buffer even_out(per * size), even_in(per * size);
  for (size_t i = 0; i < per * size; ++i) even_out.p[i] = rank * 100 + static_cast<int64_t>(i / per);
  must(ncclAlltoAll(even_out.p, even_in.p, per, ncclInt64, comm, nullptr), "ncclAlltoAll");
  synchronize();
  ok = true;
  for (size_t i = 0; i < per * size; ++i) ok = ok && even_in.p[i] == static_cast<int64_t>(i / per) * 100 + rank;
  check(ok, "ncclAlltoAll");
}

// batch_isend_irecv: a send to the next rank and a receive from the previous, twice, in a group.
void batched_p2p(ncclComm_t comm, int rank, int size) {
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  const size_t n = 17;
  Buffer s1(n), s2(n), r1(n), r2(n);
  for (size_t i = 0; i < n; ++i) s1.p[i] = rank, s2.p[i] = -rank, r1.p[i] = r2.p[i] = 99;
  must(ncclGroupStart(), "ncclGroupStart (batch_isend_irecv)");
  must(ncclSend(s1.p, n, ncclInt64, next, comm, nullptr), "ncclSend 1");
  must(ncclRecv(r1.p, n, ncclInt64, prev, comm, nullptr), "ncclRecv 1");
  must(ncclSend(s2.p, n, ncclInt64, next, comm, nullptr), "ncclSend 2");
  must(ncclRecv(r2.p, n, ncclInt64, prev, comm, nullptr), "ncclRecv 2");
  must(ncclGroupEnd(), "ncclGroupEnd (batch_isend_irecv)");
  synchronize();
  bool ok = true;
  for (size_t i = 0; i < n; ++i) ok = ok && r1.p[i] == prev && r2.p[i] == -prev;
  check(ok, "batched send/recv around the ring, matched in order");
}

// new_group(ranks=[all but the last]): ncclCommSplit, NCCL_SPLIT_NOCOLOR on the rank left out.
void split_new_group(ncclComm_t comm, int rank, int size) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t sub = nullptr;
  const bool member = size == 1 || rank < size - 1;
  must(ncclCommSplit(comm, member ? 0 : NCCL_SPLIT_NOCOLOR, rank, &sub, &config), "ncclCommSplit (new_group)");
  if (!member) {
    check(sub == nullptr, "NCCL_SPLIT_NOCOLOR gives no communicator");
    return;
  }
  wait_ready(sub, "split");
  const int n = size == 1 ? 1 : size - 1;
  int count = 0;
  must(ncclCommCount(sub, &count), "ncclCommCount (new_group)");
  check(count == n, "new_group's size");
  Buffer v(3);
  for (int i = 0; i < 3; ++i) v.p[i] = rank;
  must(ncclAllReduce(v.p, v.p, 3, ncclInt64, ncclSum, sub, nullptr), "ncclAllReduce (new_group)");
  synchronize();
  check(v.p[0] == static_cast<int64_t>(n) * (n - 1) / 2 && v.p[2] == v.p[0], "allreduce on new_group");
  must(ncclCommFinalize(sub), "ncclCommFinalize (new_group)");
  must(ncclCommDestroy(sub), "ncclCommDestroy (new_group)");
}

void registration(ncclComm_t comm, int rank, int size) {
  // The caching allocator's hook registers every segment it gets; ncclMemAlloc is the
  // allocator of torch's NCCL MemPool. Registration is local: ranks may differ in order.
  void* segment = nullptr;
  const size_t bytes = 1 << 16;
  void* handle = nullptr;
  if (g_device) {
    must(ncclMemAlloc(&segment, bytes), "ncclMemAlloc (segment)");
  } else {
    segment = std::malloc(bytes);
  }
  must(ncclCommRegister(comm, segment, bytes, &handle), "ncclCommRegister");
  auto* v = static_cast<int64_t*>(segment);
  v[0] = rank + 1;
  must(ncclAllReduce(v, v, 1, ncclInt64, ncclSum, comm, nullptr), "ncclAllReduce (registered segment)");
  synchronize();
  check(v[0] == static_cast<int64_t>(size) * (size + 1) / 2, "allreduce on a registered segment");
  must(ncclCommDeregister(comm, handle), "ncclCommDeregister");
  if (g_device) {
    // Symmetric memory: a window, collective on every rank, device buffers only.
    ncclWindow_t window = nullptr;
    must(ncclCommWindowRegister(comm, segment, bytes, &window, NCCL_WIN_COLL_SYMMETRIC), "ncclCommWindowRegister");
    v[0] = rank + 1;
    must(ncclAllReduce(v, v, 1, ncclInt64, ncclSum, comm, nullptr), "ncclAllReduce (window)");
    synchronize();
    check(v[0] == static_cast<int64_t>(size) * (size + 1) / 2, "allreduce in a window");
    must(ncclCommWindowDeregister(comm, window), "ncclCommWindowDeregister");
    must(ncclMemFree(segment), "ncclMemFree");
  } else {
    ncclWindow_t window = nullptr;
    const ncclResult_t r = ncclCommWindowRegister(comm, segment, bytes, &window, 0);
    check(r == ncclInvalidArgument && std::strstr(ncclGetLastError(comm), "device") != nullptr,
          std::string("ncclCommWindowRegister on host memory is refused naming device buffers: ") +
              ncclGetErrorString(r) + ": " + ncclGetLastError(comm));
    std::free(segment);
  }
}

// torch's shutdown: ncclCommFinalize, ncclCommGetAsyncError until not in progress, ncclCommDestroy.
void shutdown(ncclComm_t comm) {
  must(ncclCommFinalize(comm), "ncclCommFinalize");
  wait_ready(comm, "finalize");
  must(ncclCommDestroy(comm), "ncclCommDestroy");
}

int run_sequence(const std::string& dir) {
  const int rank = g_rank = env_int("RANK"), size = env_int("WORLD_SIZE");
  int version = 0;
  must(ncclGetVersion(&version), "ncclGetVersion");
  check(version >= 22800, "ncclGetVersion: a 2.28 ABI");
  const ncclUniqueId id = nccl_id(dir, rank, "pg");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // TORCH_NCCL_USE_COMM_NONBLOCKING / eager init
  config.splitShare = 0;
  config.cgaClusterSize = 2;  // tuning torch passes through; ignored by kolo
  ncclComm_t comm = nullptr;
  const ncclResult_t init = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  check(init == ncclSuccess || init == ncclInProgress, "ncclCommInitRankConfig (nonblocking)");
  wait_ready(comm, "init");
  for (int round = 0; round < 2; ++round) coalesced_collectives(comm, rank, size);
  split_new_group(comm, rank, size);
  all_to_all(comm, rank, size);
  batched_p2p(comm, rank, size);
  registration(comm, rank, size);

  // TORCH_NCCL_RANKS_PER_ROOT: several roots, each with its own id (here all from rank 0).
  ncclUniqueId roots[2] = {nccl_id(dir, rank, "root0"), nccl_id(dir, rank, "root1")};
  ncclComm_t scalable = nullptr;
  must(ncclCommInitRankScalable(&scalable, size, rank, 2, roots, &config), "ncclCommInitRankScalable");
  wait_ready(scalable, "scalable init");
  Buffer one(1);
  one.p[0] = 1;
  must(ncclAllReduce(one.p, one.p, 1, ncclInt64, ncclSum, scalable, nullptr), "ncclAllReduce (scalable)");
  synchronize();
  check(one.p[0] == size, "allreduce on the communicator from ncclCommInitRankScalable");

  // shrink_group: every rank but the last makes a communicator without it (NCCL's list
  // semantics: the excluded rank does not call), and it works.
  if (size > 1) {
    ncclComm_t shrunk = nullptr;
    int exclude = size - 1;
    if (rank != exclude) {
      must(ncclCommShrink(scalable, &exclude, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT), "ncclCommShrink");
      int shrunk_size = 0, shrunk_rank = -1;
      must(ncclCommCount(shrunk, &shrunk_size), "ncclCommCount (shrunk)");
      must(ncclCommUserRank(shrunk, &shrunk_rank), "ncclCommUserRank (shrunk)");
      check(shrunk_size == size - 1 && shrunk_rank == rank, "the shrunk communicator: the others, in order");
      one.p[0] = 1;
      must(ncclAllReduce(one.p, one.p, 1, ncclInt64, ncclSum, shrunk, nullptr), "ncclAllReduce (shrunk)");
      synchronize();
      check(one.p[0] == size - 1, "allreduce on the shrunk communicator");
      shutdown(shrunk);
    }
  }
  shutdown(scalable);

  // The watchdog's poll, on a healthy communicator.
  ncclResult_t async = ncclInternalError;
  must(ncclCommGetAsyncError(comm, &async), "ncclCommGetAsyncError (watchdog)");
  check(async == ncclSuccess, "a healthy communicator has no async error");
  // Bad input, as torch may pass it: NCCL's codes, never a crash.
  check(ncclAllReduce(nullptr, one.p, 1, ncclInt64, ncclSum, comm, nullptr) == ncclInvalidArgument,
        "a NULL send buffer: ncclInvalidArgument");
  check(ncclBroadcast(one.p, one.p, 1, ncclInt64, size, comm, nullptr) == ncclInvalidArgument,
        "root = size: ncclInvalidArgument");
  shutdown(comm);
  std::printf("rank %d: sequence%s: %d checks, %d failed\n", rank, g_device ? " (device)" : "", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}

// ---- early exit -------------------------------------------------------------------------

// The calls of the early-exit scenario, through NCCL's API or kolo's.
struct Api {
  std::function<void*(const std::string& dir, const char* name, int rank, int size)> init;
  std::function<void*(void* comm, int color, int key)> split;  // color < 0: none
  std::function<void(void* comm, int64_t* v, size_t n)> allreduce;
  std::function<void(void* comm)> destroy;
};

Api nccl_api() {
  Api a;
  a.init = [](const std::string& dir, const char* name, int rank, int size) -> void* {
    const ncclUniqueId id = nccl_id(dir, rank, name);
    ncclComm_t comm = nullptr;
    must(ncclCommInitRank(&comm, size, id, rank), "ncclCommInitRank");
    return comm;
  };
  a.split = [](void* comm, int color, int key) -> void* {
    ncclComm_t out = nullptr;
    must(ncclCommSplit(static_cast<ncclComm_t>(comm), color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &out, nullptr),
         "ncclCommSplit");
    return out;
  };
  a.allreduce = [](void* comm, int64_t* v, size_t n) {
    must(ncclAllReduce(v, v, n, ncclInt64, ncclSum, static_cast<ncclComm_t>(comm), nullptr), "ncclAllReduce");
    synchronize();
  };
  a.destroy = [](void* comm) { must(ncclCommDestroy(static_cast<ncclComm_t>(comm)), "ncclCommDestroy"); };
  return a;
}

Api kolo_api() {
  Api a;
  a.init = [](const std::string& dir, const char* name, int rank, int size) -> void* {
    const kolo_unique_id id = exchange_id<kolo_unique_id>(
        dir, rank, name, [](kolo_unique_id* out) { must_kolo(kolo_get_unique_id(out), "kolo_get_unique_id"); });
    kolo_comm_t comm = nullptr;
    must_kolo(kolo_comm_init_rank(&comm, size, &id, rank), "kolo_comm_init_rank");
    return comm;
  };
  a.split = [](void* comm, int color, int key) -> void* {
    kolo_comm_t out = nullptr;
    must_kolo(kolo_comm_split(static_cast<kolo_comm_t>(comm), color, key, &out), "kolo_comm_split");
    return out;
  };
  a.allreduce = [](void* comm, int64_t* v, size_t n) {
    must_kolo(kolo_allreduce(v, v, n, KOLO_INT64, KOLO_SUM, static_cast<kolo_comm_t>(comm), nullptr), "kolo_allreduce");
    synchronize();
  };
  a.destroy = [](void* comm) { must_kolo(kolo_comm_destroy(static_cast<kolo_comm_t>(comm)), "kolo_comm_destroy"); };
  return a;
}

// An allreduce of the members' old ranks, checked.
void allreduce_ranks(const Api& api, void* comm, int rank, const std::vector<int>& members, const std::string& what) {
  Buffer v(1000);
  for (size_t i = 0; i < v.n; ++i) v.p[i] = rank + static_cast<int64_t>(i);
  api.allreduce(comm, v.p, v.n);
  bool ok = true;
  const int64_t m = static_cast<int64_t>(members.size());
  for (size_t i = 0; i < v.n; ++i) ok = ok && v.p[i] == sum_of_ranks(members) + m * static_cast<int64_t>(i);
  check(ok, "allreduce on " + what);
}

// Rank 0 leaves: exit() in one phase (its atexit handlers run, kolo's among them), _exit()
// in the other (as a killed or crashed-after-its-work process: no handler).
[[noreturn]] void leave(bool clean) {
  std::printf("rank 0: leaving the job (%s)\n", clean ? "exit" : "_exit");
  std::fflush(stdout);
  if (clean) std::exit(0);
  std::_Exit(0);
}

// last_split: rank 0's last call is a split that leaves it out (NCCL_SPLIT_NOCOLOR), after
// which it leaves with _exit; otherwise its last call is an allreduce with everyone, after
// which it leaves with exit.
int run_early_exit(const std::string& dir, const Api& api, bool last_split) {
  const int rank = g_rank = env_int("RANK"), size = env_int("WORLD_SIZE");
  std::vector<int> all, rest;
  for (int r = 0; r < size; ++r) all.push_back(r);
  for (int r = 1; r < size; ++r) rest.push_back(r);
  void* world = api.init(dir, "first", rank, size);
  allreduce_ranks(api, world, rank, all, "the world");
  // A communicator of the others, made while rank 0 is there (rank 0 alone in its own).
  void* others = api.split(world, rank == 0 ? 1 : 0, rank);
  void* second = api.init(dir, "second", rank, size);
  void* without0 = nullptr;
  if (last_split) {
    without0 = api.split(second, rank == 0 ? -1 : 0, rank);
  } else {
    allreduce_ranks(api, world, rank, all, "the world, rank 0's last collective");
  }
  if (rank == 0) {
    if (size > 1) leave(!last_split);
    api.destroy(others);
    api.destroy(second);
    api.destroy(world);
    std::printf("rank 0: early_exit: %d checks, %d failed\n", g_checks, g_failures);
    return g_failures == 0 ? 0 : 1;
  }
  // The others: the communicators made before rank 0 left, split again, destroyed.
  allreduce_ranks(api, others, rank, rest, "the others' communicator after rank 0 left");
  std::vector<int> odd_or_even;
  for (int r : rest) {
    if (r % 2 == rank % 2) odd_or_even.push_back(r);
  }
  void* half = api.split(others, rank % 2, rank);
  allreduce_ranks(api, half, rank, odd_or_even, "a split of the others' communicator");
  api.destroy(half);
  if (without0 != nullptr) {
    allreduce_ranks(api, without0, rank, rest, "the split made as rank 0 left (NOCOLOR)");
    void* again = api.split(without0, 0, -rank);
    allreduce_ranks(api, again, rank, rest, "a split of it");
    api.destroy(again);
    api.destroy(without0);
  }
  api.destroy(others);
  api.destroy(second);  // rank 0 is gone: destroys are local
  api.destroy(world);
  std::printf("rank %d: early_exit: %d checks, %d failed\n", rank, g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}

// ---- watchdog ---------------------------------------------------------------------------

int run_watchdog(const std::string& dir, const std::string& fault) {
  const int rank = g_rank = env_int("RANK"), size = env_int("WORLD_SIZE");
  const ncclUniqueId id = nccl_id(dir, rank, "watchdog");
  ncclComm_t comm = nullptr;
  must(ncclCommInitRank(&comm, size, id, rank), "ncclCommInitRank");
  Buffer v(1 << 20);
  for (size_t i = 0; i < v.n; ++i) v.p[i] = 1;
  must(ncclAllReduce(v.p, v.p, v.n, ncclInt64, ncclSum, comm, nullptr), "ncclAllReduce (warm-up)");
  synchronize();
  const bool victim = rank == size - 1;
  if (victim) {
    if (fault == "kill") {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others are waiting by now
      std::printf("rank %d: killing myself\n", rank);
      std::fflush(stdout);
      raise(SIGKILL);
    }
    // stuck: never calls; waits for the others' abort to reach it, then aborts its own.
    std::this_thread::sleep_for(std::chrono::seconds(6));
    must(ncclCommAbort(comm), "ncclCommAbort (the stuck rank)");
    std::printf("rank %d: watchdog: stuck rank aborted its communicator\n", rank);
    return 0;
  }
  // ProcessGroupNCCL's watchdog: polls the async error; after the op timeout, aborts.
  std::atomic<bool> done{false}, aborted{false};
  std::thread watchdog([&] {
    const auto timeout = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (!done.load()) {
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comm, &async) != ncclSuccess) break;  // aborted under us: fine
      if (async != ncclSuccess || std::chrono::steady_clock::now() > timeout) {
        aborted = true;
        const ncclResult_t r = ncclCommAbort(comm);
        check(r == ncclSuccess || r == ncclSystemError || r == ncclRemoteError,
              std::string("ncclCommAbort from the watchdog: ") + ncclGetErrorString(r));
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const auto start = std::chrono::steady_clock::now();
  const ncclResult_t r = ncclAllReduce(v.p, v.p, v.n, ncclInt64, ncclSum, comm, nullptr);
  if (r == ncclSuccess) synchronize();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  done = true;
  watchdog.join();
  check(r != ncclSuccess || aborted, std::string("the allreduce with a ") + fault + " peer failed: " +
                                         ncclGetErrorString(r) + " (" + ncclGetLastError(nullptr) + ")");
  check(seconds < 20, "the allreduce returned within 20 s, took " + std::to_string(seconds));
  if (!aborted) must(ncclCommAbort(comm), "ncclCommAbort (after the error)");
  std::printf("rank %d: watchdog (%s): allreduce returned %s after %.1f s; %d checks, %d failed\n", rank, fault.c_str(),
              ncclGetErrorString(r), seconds, g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string scenario = argc > 2 ? argv[1] : "";
  const std::string dir = argc > 2 ? argv[2] : "";
  auto flag = [&](const char* name) {
    for (int i = 3; i < argc; ++i) {
      if (std::strcmp(argv[i], name) == 0) return true;
    }
    return false;
  };
  g_device = flag("device");
  if (scenario == "sequence") return run_sequence(dir);
  if (scenario == "early_exit" && argc > 3) {
    return run_early_exit(dir, flag("kolo") ? kolo_api() : nccl_api(), flag("last_split"));
  }
  if (scenario == "watchdog" && argc > 3) return run_watchdog(dir, argv[3]);
  std::printf("usage: %s sequence DIR [device] | early_exit DIR nccl|kolo [device] [last_split] | watchdog DIR kill|stuck\n", argv[0]);
  return 2;
}
