// The emulated device fails where CUDA fails (support/device/emulated_device.cc): these are
// the behaviours of CUDA that kolo's device path depends on, each checked on the emulated
// device so that a design CUDA does not support fails in CI, not first on a GPU:
//   - one host-function thread per process, shared by every stream;
//   - allocation, freeing and instantiating a graph synchronise the device implicitly;
//   - a full stream blocks the enqueueing thread;
//   - what CUDA forbids during a stream capture fails and invalidates the capture;
//   - stream memory operations (wait_value / write_value) hold and release a stream on the
//     device, with no host function;
//   - an allocation has an id that a later one at the same address does not share.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "support/device/device.h"

namespace kolo::device {
namespace {

const DeviceOps& emu() { return emulated_ops(); }

using Clock = std::chrono::steady_clock;

std::atomic<bool> gate{false};
void wait_for_gate(void*) {
  while (!gate.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}
struct Seen {
  std::atomic<int> runs{0};
  std::atomic<std::thread::id> thread{};
};
void note_thread(void* p) {
  auto* seen = static_cast<Seen*>(p);
  seen->thread.store(std::this_thread::get_id());
  seen->runs.fetch_add(1);
}

// Waits up to `ms` for `done`; true if it came.
template <class F>
bool within(int ms, F done) {
  const auto end = Clock::now() + std::chrono::milliseconds(ms);
  while (Clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return done();
}

TEST(DeviceCudaSemantics, HostFunctionsOfAllStreamsRunOnOneThreadAndABlockedOneBlocksTheOthers) {
  void *a = nullptr, *b = nullptr, *c = nullptr;
  ASSERT_TRUE(emu().stream_create(&a).ok());
  ASSERT_TRUE(emu().stream_create(&b).ok());
  ASSERT_TRUE(emu().stream_create(&c).ok());
  gate = false;
  Seen on_b, on_c;
  ASSERT_TRUE(emu().launch_host_func(a, wait_for_gate, nullptr).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a's is running
  ASSERT_TRUE(emu().launch_host_func(b, note_thread, &on_b).ok());
  ASSERT_TRUE(emu().launch_host_func(c, note_thread, &on_c).ok());
  // b and c have nothing else queued, yet their host functions wait for a's.
  EXPECT_FALSE(within(300, [&] { return on_b.runs.load() + on_c.runs.load() > 0; }));
  gate = true;
  EXPECT_TRUE(within(5000, [&] { return on_b.runs.load() == 1 && on_c.runs.load() == 1; }));
  EXPECT_EQ(on_b.thread.load(), on_c.thread.load());  // one thread for all streams
  EXPECT_NE(on_b.thread.load(), std::this_thread::get_id());
  for (void* s : {a, b, c}) EXPECT_TRUE(emu().stream_destroy(s).ok());
}

void try_runtime_call(void* p) {
  void* d = nullptr;
  *static_cast<Status*>(p) = emu().malloc(&d, 64);
}

TEST(DeviceCudaSemantics, HostFunctionsMayNotCallTheRuntime) {
  void* s = nullptr;
  ASSERT_TRUE(emu().stream_create(&s).ok());
  Status inside;
  ASSERT_TRUE(emu().launch_host_func(s, try_runtime_call, &inside).ok());
  ASSERT_TRUE(emu().stream_synchronize(s, Deadline(10)).ok());
  EXPECT_EQ(inside.code(), Code::kInvalidArgument) << inside.message();
  EXPECT_NE(inside.message().find("host function"), std::string::npos) << inside.message();
  EXPECT_TRUE(emu().stream_destroy(s).ok());
}

// One allocation call of the runtime's, by name.
Status allocation_call(const std::string& which) {
  void* p = nullptr;
  if (which == "malloc") {
    KOLO_TRY(emu().malloc(&p, 4096));
    return Status();
  }
  if (which == "host_alloc") {
    KOLO_TRY(emu().host_alloc(&p, 4096));
    return Status();
  }
  if (which == "end_capture") {  // instantiating a graph, captured on a stream of its own
    void *s = nullptr, *graph = nullptr;
    KOLO_TRY(emu().stream_create(&s));
    KOLO_TRY(emu().stream_begin_capture(s));
    Status ended = emu().stream_end_capture(s, &graph);
    if (ended.ok()) (void)emu().graph_destroy(graph);
    (void)emu().stream_destroy(s);
    return ended;
  }
  return error(Code::kInternal, "no call ", which);
}

// Instantiating a captured graph too: on an H200, thread-ranks that launched their graphs
// while a peer still instantiated its own deadlocked until KOLO_TIMEOUT.
TEST(DeviceCudaSemantics, AllocationFreeingAndInstantiationWaitForAllQueuedWork) {
  for (const std::string which : {"malloc", "free", "host_alloc", "host_free", "end_capture"}) {
    SCOPED_TRACE(which);
    void *d = nullptr, *h = nullptr, *s = nullptr;
    ASSERT_TRUE(emu().malloc(&d, 4096).ok());
    ASSERT_TRUE(emu().host_alloc(&h, 4096).ok());
    ASSERT_TRUE(emu().stream_create(&s).ok());
    gate = false;
    ASSERT_TRUE(emu().launch_host_func(s, wait_for_gate, nullptr).ok());
    std::atomic<bool> returned{false};
    Status result;
    std::thread caller([&] {
      if (which == "free") {
        result = emu().free(d);
      } else if (which == "host_free") {
        result = emu().host_free(h);
      } else {
        result = allocation_call(which);
      }
      returned = true;
    });
    EXPECT_FALSE(within(300, [&] { return returned.load(); }));  // the stream is still busy
    gate = true;
    caller.join();
    EXPECT_TRUE(result.ok()) << result.message();
    if (which != "free") (void)emu().free(d);
    if (which != "host_free") (void)emu().host_free(h);
    EXPECT_TRUE(emu().stream_destroy(s).ok());
  }
}

// CUDA's CU_POINTER_ATTRIBUTE_BUFFER_ID: what kolo keys the peers' mappings of user buffers
// by (transport/ipc/ipc_peer_buffers.h). Addresses come back after a free (the emulated
// device's mmap hands the same range out again, as CUDA's allocator does), ids never.
TEST(DeviceCudaSemantics, AnAllocationAtAReusedAddressHasANewId) {
  std::vector<uint64_t> ids;
  int reused = 0;
  void* before = nullptr;
  for (int i = 0; i < 8; ++i) {
    void* d = nullptr;
    ASSERT_TRUE(emu().malloc(&d, 1 << 20).ok());
    DeviceAllocation a;
    ASSERT_TRUE(emu().allocation_of(static_cast<char*>(d) + 4096, &a).ok());
    EXPECT_EQ(a.base, d);
    EXPECT_EQ(a.bytes, size_t{1} << 20);
    for (uint64_t id : ids) EXPECT_NE(a.id, id);
    ids.push_back(a.id);
    reused += d == before;
    before = d;
    ASSERT_TRUE(emu().free(d).ok());
  }
  // Otherwise this test would prove nothing about reuse.
  EXPECT_GT(reused, 0) << "no address came back after a free";
  DeviceAllocation none;
  int on_stack = 0;
  EXPECT_FALSE(emu().allocation_of(&on_stack, &none).ok());
}

TEST(DeviceCudaSemantics, AnAllocationBehindAStreamThatNeverFinishesIsADeadlockReportedAtTheTimeout) {
  setenv("KOLO_TIMEOUT", "1", 1);
  void *s = nullptr, *d = nullptr;
  uint32_t* word = nullptr;
  ASSERT_TRUE(emu().host_alloc(reinterpret_cast<void**>(&word), sizeof(uint32_t)).ok());
  *word = 0;
  ASSERT_TRUE(emu().stream_create(&s).ok());
  ASSERT_TRUE(emu().wait_value(s, word, 1).ok());  // released only after the malloc below
  const auto start = Clock::now();
  Status held = emu().malloc(&d, 64);
  EXPECT_EQ(held.code(), Code::kTimeout) << held.message();
  EXPECT_NE(held.message().find("deadlock"), std::string::npos) << held.message();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  __atomic_store_n(word, 1, __ATOMIC_RELEASE);
  EXPECT_TRUE(emu().stream_synchronize(s, Deadline(10)).ok());
  EXPECT_TRUE(emu().stream_destroy(s).ok());
  EXPECT_TRUE(emu().host_free(word).ok());
  unsetenv("KOLO_TIMEOUT");
}

TEST(DeviceCudaSemantics, AFullStreamBlocksTheEnqueueingThread) {
  void* s = nullptr;
  ASSERT_TRUE(emu().stream_create(&s).ok());
  gate = false;
  ASSERT_TRUE(emu().launch_host_func(s, wait_for_gate, nullptr).ok());
  std::atomic<int> enqueued{0};
  std::vector<char> a(64), b(64);
  std::thread producer([&] {
    for (int i = 0; i < 1100; ++i) {
      (void)emu().memcpy_async(a.data(), b.data(), 64, s);
      enqueued.fetch_add(1);
    }
  });
  // About 1000 fit; the producer then waits for the stream to run some.
  EXPECT_TRUE(within(5000, [&] { return enqueued.load() >= 1000; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LT(enqueued.load(), 1100);
  gate = true;
  producer.join();
  EXPECT_TRUE(emu().stream_synchronize(s, Deadline(10)).ok());
  EXPECT_TRUE(emu().stream_destroy(s).ok());
}

TEST(DeviceCudaSemantics, CallsCudaForbidsDuringCaptureFailAndInvalidateIt) {
  void *s = nullptr, *other = nullptr, *event = nullptr, *graph = nullptr;
  ASSERT_TRUE(emu().stream_create(&s).ok());
  ASSERT_TRUE(emu().stream_create(&other).ok());
  ASSERT_TRUE(emu().event_create(&event).ok());
  ASSERT_TRUE(emu().event_record(event, other).ok());
  std::vector<char> a(64), b(64);
  struct Forbidden {
    const char* what;
    std::function<Status()> call;
  };
  const std::vector<Forbidden> forbidden = {
      {"stream_synchronize", [&] { return emu().stream_synchronize(other, Deadline(1)); }},
      {"event_query", [&] { return emu().event_query(event).status(); }},
      {"event_synchronize", [&] { return emu().event_synchronize(event, Deadline(1)); }},
      {"malloc", [&] {
         void* p = nullptr;
         return emu().malloc(&p, 64);
       }},
      {"host_alloc", [&] {
         void* p = nullptr;
         return emu().host_alloc(&p, 64);
       }},
      {"legacy stream", [&] { return emu().memcpy_async(a.data(), b.data(), 64, nullptr); }},
  };
  for (const Forbidden& f : forbidden) {
    SCOPED_TRACE(f.what);
    ASSERT_TRUE(emu().stream_begin_capture(s).ok());
    ASSERT_TRUE(emu().memcpy_async(a.data(), b.data(), 64, s).ok());
    Status refused = f.call();
    EXPECT_FALSE(refused.ok());
    EXPECT_NE(refused.message().find("captur"), std::string::npos) << refused.message();
    Status ended = emu().stream_end_capture(s, &graph);
    EXPECT_FALSE(ended.ok()) << "the capture should be invalidated";
  }
  // Another thread is free to do all of that meanwhile (thread-local capture mode).
  ASSERT_TRUE(emu().stream_begin_capture(s).ok());
  std::thread([&] {
    void* p = nullptr;
    EXPECT_TRUE(emu().malloc(&p, 64).ok());
    EXPECT_TRUE(emu().free(p).ok());
    EXPECT_TRUE(emu().event_query(event).ok());
  }).join();
  ASSERT_TRUE(emu().memcpy_async(a.data(), b.data(), 64, s).ok());
  ASSERT_TRUE(emu().stream_end_capture(s, &graph).ok());
  EXPECT_TRUE(emu().graph_destroy(graph).ok());
  EXPECT_TRUE(emu().event_destroy(event).ok());
  for (void* x : {s, other}) EXPECT_TRUE(emu().stream_destroy(x).ok());
}

// Not a difference from the old emulated device but the mechanism that replaces blocking
// host functions: a stream held on the device by a word, released by a host store or by
// another stream's write_value, with sequence numbers that wrap.
TEST(DeviceEmulated, WaitValueHoldsAStreamUntilTheWordReachesTheValue) {
  uint32_t* word = nullptr;
  ASSERT_TRUE(emu().host_alloc(reinterpret_cast<void**>(&word), sizeof(uint32_t)).ok());
  void *held = nullptr, *writer = nullptr;
  ASSERT_TRUE(emu().stream_create(&held).ok());
  ASSERT_TRUE(emu().stream_create(&writer).ok());
  for (uint32_t base : {uint32_t{0}, uint32_t{0xfffffffe}}) {  // GEQ across the wrap
    SCOPED_TRACE(base);
    *word = base;
    Seen after;
    ASSERT_TRUE(emu().wait_value(held, word, base + 3).ok());
    ASSERT_TRUE(emu().launch_host_func(held, note_thread, &after).ok());
    __atomic_store_n(word, base + 2, __ATOMIC_RELEASE);
    EXPECT_FALSE(within(100, [&] { return after.runs.load() > 0; }));
    ASSERT_TRUE(emu().write_value(writer, word, base + 4).ok());  // past the value releases too
    EXPECT_TRUE(within(5000, [&] { return after.runs.load() == 1; }));
    EXPECT_EQ(__atomic_load_n(word, __ATOMIC_ACQUIRE), base + 4);
  }
  for (void* s : {held, writer}) EXPECT_TRUE(emu().stream_destroy(s).ok());
  EXPECT_TRUE(emu().host_free(word).ok());
}

}  // namespace
}  // namespace kolo::device
