#include "device_scenarios.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "support/device/device.h"
#include "worker_checks.h"

namespace device_scenarios {

using worker_checks::expect;
using worker_checks::g_failures;
using worker_checks::must;

// A compressed device allreduce: within one fp16 rounding of the contributions where the
// device_ipc kernels run; where peers cannot map each other's memory (KOLO_EMULATED_P2P=0),
// the path is off (KOLO_DEVICE_IPC=0) or there is one rank, as documented (refused with
// KOLO_ERR_UNSUPPORTED on every rank and the communicator goes on; one rank: a copy).
void device_compressed(kolo_comm_t comm) {
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  const int p = kolo_comm_size(comm), me = kolo_comm_rank(comm);
  const size_t n = 1000;
  void* stream = nullptr;
  void* d = nullptr;
  must(dev.stream_create(&stream).ok() && dev.malloc(&d, n * sizeof(float)).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM,
       "device setup");
  std::vector<float> host(n), out(n, -1);
  for (size_t i = 0; i < n; ++i) host[i] = 1.0f + 0.001f * static_cast<float>((i * 7 + me) % 997);
  must(dev.memcpy_async(d, host.data(), n * sizeof(float), stream).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "h2d");
  kolo_coll_options options = KOLO_COLL_OPTIONS_INIT;
  options.wire_dtype = KOLO_FLOAT16;
  const kolo_result_t rc = kolo_allreduce_ex(d, d, n, KOLO_FLOAT32, KOLO_SUM, &options, comm, stream);
  auto off = [](const char* name) { return std::getenv(name) != nullptr && std::strcmp(std::getenv(name), "0") == 0; };
  const bool refused = p > 1 && (off("KOLO_EMULATED_P2P") || off("KOLO_DEVICE_IPC"));
  if (refused) {
    const char* why = off("KOLO_DEVICE_IPC") ? "device_ipc for device buffers" : "cannot map";
    expect(rc == KOLO_ERR_UNSUPPORTED && std::strstr(kolo_last_error(), why) != nullptr,
           std::string("compressed allreduce without peer access refused: ") + kolo_last_error());
    must(kolo_allreduce(d, d, n, KOLO_FLOAT32, KOLO_SUM, comm, stream), "allreduce after the refusal");
  } else {
    must(rc, "compressed device allreduce");
  }
  must(dev.memcpy_async(out.data(), d, n * sizeof(float), stream).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "d2h");
  must(dev.stream_synchronize(stream, kolo::Deadline(60)).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "sync");
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    double exact = 0;
    for (int q = 0; q < p; ++q) exact += 1.0 + 0.001 * static_cast<double>(static_cast<float>((i * 7 + q) % 997) * 1.0f);
    if (!(std::fabs(out[i] - exact) <= exact * (refused ? 1e-6 : 0x1p-11 + p * 0x1p-23))) ++wrong;
  }
  expect(wrong == 0, "compressed device allreduce: " + std::to_string(wrong) + " elements out of bound");
  kolo_result_t async = KOLO_ERR_INTERNAL;
  must(kolo_comm_get_async_error(comm, &async), "get_async_error");
  expect(async == KOLO_SUCCESS, "no async error after the compressed allreduce");
  (void)dev.free(d);
  (void)dev.stream_destroy(stream);
}

