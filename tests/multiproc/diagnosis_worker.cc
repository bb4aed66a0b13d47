// One rank of the diagnosis scenarios (tests/multiproc/diagnosis_test.sh, issue 49): runs
// allreduces in a loop, with one rank made to misbehave, and prints what each call's error
// said and how long the call waited.
//   DIAG_CALLS        allreduces to run (default 20), of DIAG_COUNT floats (default 1024)
//   DIAG_STUCK_RANK   this rank stops calling after DIAG_STUCK_AFTER calls: it stays alive
//                     (sleeping DIAG_STUCK_SECONDS, default 30) and then exits 0
//   DIAG_LATE_RANK    this rank sleeps DIAG_LATE_MS before every call (a straggler)
//   DIAG_DUMP         1: kolo_comm_dump(comm, NULL) after the last call (the job did not fail)
//   DIAG_DEVICE       1: the allreduces on device buffers (kolo_mem_alloc; KOLO_DEVICE=emulated
//                     without a GPU), each followed by a barrier, which waits for it
//   DIAG_LINGER_MS    after a failed call, wait this long before exiting (default 1000)
// Prints, on a failed call: "rank R: call K failed after S s: <kolo_last_error()>".
// Exit status: 0 = every call ran, 1 = a call failed (the error printed), 2 = set-up failed.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "kolo/kolo.h"

namespace {

int env_or(const char* name, int fallback) {
  const char* value = std::getenv(name);  // env-table: exempt (the test's own variables)
  return value != nullptr && *value != '\0' ? std::atoi(value) : fallback;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main() {
  kolo_comm_t comm = nullptr;
  if (kolo_init(&comm) != KOLO_SUCCESS) {
    std::fprintf(stderr, "kolo_init failed: %s\n", kolo_last_error());
    return 2;
  }
  const int rank = kolo_comm_rank(comm);
  const int calls = env_or("DIAG_CALLS", 20);
  const size_t count = static_cast<size_t>(env_or("DIAG_COUNT", 1024));
  const int stuck_rank = env_or("DIAG_STUCK_RANK", -1), stuck_after = env_or("DIAG_STUCK_AFTER", 5);
  const int late_rank = env_or("DIAG_LATE_RANK", -1), late_ms = env_or("DIAG_LATE_MS", 20);
  std::vector<float> host_send(count, 1.0f), host_recv(count);
  void* send = host_send.data();
  void* recv = host_recv.data();
  const bool device = env_or("DIAG_DEVICE", 0) == 1;
  if (device && (kolo_mem_alloc(&send, count * sizeof(float)) != KOLO_SUCCESS ||
                 kolo_mem_alloc(&recv, count * sizeof(float)) != KOLO_SUCCESS)) {
    std::fprintf(stderr, "kolo_mem_alloc failed: %s\n", kolo_last_error());
    return 2;
  }
  for (int call = 1; call <= calls; ++call) {
    if (rank == stuck_rank && call > stuck_after) {
      std::printf("rank %d: stuck before call %d\n", rank, call);
      std::fflush(stdout);
      std::this_thread::sleep_for(std::chrono::seconds(env_or("DIAG_STUCK_SECONDS", 30)));
      std::_Exit(0);  // alive all along; leaves without a word to the others
    }
    if (rank == late_rank) std::this_thread::sleep_for(std::chrono::milliseconds(late_ms));
    const auto start = std::chrono::steady_clock::now();
    if (kolo_allreduce(send, recv, count, KOLO_FLOAT32, KOLO_SUM, comm, nullptr) != KOLO_SUCCESS ||
        (device && kolo_barrier(comm) != KOLO_SUCCESS)) {
      std::printf("rank %d: call %d failed after %.2f s: %s\n", rank, call, seconds_since(start), kolo_last_error());
      std::fflush(stdout);
      kolo_comm_destroy(comm);
      // kolorun --no-trace stops the job at the first rank that exits failed; a moment here
      // lets every survivor print its own error, which is what the tests read.
      std::this_thread::sleep_for(std::chrono::milliseconds(env_or("DIAG_LINGER_MS", 1000)));
      return 1;
    }
  }
  if (env_or("DIAG_DUMP", 0) == 1 && kolo_comm_dump(comm, nullptr) != KOLO_SUCCESS) {
    std::fprintf(stderr, "rank %d: kolo_comm_dump: %s\n", rank, kolo_last_error());
  }
  kolo_comm_destroy(comm);
  return 0;
}
