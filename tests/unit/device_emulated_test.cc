// The emulated device (support/device/emulated_device.cc): memory that pointer_info knows,
// FIFO streams, events across streams, host functions, kernel launches block by block,
// IPC between processes, and waits that end at their deadline instead of hanging.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "support/device/device.h"

namespace kolo::device {
namespace {

const DeviceOps& emu() { return emulated_ops(); }

TEST(DeviceEmulated, MemoryKindsAreKnown) {
  void* d = nullptr;
  void* h = nullptr;
  ASSERT_TRUE(emu().malloc(&d, 1000).ok());
  ASSERT_TRUE(emu().host_alloc(&h, 100).ok());
  int local = 0;
  EXPECT_EQ(emu().pointer_info(d).kind, MemoryKind::kDevice);
  EXPECT_EQ(emu().pointer_info(static_cast<char*>(d) + 999).kind, MemoryKind::kDevice);
  EXPECT_EQ(emu().pointer_info(h).kind, MemoryKind::kPinnedHost);
  EXPECT_EQ(emu().pointer_info(&local).kind, MemoryKind::kHost);
  Status wrong = emu().free(h);  // pinned memory through the device free
  EXPECT_EQ(wrong.code(), Code::kInvalidArgument) << wrong.message();
  EXPECT_TRUE(emu().free(d).ok());
  EXPECT_TRUE(emu().host_free(h).ok());
  EXPECT_EQ(emu().pointer_info(d).kind, MemoryKind::kHost);
  EXPECT_EQ(emu().free(d).code(), Code::kInvalidArgument);  // twice
}

TEST(DeviceEmulated, AllocationsBelongToTheCurrentDevice) {
  ASSERT_TRUE(emu().set_device(3).ok());
  void* d = nullptr;
  ASSERT_TRUE(emu().malloc(&d, 64).ok());
  EXPECT_EQ(emu().pointer_info(d).device, 3);
  EXPECT_EQ(emu().current_device().value(), 3);
  EXPECT_EQ(emu().set_device(emu().device_count()).code(), Code::kInvalidArgument);
  EXPECT_TRUE(emu().free(d).ok());
  ASSERT_TRUE(emu().set_device(0).ok());
}

TEST(DeviceEmulated, StreamRunsWorkInOrder) {
  void* stream = nullptr;
  ASSERT_TRUE(emu().stream_create(&stream).ok());
  void* d = nullptr;
  ASSERT_TRUE(emu().malloc(&d, 4096).ok());
  std::vector<char> out(4096, 0);
  std::vector<char> in(4096);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<char>(i * 7);
  ASSERT_TRUE(emu().memset_async(d, 0x5a, 4096, stream).ok());
  ASSERT_TRUE(emu().memcpy_async(d, in.data(), 2048, stream).ok());
  ASSERT_TRUE(emu().memcpy_async(out.data(), d, 4096, stream).ok());
  ASSERT_TRUE(emu().stream_synchronize(stream, Deadline(10)).ok());
  EXPECT_EQ(std::memcmp(out.data(), in.data(), 2048), 0);
  EXPECT_EQ(out[2048], 0x5a);
  EXPECT_EQ(out[4095], 0x5a);
  EXPECT_TRUE(emu().free(d).ok());
  EXPECT_TRUE(emu().stream_destroy(stream).ok());
}

std::atomic<bool> gate{false};
void wait_for_gate(void*) {
  while (!gate.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}
void set_flag(void* flag) { static_cast<std::atomic<int>*>(flag)->store(1); }

// Holds a stream on the device until released from the host (a blocking host function
// would hold every stream's host functions back: one thread runs them all, as in CUDA).
class Held {
 public:
  Held() {
    EXPECT_TRUE(emu().host_alloc(reinterpret_cast<void**>(&word_), sizeof(uint32_t)).ok());
    *word_ = 0;
  }
  ~Held() { (void)emu().host_free(word_); }
  Status hold(void* stream) { return emu().wait_value(stream, word_, 1); }
  void release() { __atomic_store_n(word_, 1, __ATOMIC_RELEASE); }

 private:
  uint32_t* word_ = nullptr;
};

TEST(DeviceEmulated, EventOrdersTwoStreamsAndStreamsDoNotWaitForEachOther) {
  void *a = nullptr, *b = nullptr, *c = nullptr, *event = nullptr;
  ASSERT_TRUE(emu().stream_create(&a).ok());
  ASSERT_TRUE(emu().stream_create(&b).ok());
  ASSERT_TRUE(emu().stream_create(&c).ok());
  ASSERT_TRUE(emu().event_create(&event).ok());
  EXPECT_TRUE(emu().event_query(event).value());  // never recorded: complete
  Held held;
  std::atomic<int> after_wait{0}, independent{0};
  ASSERT_TRUE(held.hold(a).ok());
  ASSERT_TRUE(emu().event_record(event, a).ok());
  ASSERT_TRUE(emu().stream_wait_event(b, event).ok());
  ASSERT_TRUE(emu().launch_host_func(b, set_flag, &after_wait).ok());
  ASSERT_TRUE(emu().launch_host_func(c, set_flag, &independent).ok());
  // c does not wait for a; b does, through the event.
  ASSERT_TRUE(emu().stream_synchronize(c, Deadline(10)).ok());
  EXPECT_EQ(independent.load(), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(after_wait.load(), 0);
  EXPECT_FALSE(emu().event_query(event).value());
  held.release();
  ASSERT_TRUE(emu().event_synchronize(event, Deadline(10)).ok());
  ASSERT_TRUE(emu().stream_synchronize(b, Deadline(10)).ok());
  EXPECT_EQ(after_wait.load(), 1);
  EXPECT_TRUE(emu().event_query(event).value());
  for (void* s : {a, b, c}) EXPECT_TRUE(emu().stream_destroy(s).ok());
  EXPECT_TRUE(emu().event_destroy(event).ok());
}

// As CUDA allows: an event destroyed while its record and a stream's wait on it are still
// queued (the runtime frees a request's ready event once the request is done, which may
// be before its producer stream reached the record). The queued work still runs, in order.
TEST(DeviceEmulated, EventDestroyedWhileItsRecordAndWaitAreQueued) {
  void *a = nullptr, *b = nullptr, *event = nullptr;
  ASSERT_TRUE(emu().stream_create(&a).ok());
  ASSERT_TRUE(emu().stream_create(&b).ok());
  ASSERT_TRUE(emu().event_create(&event).ok());
  Held held;
  std::atomic<int> after_wait{0};
  ASSERT_TRUE(held.hold(a).ok());
  ASSERT_TRUE(emu().event_record(event, a).ok());
  ASSERT_TRUE(emu().stream_wait_event(b, event).ok());
  ASSERT_TRUE(emu().launch_host_func(b, set_flag, &after_wait).ok());
  EXPECT_TRUE(emu().event_destroy(event).ok());  // record and wait still queued
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(after_wait.load(), 0);  // b still waits for a's record
  held.release();
  ASSERT_TRUE(emu().stream_synchronize(a, Deadline(10)).ok());
  ASSERT_TRUE(emu().stream_synchronize(b, Deadline(10)).ok());
  EXPECT_EQ(after_wait.load(), 1);
  for (void* s : {a, b}) EXPECT_TRUE(emu().stream_destroy(s).ok());
}

TEST(DeviceEmulated, WaitsEndAtTheirDeadline) {
  void *a = nullptr, *event = nullptr;
  ASSERT_TRUE(emu().stream_create(&a).ok());
  ASSERT_TRUE(emu().event_create(&event).ok());
  gate = false;
  ASSERT_TRUE(emu().launch_host_func(a, wait_for_gate, nullptr).ok());
  ASSERT_TRUE(emu().event_record(event, a).ok());
  const auto start = std::chrono::steady_clock::now();
  Status s = emu().event_synchronize(event, Deadline(0.2));
  EXPECT_EQ(s.code(), Code::kTimeout) << s.message();
  s = emu().stream_synchronize(a, Deadline(0.2));
  EXPECT_EQ(s.code(), Code::kTimeout) << s.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  gate = true;
  EXPECT_TRUE(emu().stream_synchronize(a, Deadline(10)).ok());
  EXPECT_TRUE(emu().stream_destroy(a).ok());
  EXPECT_TRUE(emu().event_destroy(event).ok());
}

TEST(DeviceEmulated, StreamWaitingOnAnEventThatNeverComesIsReleasedWithAnError) {
  // The worker's own wait uses KOLO_TIMEOUT; a stream must not be held forever.
  setenv("KOLO_TIMEOUT", "1", 1);
  void *a = nullptr, *b = nullptr, *event = nullptr;
  ASSERT_TRUE(emu().stream_create(&a).ok());
  ASSERT_TRUE(emu().stream_create(&b).ok());
  ASSERT_TRUE(emu().event_create(&event).ok());
  gate = false;
  std::atomic<int> skipped{0};
  ASSERT_TRUE(emu().launch_host_func(a, wait_for_gate, nullptr).ok());
  ASSERT_TRUE(emu().event_record(event, a).ok());
  ASSERT_TRUE(emu().stream_wait_event(b, event).ok());
  ASSERT_TRUE(emu().launch_host_func(b, set_flag, &skipped).ok());
  Status s = emu().stream_synchronize(b, Deadline(10));
  EXPECT_EQ(s.code(), Code::kTimeout) << s.message();
  EXPECT_EQ(skipped.load(), 0);  // work after the failure does not run: the stream is broken
  unsetenv("KOLO_TIMEOUT");
  gate = true;
  EXPECT_TRUE(emu().stream_synchronize(a, Deadline(10)).ok());
  EXPECT_EQ(emu().stream_destroy(b).code(), Code::kTimeout);  // the sticky error again
  EXPECT_TRUE(emu().stream_destroy(a).ok());
  EXPECT_TRUE(emu().event_destroy(event).ok());
}

struct FillArgs {
  int* out;
  size_t n;
};
// A kernel body as kernels/ write them: one block of `block` threads, grid-stride.
void fill_body(const void* raw, unsigned block_index, unsigned grid, unsigned block) {
  FillArgs a;
  std::memcpy(&a, raw, sizeof(a));
  for (unsigned t = 0; t < block; ++t) {
    for (size_t i = size_t{block_index} * block + t; i < a.n; i += size_t{grid} * block) a.out[i] = static_cast<int>(i) + 1;
  }
}

TEST(DeviceEmulated, LaunchRunsEveryBlockWithItsGridStride) {
  void* d = nullptr;
  const size_t n = 1000;  // more than grid * block: the stride loop runs several times
  ASSERT_TRUE(emu().malloc(&d, n * sizeof(int)).ok());
  ASSERT_TRUE(emu().memset_async(d, 0, n * sizeof(int), nullptr).ok());
  FillArgs args{static_cast<int*>(d), n};
  Launch launch;
  launch.grid = 3;
  launch.block = 32;
  launch.args = &args;
  launch.args_bytes = sizeof(args);
  launch.emulated = fill_body;
  ASSERT_TRUE(emu().launch(launch, nullptr).ok());
  args.n = 0;  // the launch copied its arguments
  ASSERT_TRUE(emu().stream_synchronize(nullptr, Deadline(10)).ok());
  const int* out = static_cast<const int*>(d);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], static_cast<int>(i) + 1) << i;
  launch.emulated = nullptr;
  EXPECT_EQ(emu().launch(launch, nullptr).code(), Code::kInvalidArgument);
  EXPECT_TRUE(emu().free(d).ok());
}

TEST(DeviceEmulated, IpcSharesAnAllocationWithAnotherProcess) {
  void* d = nullptr;
  ASSERT_TRUE(emu().malloc(&d, 1 << 16).ok());
  std::memset(d, 0x11, 1 << 16);
  IpcHandle handle;
  ASSERT_TRUE(emu().ipc_export(d, &handle).ok());
  EXPECT_EQ(emu().ipc_export(static_cast<char*>(d) + 8, &handle).code(), Code::kInvalidArgument);
  ASSERT_TRUE(emu().ipc_export(d, &handle).ok());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    void* mapped = nullptr;
    if (!emu().ipc_import(handle, &mapped).ok()) _exit(2);
    if (emu().pointer_info(mapped).kind != MemoryKind::kDevice) _exit(3);
    unsigned char* p = static_cast<unsigned char*>(mapped);
    if (p[0] != 0x11 || p[(1 << 16) - 1] != 0x11) _exit(4);
    p[100] = 0x77;  // the parent sees it: the same memory
    if (!emu().ipc_close(mapped).ok()) _exit(5);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(static_cast<unsigned char*>(d)[100], 0x77);
  IpcHandle bogus;
  void* nothing = nullptr;
  EXPECT_EQ(emu().ipc_import(bogus, &nothing).code(), Code::kInvalidArgument);
  // A handle claiming more memory than the allocation holds is refused, not mapped.
  IpcHandle inflated = handle;
  const uint64_t huge = uint64_t{1} << 40;
  std::memcpy(inflated.bytes + 24, &huge, sizeof(huge));  // the size field of the handle
  Status s = emu().ipc_import(inflated, &nothing);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.message();
  EXPECT_TRUE(emu().free(d).ok());
}

TEST(DeviceEmulated, ChosenByKoloDevice) {
  // The choice is made once per process: look at it in a fresh one (the threadsafe death
  // test style re-runs this binary for the child, so no earlier choice is inherited).
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("KOLO_DEVICE", "emulated", 1);
        std::exit(std::strcmp(runtime().name, "emulated") == 0 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace kolo::device