// Stream order on the emulated device: work before a collective on its stream is seen by
// it, work after it sees its result; mixed host/device buffers are refused; many device
// calls in flight, then a host call, keep the call order on every rank.
void device_stream(kolo_comm_t comm) {
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  const int p = kolo_comm_size(comm), me = kolo_comm_rank(comm);
  const size_t n = 1000;
  void* stream = nullptr;
  must(dev.stream_create(&stream).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "stream_create");
  void* d = nullptr;
  must(dev.malloc(&d, n * sizeof(float)).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "malloc");
  std::vector<float> host(n, static_cast<float>(me + 1)), out(n, -1);
  // Enqueued before the collective on the same stream: the collective must see it.
  must(dev.memcpy_async(d, host.data(), n * sizeof(float), stream).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "h2d");
  const int rounds = 20;
  for (int r = 0; r < rounds; ++r) {
    must(kolo_allreduce(d, d, n, KOLO_FLOAT32, KOLO_SUM, comm, stream), "device allreduce in flight");
  }
  must(dev.memcpy_async(out.data(), d, n * sizeof(float), stream).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "d2h");
  // A host call now: it runs after the queued device calls on every rank.
  float one = 1, sum = 0;
  must(kolo_allreduce(&one, &sum, 1, KOLO_FLOAT32, KOLO_SUM, comm, nullptr), "host allreduce after device calls");
  expect(sum == static_cast<float>(p), "host allreduce after device calls");
  must(dev.stream_synchronize(stream, kolo::Deadline(60)).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "sync");
  // After r rounds each element is (sum of rank+1) * p^(r-1).
  double want = p * (p + 1) / 2.0;
  for (int r = 1; r < rounds; ++r) want *= p;
  bool ok = true;
  for (float v : out) ok &= static_cast<double>(v) == static_cast<double>(static_cast<float>(want));
  expect(ok, "device allreduces in stream order");
  // Mixed buffers are refused with a clear error.
  kolo_result_t mixed = kolo_allreduce(host.data(), d, n, KOLO_FLOAT32, KOLO_SUM, comm, stream);
  expect(mixed == KOLO_ERR_INVALID_ARGUMENT && std::strstr(kolo_last_error(), "host memory") != nullptr,
         std::string("mixed host/device buffers refused: ") + kolo_last_error());
  // Buffers of device 1 while the thread has device 0 current: the call runs on device 1
  // and leaves device 0 current; buffers of two devices in one call are refused. A
  // communicator's device path keeps to one device (as NCCL's does): a new one for device 1.
  // Needs two devices (the emulated runtime has several; a machine with one GPU has not).
  if (dev.device_count() < 2) {
    std::printf("[%d] device_stream: one device here; the part on device 1 not run\n", me);
  } else {
    kolo_comm_t on1 = nullptr;
    must(kolo_comm_split(comm, 0, me, &on1), "split for device 1");
    void* other = nullptr;
    must(dev.set_device(1).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "set_device(1)");
    must(dev.malloc(&other, n * sizeof(float)).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "malloc on device 1");
    must(dev.set_device(0).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "set_device(0)");
    must(dev.memcpy_async(other, host.data(), n * sizeof(float), stream).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "h2d 1");
    must(kolo_allreduce(other, other, n, KOLO_FLOAT32, KOLO_SUM, on1, stream), "allreduce on device 1");
    must(dev.memcpy_async(out.data(), other, n * sizeof(float), stream).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "d2h 1");
    must(dev.stream_synchronize(stream, kolo::Deadline(60)).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "sync 1");
    expect(out[n - 1] == static_cast<float>(p * (p + 1) / 2), "allreduce of device 1 buffers");
    expect(dev.current_device().value() == 0, "device 0 still current after a call on device 1");
    kolo_result_t two = kolo_allreduce(d, other, n, KOLO_FLOAT32, KOLO_SUM, comm, stream);
    expect(two == KOLO_ERR_INVALID_ARGUMENT && std::strstr(kolo_last_error(), "one device") != nullptr,
           std::string("buffers of two devices refused: ") + kolo_last_error());
    must(kolo_comm_destroy(on1), "destroy the device 1 communicator");
    (void)dev.free(other);
  }
  kolo_result_t async = KOLO_ERR_INTERNAL;
  must(kolo_comm_get_async_error(comm, &async), "get_async_error");
  expect(async == KOLO_SUCCESS, "no async error");
  (void)dev.free(d);
  (void)dev.stream_destroy(stream);
}

