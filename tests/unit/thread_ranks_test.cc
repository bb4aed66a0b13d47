// Several ranks as threads of one process (as nccl-tests' -t; NCCL refuses two ranks on one
// GPU), each with its own communicator and stream, on the emulated device: device
// collectives through the device_ipc path (peers of one process share the address space,
// no IPC handle) and through staging give the right results, repeatedly.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kolo/kolo.h"
#include "support/device/device.h"

namespace {

// One rank: allreduce (small: one-shot; large: two-shot in chunks) and allgather of device
// buffers, checked. Returns an empty string or what went wrong.
std::string rank_main(const kolo_unique_id& id, int n, int me) {
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  kolo_comm_t comm = nullptr;
  if (kolo_comm_init_rank(&comm, n, &id, me) != KOLO_SUCCESS) return std::string("init: ") + kolo_last_error();
  void* stream = nullptr;
  if (!dev.stream_create(&stream).ok()) return "stream_create";
  std::string why;
  for (size_t count : {size_t{1000}, size_t{3} << 20}) {  // 4 KB and 12 MB of floats
    void* d = nullptr;
    void* g = nullptr;
    if (!dev.malloc(&d, count * sizeof(float)).ok() || !dev.malloc(&g, n * 16 * sizeof(float)).ok()) return "malloc";
    std::vector<float> host(count, static_cast<float>(me + 1)), out(count, -1), gathered(n * 16, -1);
    for (int round = 0; round < 3 && why.empty(); ++round) {
      if (!dev.memcpy_async(d, host.data(), count * sizeof(float), stream).ok()) return "h2d";
      if (kolo_allreduce(d, d, count, KOLO_FLOAT32, KOLO_SUM, comm, stream) != KOLO_SUCCESS) {
        return std::string("allreduce: ") + kolo_last_error();
      }
      if (kolo_allgather(d, g, 16, KOLO_FLOAT32, comm, stream) != KOLO_SUCCESS) {
        return std::string("allgather: ") + kolo_last_error();
      }
      if (!dev.memcpy_async(out.data(), d, count * sizeof(float), stream).ok()) return "d2h";
      if (!dev.memcpy_async(gathered.data(), g, gathered.size() * sizeof(float), stream).ok()) return "d2h";
      if (!dev.stream_synchronize(stream, kolo::Deadline(60)).ok()) return "sync";
      const float sum = static_cast<float>(n * (n + 1) / 2);
      if (out[0] != sum || out[count - 1] != sum) why = "allreduce result " + std::to_string(out[count - 1]);
      for (float v : gathered) {
        if (v != sum) why = "allgather result " + std::to_string(v);
      }
    }
    (void)dev.free(d);
    (void)dev.free(g);
  }
  kolo_result_t async = KOLO_ERR_INTERNAL;
  if (kolo_comm_get_async_error(comm, &async) != KOLO_SUCCESS || async != KOLO_SUCCESS) why += " async error";
  (void)dev.stream_destroy(stream);
  if (kolo_comm_destroy(comm) != KOLO_SUCCESS) why += std::string(" destroy: ") + kolo_last_error();
  return why;
}

void run_threads(int n, const char* ipc) {
  for (const char* v : {"KOLO_RANK", "KOLO_SIZE", "KOLO_ADDR", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}) unsetenv(v);
  setenv("KOLO_DEVICE", "emulated", 1);
  setenv("KOLO_DEVICE_IPC", ipc, 1);
  setenv("KOLO_TIMEOUT", "60", 1);
  kolo_unique_id id;
  if (kolo_get_unique_id(&id) != KOLO_SUCCESS) std::exit(2);
  std::vector<std::string> why(n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) ranks.emplace_back([&, r] { why[r] = rank_main(id, n, r); });
  for (std::thread& t : ranks) t.join();
  int bad = 0;
  for (int r = 0; r < n; ++r) {
    if (!why[r].empty()) std::fprintf(stderr, "rank %d: %s\n", r, why[r].c_str()), ++bad;
  }
  std::exit(bad == 0 ? 0 : 1);
}

// Each in a fresh process: the device runtime is chosen once per process.
TEST(ThreadRanks, DeviceCollectivesThroughIpcKernels) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (int n : {2, 3}) EXPECT_EXIT(run_threads(n, "1"), ::testing::ExitedWithCode(0), "") << n << " thread ranks";
}

TEST(ThreadRanks, DeviceCollectivesStaged) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(run_threads(3, "0"), ::testing::ExitedWithCode(0), "");
}

}  // namespace
