// One rank of the elastic tests (elastic_test.sh): a world loses a rank, or lets one go, or
// takes one in, and the ranks left go on in a communicator made from the old one.
//   shrink       KOLO_TEST_VICTIM kills itself (SIGKILL) after the first allreduce; the others
//                run allreduces until one fails, then kolo_comm_shrink(NULL) and check the new
//                world (size, order, worker ids, epoch, an allreduce), and print the time
//                from the failure to the first call that worked on the new world.
//   shrink_list  no one dies: the last rank leaves (destroys its communicator), the others
//                shrink with it in the exclude list; the leaver also checks that naming
//                itself is refused.
//   rebuild      KOLO_ELASTIC=1: the victim dies, the survivors wait until a joiner is pending
//                and rebuild; KOLO_TEST_LATE (a rank) comes after KOLO_TIMEOUT and must be
//                refused; the joiner (KOLO_ELASTIC=join, no rank) is let in.
//   shrink_device as shrink, on device buffers (KOLO_DEVICE=emulated): device allreduces
//                queued when the victim dies, the streams released, then a device
//                allreduce on the shrunk world.
//   decider_dies KOLO_ELASTIC=1, 4 ranks: the victim dies, then the rank that decides the
//                rebuild is killed by the test while it waits for the others; a waiter
//                takes over.
//   survive      KOLO_ELASTIC=1: allreduces until one fails (a host cut off by the test),
//                then a rebuild of the ranks left.
// Each rank prints "rank R: ok ..." when its checks pass; exit status 0 then.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kolo/kolo.h"
#include "support/device/device.h"  // the emulated device's copies (libkolo exports them)