// Registered buffers inside a larger allocation (so that the IPC mapping of the allocation
// and the buffer's offset in it are both used): allreduce forced two-shot (read in place
// where the device_ipc kernels run; staged elsewhere, with the same result), reduce_scatter
// repeated, then deregistered (collective) and freed.
void device_registered(kolo_comm_t comm) {
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  const int p = kolo_comm_size(comm), me = kolo_comm_rank(comm);
  const size_t n = 3000 * static_cast<size_t>(p), skip = 1024;  // floats
  void* stream = nullptr;
  void* block = nullptr;
  must(dev.stream_create(&stream).ok() && dev.malloc(&block, (2 * n + 2 * skip) * 4).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM,
       "device setup");
  float* send = static_cast<float*>(block) + skip;
  float* recv = send + n + skip;
  void* hs = nullptr;
  void* hr = nullptr;
  must(kolo_mem_register(comm, send, n * 4, &hs), "register the input");
  must(kolo_mem_register(comm, recv, n * 4, &hr), "register the output");
  std::vector<float> host(n), out(n);
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>((i + me * 5 + round) % 101);
    must(dev.memcpy_async(send, host.data(), n * 4, stream).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "h2d");
    kolo_coll_options o = KOLO_COLL_OPTIONS_INIT;
    o.algorithm = KOLO_ALGO_TWO_SHOT;
    must(kolo_allreduce_ex(send, recv, n, KOLO_FLOAT32, KOLO_SUM, &o, comm, stream), "registered allreduce");
    must(dev.memcpy_async(out.data(), recv, n * 4, stream).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "d2h");
    must(dev.stream_synchronize(stream, kolo::Deadline(60)).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "sync");
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) {
      float want = 0;
      for (int q = 0; q < p; ++q) want += static_cast<float>((i + q * 5 + round) % 101);
      if (out[i] != want) ++wrong;
    }
    expect(wrong == 0, "registered allreduce: " + std::to_string(wrong) + " wrong");
    const size_t c = n / p;
    must(kolo_reduce_scatter(send, recv, c, KOLO_FLOAT32, KOLO_SUM, comm, stream), "registered reduce_scatter");
    must(dev.memcpy_async(out.data(), recv, c * 4, stream).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "d2h");
    must(dev.stream_synchronize(stream, kolo::Deadline(60)).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "sync");
    wrong = 0;
    for (size_t i = 0; i < c; ++i) {
      float want = 0;
      for (int q = 0; q < p; ++q) want += static_cast<float>((me * c + i + q * 5 + round) % 101);
      if (out[i] != want) ++wrong;
    }
    expect(wrong == 0, "registered reduce_scatter: " + std::to_string(wrong) + " wrong");
  }
  must(kolo_mem_deregister(comm, hs), "deregister the input");
  must(kolo_mem_deregister(comm, hr), "deregister the output");
  must(dev.free(block).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "free after deregistering");
  (void)dev.stream_destroy(stream);
}

// User buffers read in place without kolo_mem_register (KOLO_DEVICE_AUTO_REGISTER): plain
// allocations, the buffers at offsets that differ by rank and round, large calls (the
// logged Plans say zero_copy; expect_plan.sh checks). Each round frees the allocation and
// makes one of the same size, which the emulated device, as CUDA, may put at the same
// address with new contents. The results must come from the new memory: a peer that took
// the new allocation for the old one by its address would read its mapping of the freed
// one (still holding the last round's values) and sum the wrong numbers.
void device_shared_buffers(kolo_comm_t comm) {
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  const int p = kolo_comm_size(comm), me = kolo_comm_rank(comm);
  const size_t n = size_t{3} << 18;  // floats (3 MB), a multiple of every p up to 6
  const size_t room = 2 * n + 512;   // the allocation, the same size every round
  void* stream = nullptr;
  must(dev.stream_create(&stream).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "stream");
  std::vector<float> host(n), out(n);
  void* last = nullptr;
  int reused = 0;
  auto check = [&](const char* what, size_t count, auto want) {
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += out[i] != want(i);
    expect(wrong == 0, std::string(what) + ": " + std::to_string(wrong) + " of " + std::to_string(count) + " wrong");
  };
  auto fetch = [&](const float* from, size_t count) {
    must(dev.memcpy_async(out.data(), from, count * 4, stream).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "d2h");
    must(dev.stream_synchronize(stream, kolo::Deadline(60)).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "sync");
  };
  for (int round = 0; round < 4; ++round) {
    void* block = nullptr;
    must(dev.malloc(&block, room * 4).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "malloc");
    reused += block == last;
    last = block;
    float* send = static_cast<float*>(block) + 64 * me + 16 * round;
    float* recv = send + n + 32;
    auto value = [&](size_t i, int q) { return static_cast<float>((i * 3 + q * 7 + round * 11) % 127); };
    for (size_t i = 0; i < n; ++i) host[i] = value(i, me);
    must(dev.memcpy_async(send, host.data(), n * 4, stream).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "h2d");
    auto sum = [&](size_t i) {
      float s = 0;
      for (int q = 0; q < p; ++q) s += value(i, q);
      return s;
    };
    kolo_coll_options two_shot = KOLO_COLL_OPTIONS_INIT;
    two_shot.algorithm = KOLO_ALGO_TWO_SHOT;
    must(kolo_allreduce_ex(send, recv, n, KOLO_FLOAT32, KOLO_SUM, &two_shot, comm, stream), "allreduce");
    fetch(recv, n);
    check("allreduce, two-shot", n, sum);
    const size_t c = n / p;
    must(kolo_reduce_scatter(send, recv, c, KOLO_FLOAT32, KOLO_SUM, comm, stream), "reduce_scatter");
    fetch(recv, c);
    check("reduce_scatter", c, [&](size_t i) { return sum(me * c + i); });
    must(kolo_broadcast(send, recv, n, KOLO_FLOAT32, p - 1, comm, stream), "broadcast");
    fetch(recv, n);
    check("broadcast", n, [&](size_t i) { return value(i, p - 1); });
    must(kolo_allreduce(send, send, n, KOLO_FLOAT32, KOLO_SUM, comm, stream), "allreduce in place, planner's choice");
    fetch(send, n);
    check("allreduce in place", n, sum);
    must(dev.free(block).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "free");
  }
  // Otherwise this run proved nothing about a reused address.
  expect(reused > 0, "no allocation came back at a freed one's address");
  (void)dev.stream_destroy(stream);
}

