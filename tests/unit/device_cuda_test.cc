// The cuda backend of the device runtime, as far as a machine without a GPU can check it
// (presence, the table, how KOLO_DEVICE=cuda fails, clean errors with no driver), and a
// small round trip through every op class where a GPU is present (tools/gpu-check.sh).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "support/device/device.h"

namespace kolo::device {
namespace {

// Whether kolo was built with nvcc, as CMake says (tests/CMakeLists.txt); the headers
// on the include path cannot tell, since nccl.h's directory may hold CUDA's too.
#if KOLO_CUDA_BUILD
constexpr bool kCudaBuild = true;
#else
constexpr bool kCudaBuild = false;
#endif

bool have_gpu() { return cuda_ops() != nullptr && cuda_present(); }

// runtime() decides once per process, and this process may have decided already (an API
// test asked who owns a buffer): run `body` in a fresh process, with KOLO_DEVICE=value.
// gtest's "threadsafe" death tests fork and re-exec this binary, so the child's choice is
// its own; `body` reports by its exit code (0 = as expected) and what it wrote on stderr
// must match `stderr_regex`.
template <class Body>
void expect_in_child_with_device(const char* value, Body body, const char* stderr_regex = "") {
  const std::string style = GTEST_FLAG_GET(death_test_style);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("KOLO_DEVICE", value, 1);
        _exit(body());
      },
      testing::ExitedWithCode(0), stderr_regex)
      << "KOLO_DEVICE=" << value;
  GTEST_FLAG_SET(death_test_style, style);
}

int expect_refusal(Code code, const char* fragment) {
  void* p = nullptr;
  const Status s = runtime().malloc(&p, 64);
  fprintf(stderr, "malloc under KOLO_DEVICE=%s: %s\n", getenv("KOLO_DEVICE"), s.to_string().c_str());
  if (s.code() != code) return 1;
  if (s.message().find(fragment) == std::string::npos) return 2;
  if (runtime().device_count() != 0) return 3;
  if (runtime().pointer_info(&p).kind != MemoryKind::kHost) return 4;
  return 0;
}

TEST(DeviceCuda, TableMatchesTheBuild) {
  if (!kCudaBuild) {
    EXPECT_EQ(cuda_ops(), nullptr) << "a build without CUDA has no cuda backend";
    EXPECT_FALSE(cuda_present());
    GTEST_SKIP() << "kolo was built without CUDA";
  }
  ASSERT_NE(cuda_ops(), nullptr);
  EXPECT_STREQ(cuda_ops()->name, "cuda");
}

TEST(DeviceCuda, PresenceIsQuietAndStable) {
  // A CPU machine (no libcuda.so.1) says no; asking twice gives the same answer.
  const bool present = cuda_present();
  EXPECT_EQ(cuda_present(), present);
  if (access("/dev/nvidiactl", F_OK) != 0) EXPECT_FALSE(present) << "no NVIDIA device node, yet a GPU was found";
}

TEST(DeviceCuda, PointerInfoOfHostMemoryIsHost) {
  if (cuda_ops() == nullptr) GTEST_SKIP() << "kolo was built without CUDA";
  int on_stack = 0;
  std::vector<char> on_heap(4096);
  for (const void* p : {static_cast<const void*>(&on_stack), static_cast<const void*>(on_heap.data()),
                        static_cast<const void*>(nullptr)}) {
    const PointerInfo info = cuda_ops()->pointer_info(p);
    EXPECT_EQ(info.kind, MemoryKind::kHost) << p;
    EXPECT_EQ(info.device, -1) << p;
  }
}

TEST(DeviceCuda, OpsFailCleanlyWithoutADriver) {
  if (cuda_ops() == nullptr) GTEST_SKIP() << "kolo was built without CUDA";
  if (cuda_present()) GTEST_SKIP() << "a GPU is present: DeviceCuda.RoundTrip covers the ops";
  const DeviceOps& ops = *cuda_ops();
  EXPECT_EQ(ops.device_count(), 0);
  void* p = nullptr;
  const Status s = ops.malloc(&p, 1 << 20);
  EXPECT_EQ(s.code(), Code::kSystem) << s.to_string();
  EXPECT_NE(s.message().find("cudaMalloc(1048576 bytes)"), std::string::npos) << s.message();
  void* stream = nullptr;
  EXPECT_FALSE(ops.stream_create(&stream).ok());
  const Status launch = ops.launch(Launch{}, nullptr);
  EXPECT_EQ(launch.code(), Code::kInvalidArgument) << launch.to_string();
}