namespace {

int g_rank = -1;

[[noreturn]] void die(const char* what, kolo_result_t r) {
  std::fprintf(stderr, "rank %d: %s failed: %s: %s\n", g_rank, what, kolo_result_string(r), kolo_last_error());
  std::exit(1);
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: check failed: %s\n", g_rank, what);
    std::exit(1);
  }
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string worker_id(kolo_comm_t comm) {
  char id[64];
  kolo_result_t r = kolo_comm_worker_id(comm, id, sizeof(id));
  if (r != KOLO_SUCCESS) die("kolo_comm_worker_id", r);
  return id;
}

// Sum over the ranks of (worker-derived value): checks that every member computes alike.
double allreduce_sum(kolo_comm_t comm, double mine) {
  std::vector<double> v(1000, mine), out(1000);
  kolo_result_t r = kolo_allreduce(v.data(), out.data(), v.size(), KOLO_FLOAT64, KOLO_SUM, comm, nullptr);
  if (r != KOLO_SUCCESS) die("allreduce on the new communicator", r);
  for (double x : out) check(x == out[0], "allreduce result differs within the vector");
  return out[0];
}

// Allreduces until one fails (a peer died): the moment of the failure.
double run_until_failure(kolo_comm_t comm, int victim) {
  std::vector<float> v(1 << 16, 1.0f), out(v.size());
  for (int i = 0;; ++i) {
    if (i == 1 && g_rank == victim) {
      std::printf("rank %d: killing itself\n", g_rank);
      std::fflush(stdout);
      ::kill(::getpid(), SIGKILL);
    }
    kolo_result_t r = kolo_allreduce(v.data(), out.data(), v.size(), KOLO_FLOAT32, KOLO_SUM, comm, nullptr);
    if (r != KOLO_SUCCESS) {
      std::printf("rank %d: allreduce %d failed as expected: %s\n", g_rank, i, kolo_result_string(r));
      return now();
    }
    check(i < 100000, "no allreduce failed after the victim's death");
  }
}

// The new world: the old ranks but `gone`, in their order, with their worker ids.
void check_world(kolo_comm_t fresh, int old_rank, const std::vector<int>& gone, int old_size, int epoch) {
  int expected_rank = old_rank;
  for (int g : gone) expected_rank -= g < old_rank ? 1 : 0;
  check(kolo_comm_size(fresh) == old_size - static_cast<int>(gone.size()), "size of the new communicator");
  check(kolo_comm_rank(fresh) == expected_rank, "rank in the new communicator keeps the old order");
  check(worker_id(fresh) == std::to_string(old_rank), "worker id kept");
  check(kolo_comm_epoch(fresh) == epoch, "epoch of the new communicator");
  double expected = 0;
  for (int r = 0; r < old_size; ++r) {
    bool is_gone = false;
    for (int g : gone) is_gone |= g == r;
    if (!is_gone) expected += r;
  }
  check(allreduce_sum(fresh, old_rank) == expected, "allreduce of the old ranks on the new communicator");
}

int shrink(kolo_comm_t world, int size) {
  const int victim = env_int("KOLO_TEST_VICTIM", size - 1);
  const double failed_at = run_until_failure(world, victim);
  kolo_comm_t fresh = nullptr;
  kolo_result_t r = kolo_comm_shrink(world, nullptr, 0, &fresh);
  if (r != KOLO_SUCCESS) die("kolo_comm_shrink", r);
  check_world(fresh, g_rank, {victim}, size, 1);
  std::printf("rank %d: ok shrink: rank %d of %d, %.3f s from the failure to the first call on the new world\n",
              g_rank, kolo_comm_rank(fresh), kolo_comm_size(fresh), now() - failed_at);
  kolo_comm_destroy(fresh);
  kolo_comm_destroy(world);
  return 0;
}

int shrink_list(kolo_comm_t world, int size) {
  const int leaver = size - 1;
  kolo_comm_t fresh = nullptr;
  if (g_rank == leaver) {
    kolo_result_t r = kolo_comm_shrink(world, &g_rank, 1, &fresh);
    check(r == KOLO_ERR_INVALID_USAGE && fresh == nullptr, "a rank naming itself is refused");
    check(std::strstr(kolo_last_error(), "its own exclude list") != nullptr, "the refusal says why");
    kolo_comm_destroy(world);
    std::printf("rank %d: ok shrink_list: left\n", g_rank);
    return 0;
  }
  const int bad[] = {size};
  check(kolo_comm_shrink(world, bad, 1, &fresh) == KOLO_ERR_INVALID_ARGUMENT, "a rank out of range is refused");
  kolo_result_t r = kolo_comm_shrink(world, &leaver, 1, &fresh);
  if (r != KOLO_SUCCESS) die("kolo_comm_shrink", r);
  check_world(fresh, g_rank, {leaver}, size, 1);
  // The shrunk world shrinks again, with no list: nobody is gone, so everyone stays.
  kolo_comm_t again = nullptr;
  r = kolo_comm_shrink(fresh, nullptr, 0, &again);
  if (r != KOLO_SUCCESS) die("the second kolo_comm_shrink", r);
  check(kolo_comm_size(again) == size - 1 && kolo_comm_epoch(again) == 2, "a shrink with no one gone keeps all");
  check(worker_id(again) == std::to_string(g_rank), "worker id kept over two shrinks");
  std::printf("rank %d: ok shrink_list: rank %d of %d\n", g_rank, kolo_comm_rank(fresh), kolo_comm_size(fresh));
  kolo_comm_destroy(again);
  kolo_comm_destroy(fresh);
  kolo_comm_destroy(world);
  return 0;
}

int rebuild(kolo_comm_t world, int size) {
  const int victim = env_int("KOLO_TEST_VICTIM", size - 1);
  const int late = env_int("KOLO_TEST_LATE", -1);
  const double failed_at = run_until_failure(world, victim);
  if (g_rank == late) {  // comes after the others agreed: refused, clearly
    std::this_thread::sleep_for(std::chrono::seconds(env_int("KOLO_TEST_LATE_SECONDS", 6)));
    kolo_comm_t fresh = nullptr;
    kolo_result_t r = kolo_comm_rebuild(world, &fresh);
    if (r != KOLO_ERR_ABORTED || fresh != nullptr) die("a late kolo_comm_rebuild (it should be refused)", r);
    check(std::strstr(kolo_last_error(), "was left out") != nullptr, "the refusal says it was left out");
    std::printf("rank %d: ok rebuild: refused as late: %s\n", g_rank, kolo_last_error());
    kolo_comm_destroy(world);
    return 0;
  }
  // Wait for the joiner the script starts, so that this rebuild lets it in.
  int pending = 0;
  for (int i = 0; i < 3000 && pending == 0; ++i) {
    kolo_result_t r = kolo_comm_pending_joiners(world, &pending);
    if (r != KOLO_SUCCESS) die("kolo_comm_pending_joiners", r);
    if (pending == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  check(pending == 1, "one joiner is pending");
  kolo_comm_t fresh = nullptr;
  kolo_result_t r = kolo_comm_rebuild(world, &fresh);
  if (r != KOLO_SUCCESS) die("kolo_comm_rebuild", r);
  const int left = size - 1 - (late >= 0 ? 1 : 0);
  check(kolo_comm_size(fresh) == left + 1, "the new world: the survivors and the joiner");
  check(kolo_comm_epoch(fresh) == 1, "epoch 1");
  check(worker_id(fresh) == std::to_string(g_rank), "worker id kept");
  int joined = -1;
  check(kolo_comm_pending_joiners(fresh, &joined) == KOLO_SUCCESS && joined == 0, "no joiner pending after");
  double expected = 1000;  // the joiner's
  for (int q = 0; q < size; ++q) expected += (q == victim || q == late) ? 0 : q;
  check(allreduce_sum(fresh, g_rank) == expected, "allreduce of the survivors and the joiner");
  std::printf("rank %d: ok rebuild: rank %d of %d, %.3f s from the failure to the first call on the new world\n",
              g_rank, kolo_comm_rank(fresh), kolo_comm_size(fresh), now() - failed_at);
  kolo_comm_destroy(fresh);
  kolo_comm_destroy(world);
  // Without kolorun the job's store lives in rank 0's process: it stays until the late
  // rank has asked (and been refused).
  if (g_rank == 0 && late >= 0) std::this_thread::sleep_for(std::chrono::seconds(env_int("KOLO_TEST_LATE_SECONDS", 6)));
  return 0;
}

// Device buffers (KOLO_DEVICE=emulated): the victim dies while device allreduces are
// queued on the survivors' streams; each survivor sees the failure (the call or the
// communicator's async error), its stream is released, the old communicator is destroyed
// (draining what was queued), and a device allreduce runs on the shrunk one.
int shrink_device(kolo_comm_t world, int size) {
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  const int victim = env_int("KOLO_TEST_VICTIM", size - 1);
  const size_t n = 1 << 16;
  void* stream = nullptr;
  void* d = nullptr;
  check(dev.stream_create(&stream).ok() && dev.malloc(&d, n * sizeof(float)).ok(), "device set-up");
  std::vector<float> host(n, 1.0f);
  check(dev.memcpy_async(d, host.data(), n * sizeof(float), stream).ok(), "h2d");
  double failed_at = 0;
  for (int i = 0; failed_at == 0; ++i) {
    check(i < 100000, "no device allreduce failed after the victim's death");
    if (i == 1 && g_rank == victim) ::kill(::getpid(), SIGKILL);
    kolo_result_t r = kolo_allreduce(d, d, n, KOLO_FLOAT32, KOLO_SUM, world, stream);
    // The stream is released within KOLO_TIMEOUT whatever happened to the peers.
    const bool drained = dev.stream_synchronize(stream, kolo::Deadline(60)).ok();
    kolo_result_t async = KOLO_SUCCESS;
    check(kolo_comm_get_async_error(world, &async) == KOLO_SUCCESS, "kolo_comm_get_async_error");
    if (r != KOLO_SUCCESS || async != KOLO_SUCCESS || !drained) failed_at = now();
  }
  kolo_comm_t fresh = nullptr;
  kolo_result_t r = kolo_comm_shrink(world, nullptr, 0, &fresh);
  if (r != KOLO_SUCCESS) die("kolo_comm_shrink", r);
  check(kolo_comm_destroy(world) == KOLO_SUCCESS, "destroying the failed communicator drains its queued work");
  for (float& x : host) x = static_cast<float>(g_rank);
  check(dev.memcpy_async(d, host.data(), n * sizeof(float), stream).ok(), "h2d on the new world");
  r = kolo_allreduce(d, d, n, KOLO_FLOAT32, KOLO_SUM, fresh, stream);
  if (r != KOLO_SUCCESS) die("device allreduce on the shrunk communicator", r);
  check(dev.memcpy_async(host.data(), d, n * sizeof(float), stream).ok(), "d2h");
  check(dev.stream_synchronize(stream, kolo::Deadline(60)).ok(), "the new world's device allreduce completes");
  const float expected = static_cast<float>(size * (size - 1) / 2 - victim);
  for (float x : host) check(x == expected, "device allreduce on the shrunk communicator: the survivors' sum");
  std::printf("rank %d: ok shrink_device: rank %d of %d, %.3f s from the failure to the first call on the new world\n",
              g_rank, kolo_comm_rank(fresh), kolo_comm_size(fresh), now() - failed_at);
  kolo_comm_destroy(fresh);
  check(dev.free(d).ok(), "free");
  return 0;
}

// KOLO_ELASTIC=1, no victim: allreduces until one fails (the test cuts a host off), then a
// rebuild of whoever is left; a rank that cannot rebuild (the cut-off one) exits 3.
int survive(kolo_comm_t world, int size) {
  const double failed_at = run_until_failure(world, -1);
  kolo_comm_t fresh = nullptr;
  kolo_result_t r = kolo_comm_rebuild(world, &fresh);
  if (r != KOLO_SUCCESS) {
    std::printf("rank %d: cut off: %s: %s\n", g_rank, kolo_result_string(r), kolo_last_error());
    return 3;
  }
  const int n = kolo_comm_size(fresh);
  check(n < size, "the rebuilt world is smaller");
  check(allreduce_sum(fresh, 1) == n, "allreduce on the rebuilt world");
  std::printf("rank %d: ok survive: rank %d of %d, %.3f s from the failure to the first call on the new world\n",
              g_rank, kolo_comm_rank(fresh), n, now() - failed_at);
  kolo_comm_destroy(fresh);
  kolo_comm_destroy(world);
  return 0;
}

// KOLO_ELASTIC=1: the victim dies; rank 1 calls kolo_comm_rebuild at once and so decides,
// waiting for the others, who come 3 s later; the test kills rank 1 meanwhile. A waiter
// must take over and the world be rebuilt of ranks 0 and 2.
int decider_dies(kolo_comm_t world, int size) {
  const int victim = env_int("KOLO_TEST_VICTIM", size - 1);
  const double failed_at = run_until_failure(world, victim);
  if (g_rank == 1) {
    std::printf("rank 1: rebuilding\n");
    std::fflush(stdout);
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(3));
  }
  kolo_comm_t fresh = nullptr;
  kolo_result_t r = kolo_comm_rebuild(world, &fresh);
  if (r != KOLO_SUCCESS) die("kolo_comm_rebuild", r);
  check(kolo_comm_size(fresh) == size - 2, "the world without the victim and the decider");
  check(allreduce_sum(fresh, g_rank) == (size - 1) * size / 2 - victim - 1, "allreduce of ranks 0 and 2");
  std::printf("rank %d: ok decider_dies: rank %d of %d, %.3f s from the failure to the first call on the new world\n",
              g_rank, kolo_comm_rank(fresh), kolo_comm_size(fresh), now() - failed_at);
  kolo_comm_destroy(fresh);
  kolo_comm_destroy(world);
  return 0;
}

// KOLO_ELASTIC=join: kolo_init returns in the rebuilt world.
int joiner(kolo_comm_t comm) {
  g_rank = kolo_comm_rank(comm);
  check(worker_id(comm) == "j1", "the first joiner's id is j1");
  check(kolo_comm_epoch(comm) == 1, "the joiner comes in at epoch 1");
  check(kolo_comm_rank(comm) == kolo_comm_size(comm) - 1, "the joiner comes last");
  allreduce_sum(comm, 1000);
  std::printf("joiner: ok: rank %d of %d\n", kolo_comm_rank(comm), kolo_comm_size(comm));
  kolo_comm_destroy(comm);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  kolo_comm_t world = nullptr;
  kolo_result_t r = kolo_init(&world);
  if (r != KOLO_SUCCESS) die("kolo_init", r);
  const char* elastic = std::getenv("KOLO_ELASTIC");
  if (elastic && std::strcmp(elastic, "join") == 0) return joiner(world);
  g_rank = kolo_comm_rank(world);
  const int size = kolo_comm_size(world);
  if (scenario == "shrink") return shrink(world, size);
  if (scenario == "shrink_list") return shrink_list(world, size);
  if (scenario == "rebuild") return rebuild(world, size);
  if (scenario == "survive") return survive(world, size);
  if (scenario == "shrink_device") return shrink_device(world, size);
  if (scenario == "decider_dies") return decider_dies(world, size);
  std::fprintf(stderr, "usage: kolo_elastic_worker shrink|shrink_list|rebuild|survive|shrink_device|decider_dies\n");
  return 2;
}