// Groups of device calls: collectives only run on device_ipc one after another (in place
// and not); with a send and a receive in the group, all of it is staged. The calls of a
// group are independent (as NCCL's): none reads what another writes. Both give the right
// results, repeatedly.
void device_group(kolo_comm_t comm) {
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  const int p = kolo_comm_size(comm), me = kolo_comm_rank(comm);
  const size_t n = 5000;
  void* stream = nullptr;
  void *a = nullptr, *b = nullptr, *g = nullptr, *x = nullptr;
  must(dev.stream_create(&stream).ok() && dev.malloc(&a, n * 4).ok() && dev.malloc(&b, n * 4).ok() &&
               dev.malloc(&g, n * p * 4).ok() && dev.malloc(&x, n * 4).ok()
           ? KOLO_SUCCESS
           : KOLO_ERR_SYSTEM,
       "device setup");
  auto v = [](int rank, size_t i, int round) { return static_cast<float>((i + rank + round) % 17); };
  auto w = [](int rank, size_t i, int round) { return static_cast<float>(rank * 10000 + i + round); };
  std::vector<float> host(n), other(n), sums(n), gathered(n * p), got(n);  // copies read them later
  for (int round = 0; round < 3; ++round) {
    for (bool with_p2p : {false, true}) {
      for (size_t i = 0; i < n; ++i) host[i] = v(me, i, round), other[i] = w(me, i, round);
      must(dev.memcpy_async(a, host.data(), n * 4, stream).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "h2d");
      must(dev.memcpy_async(b, other.data(), n * 4, stream).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "h2d");
      must(kolo_group_start(), "group_start");
      must(kolo_allreduce(a, a, n, KOLO_FLOAT32, KOLO_SUM, comm, stream), "group allreduce");
      must(kolo_allgather(b, g, n, KOLO_FLOAT32, comm, stream), "group allgather");
      if (with_p2p && p > 1) {
        must(kolo_send(b, n, KOLO_FLOAT32, (me + 1) % p, comm, stream), "group send");
        must(kolo_recv(x, n, KOLO_FLOAT32, (me + p - 1) % p, comm, stream), "group recv");
      }
      must(kolo_group_end(), "group_end");
      must(dev.memcpy_async(sums.data(), a, n * 4, stream).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "d2h");
      must(dev.memcpy_async(gathered.data(), g, n * p * 4, stream).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "d2h");
      must(dev.memcpy_async(got.data(), x, n * 4, stream).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "d2h");
      must(dev.stream_synchronize(stream, kolo::Deadline(60)).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "sync");
      size_t wrong = 0;
      for (size_t i = 0; i < n; ++i) {
        float want = 0;
        for (int q = 0; q < p; ++q) want += v(q, i, round);
        wrong += sums[i] != want;
        for (int q = 0; q < p; ++q) wrong += gathered[q * n + i] != w(q, i, round);
        if (with_p2p && p > 1) wrong += got[i] != w((me + p - 1) % p, i, round);
      }
      expect(wrong == 0, std::string("device group") + (with_p2p ? " with send/recv" : "") + ": " +
                             std::to_string(wrong) + " wrong");
    }
  }
  for (void* ptr : {a, b, g, x}) (void)dev.free(ptr);
  (void)dev.stream_destroy(stream);
}