TEST(DeviceCudaEnv, CudaWithoutAGpuIsAClearError) {
  if (have_gpu()) {
    expect_in_child_with_device("cuda", [] {
      void* p = nullptr;
      const Status s = runtime().malloc(&p, 64);
      fprintf(stderr, "%s\n", s.to_string().c_str());
      if (!s.ok() || std::strcmp(runtime().name, "cuda") != 0) return 1;
      return runtime().free(p).ok() ? 0 : 2;
    });
    return;
  }
  expect_in_child_with_device("cuda", [] { return expect_refusal(Code::kUnsupported, "KOLO_DEVICE=cuda"); },
                              "unsupported: KOLO_DEVICE=cuda but");
}

TEST(DeviceCudaEnv, UnknownValueIsInvalidArgument) {
  expect_in_child_with_device("bogus", [] { return expect_refusal(Code::kInvalidArgument, "'bogus'"); },
                              "KOLO_DEVICE='bogus'");
}

// ---- with a GPU -------------------------------------------------------------------------

std::atomic<int> g_host_func_calls{0};

TEST(DeviceCuda, RoundTrip) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU (no CUDA driver or device on this machine): the cuda ops are unchecked";
  const DeviceOps& ops = *cuda_ops();
  ASSERT_GT(ops.device_count(), 0);
  ASSERT_TRUE(ops.set_device(0).ok());
  Result<int> current = ops.current_device();
  ASSERT_TRUE(current.ok()) << current.status().to_string();
  EXPECT_EQ(current.value(), 0);

  constexpr size_t kBytes = 1 << 20;
  void *dev = nullptr, *dev2 = nullptr, *pinned = nullptr, *stream = nullptr, *other = nullptr, *event = nullptr;
  ASSERT_TRUE(ops.malloc(&dev, kBytes).ok());
  ASSERT_TRUE(ops.malloc(&dev2, kBytes).ok());
  ASSERT_TRUE(ops.host_alloc(&pinned, kBytes).ok());
  ASSERT_TRUE(ops.stream_create(&stream).ok());
  ASSERT_TRUE(ops.stream_create(&other).ok());
  ASSERT_TRUE(ops.event_create(&event).ok());

  EXPECT_EQ(ops.pointer_info(dev).kind, MemoryKind::kDevice);
  EXPECT_EQ(ops.pointer_info(dev).device, 0);
  EXPECT_EQ(ops.pointer_info(static_cast<char*>(dev) + 100).kind, MemoryKind::kDevice);
  EXPECT_EQ(ops.pointer_info(pinned).kind, MemoryKind::kPinnedHost);
  int local = 0;
  EXPECT_EQ(ops.pointer_info(&local).kind, MemoryKind::kHost);

  // memset on one stream, then (ordered by an event) copy device -> device -> pinned host
  // on another, and a host function after it.
  const Deadline deadline(30);
  ASSERT_TRUE(ops.memset_async(dev, 0x5a, kBytes, stream).ok());
  ASSERT_TRUE(ops.event_record(event, stream).ok());
  ASSERT_TRUE(ops.stream_wait_event(other, event).ok());
  ASSERT_TRUE(ops.memcpy_async(dev2, dev, kBytes, other).ok());
  ASSERT_TRUE(ops.memcpy_async(pinned, dev2, kBytes, other).ok());
  g_host_func_calls = 0;
  ASSERT_TRUE(ops.launch_host_func(other, [](void*) { g_host_func_calls++; }, nullptr).ok());
  Status synced = ops.event_synchronize(event, deadline);
  ASSERT_TRUE(synced.ok()) << synced.to_string();
  Result<bool> done = ops.event_query(event);
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(done.value());
  synced = ops.stream_synchronize(other, deadline);
  ASSERT_TRUE(synced.ok()) << synced.to_string();
  EXPECT_EQ(g_host_func_calls.load(), 1);
  const auto* bytes = static_cast<const unsigned char*>(pinned);
  EXPECT_EQ(bytes[0], 0x5a);
  EXPECT_EQ(bytes[kBytes - 1], 0x5a);

  // An IPC handle exports (importing needs another process: the multi-process GPU tests).
  IpcHandle handle;
  EXPECT_TRUE(ops.ipc_export(dev, &handle).ok());
  // A kernel with no CUDA body is refused, not called.
  EXPECT_EQ(ops.launch(Launch{}, stream).code(), Code::kInvalidArgument);
  // A bad free says which call failed.
  const Status bad = ops.free(reinterpret_cast<void*>(0x10));
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("cudaFree"), std::string::npos) << bad.message();

  EXPECT_TRUE(ops.event_destroy(event).ok());
  EXPECT_TRUE(ops.stream_destroy(other).ok());
  EXPECT_TRUE(ops.stream_destroy(stream).ok());
  EXPECT_TRUE(ops.host_free(pinned).ok());
  EXPECT_TRUE(ops.free(dev2).ok());
  EXPECT_TRUE(ops.free(dev).ok());
}

}  // namespace
}  // namespace kolo::device