// Staged calls queued without a synchronize (5 chunked 64 MB allreduces, ~400 stream
// items), then a group of 480 calls behind them (one staged operation of ~960 items),
// three times: make_room must hold the group back until the queue is empty, since the
// stream holds ~1000 items and run() holds the call lock the queued host plans need (with
// KOLO_DEVICE_IPC=0; the emulated stream blocks when full, as CUDA's does).
void device_big_group(kolo_comm_t comm) {
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  const int p = kolo_comm_size(comm), me = kolo_comm_rank(comm);
  const size_t big = size_t{16} << 20, calls = 480, each = 64;
  void* stream = nullptr;
  void *zeros = nullptr, *in = nullptr, *out = nullptr;
  must(dev.stream_create(&stream).ok() && dev.malloc(&zeros, big * 4).ok() && dev.malloc(&in, calls * each * 4).ok() &&
               dev.malloc(&out, calls * each * 4).ok()
           ? KOLO_SUCCESS
           : KOLO_ERR_SYSTEM,
       "device setup");
  std::vector<float> host(big, 0.0f), got(calls * each), back(big);
  for (size_t i = 0; i < calls * each; ++i) got[i] = static_cast<float>((i + me) % 13);
  must(dev.memcpy_async(zeros, host.data(), big * 4, stream).ok() && dev.memcpy_async(in, got.data(), calls * each * 4, stream).ok()
           ? KOLO_SUCCESS
           : KOLO_ERR_SYSTEM,
       "h2d");
  must(dev.stream_synchronize(stream, kolo::Deadline(60)).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "sync");
  for (int round = 0; round < 3; ++round) {
    for (int k = 0; k < 5; ++k) must(kolo_allreduce(zeros, zeros, big, KOLO_FLOAT32, KOLO_SUM, comm, stream), "big allreduce");
    must(kolo_group_start(), "group_start");
    for (size_t c = 0; c < calls; ++c) {
      must(kolo_allreduce(static_cast<float*>(in) + c * each, static_cast<float*>(out) + c * each, each, KOLO_FLOAT32,
                          KOLO_SUM, comm, stream),
           "group allreduce");
    }
    must(kolo_group_end(), "group_end");
  }
  must(dev.memcpy_async(got.data(), out, calls * each * 4, stream).ok() && dev.memcpy_async(back.data(), zeros, big * 4, stream).ok()
           ? KOLO_SUCCESS
           : KOLO_ERR_SYSTEM,
       "d2h");
  must(dev.stream_synchronize(stream, kolo::Deadline(120)).ok() ? KOLO_SUCCESS : KOLO_ERR_SYSTEM, "sync");
  size_t wrong = 0;
  for (size_t i = 0; i < calls * each; ++i) {
    float want = 0;
    for (int q = 0; q < p; ++q) want += static_cast<float>((i + q) % 13);
    wrong += got[i] != want;
  }
  for (size_t i = 0; i < big; ++i) wrong += back[i] != 0.0f;
  expect(wrong == 0, "big staged group behind queued calls: " + std::to_string(wrong) + " wrong");
  for (void* ptr : {zeros, in, out}) (void)dev.free(ptr);
  (void)dev.stream_destroy(stream);
}

// The last rank dies while the others have device allreduces queued on a stream, large
// and small ones in turn (with kernel waits, the small ones are the one-kernel form):
// every survivor's stream is released within KOLO_TIMEOUT and the error is reported.
int device_kill(kolo_comm_t comm) {
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  const int p = kolo_comm_size(comm), me = kolo_comm_rank(comm);
  const size_t n = 1 << 16;
  void* stream = nullptr;
  void* d = nullptr;
  if (!dev.stream_create(&stream).ok() || !dev.malloc(&d, n * sizeof(float)).ok()) return 3;
  float one = 1, sum = 0;
  must(kolo_allreduce(&one, &sum, 1, KOLO_FLOAT32, KOLO_SUM, comm, nullptr), "warm-up");
  if (me == p - 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    kill(getpid(), SIGKILL);
  }
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < 50; ++r) {
    const size_t count = r % 2 == 0 ? n : 100;
    if (kolo_allreduce(d, d, count, KOLO_FLOAT32, KOLO_SUM, comm, stream) != KOLO_SUCCESS) break;  // failed already
  }
  kolo::Status synced = dev.stream_synchronize(stream, kolo::Deadline(120));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  kolo_result_t async = KOLO_SUCCESS;
  kolo_comm_get_async_error(comm, &async);
  std::printf("rank %d: stream released after %.1f s (%s), async error %s: %s\n", me, waited,
              synced.ok() ? "ok" : synced.message().c_str(), kolo_result_string(async), kolo_last_error());
  expect(synced.ok(), "the stream is released, not held");
  expect(async != KOLO_SUCCESS, "the peer's death is reported as an async error");
  return g_failures > 0 ? 1 : 0;
}

}  // namespace device_scenarios
