// Several ranks as threads of one process (as nccl-tests' -t; NCCL refuses two ranks on one
// GPU), each with its own communicator and stream, on the emulated device: device
// collectives through the device_ipc path (peers of one process share the address space,
// no IPC handle) and through staging give the right results, repeatedly.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "kernels/compress.h"
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
  // All device memory first: an allocation waits for all work queued on the device (as
  // CUDA's does), and a peer's queued call waits for this rank: allocating between calls
  // deadlocks ranks that are threads of one process.
  const size_t most = size_t{3} << 20;
  void* d = nullptr;
  void* g = nullptr;
  if (!dev.malloc(&d, most * sizeof(float)).ok() || !dev.malloc(&g, n * 16 * sizeof(float)).ok()) return "malloc";
  if (kolo_barrier(comm) != KOLO_SUCCESS) return std::string("barrier: ") + kolo_last_error();
  std::string why;
  for (size_t count : {size_t{1000}, most}) {  // 4 KB and 12 MB of floats
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
  }
  kolo_result_t async = KOLO_ERR_INTERNAL;
  if (kolo_comm_get_async_error(comm, &async) != KOLO_SUCCESS || async != KOLO_SUCCESS) why += " async error";
  (void)dev.stream_destroy(stream);
  if (kolo_comm_destroy(comm) != KOLO_SUCCESS) why += std::string(" destroy: ") + kolo_last_error();
  (void)dev.free(d);
  (void)dev.free(g);
  return why;
}

// Compressed allreduce (kolo_coll_options::wire_dtype) through the device_ipc kernels:
// every wire type x one-shot/two-shot x counts (one value, odd, two chunks) x sum with
// prescale/postscale or avg, in place and not. Every rank must get the same bits, and each
// element must be within the documented bound of the exact (fp64) result:
//   |got - exact| <= |post| * (sum_r e(x_r) + n 2^-23 sum_r |x_r|) [+ e(result): two-shot]
// where e(v) = u |v| + d: one rounding to the wire type (u = 2^-11 half, 2^-8 bfloat16,
// 2^-4 e4m3, 2^-3 e5m2; d its absolute floor, for fp8 from the largest magnitude a block
// may hold). Compression must also show: some element differs from the fp32 result (one
// rank has no wire: its result is the scaled input).
std::vector<std::vector<float>> g_results;  // one per rank, compared after the threads join
std::string compressed_main(const kolo_unique_id& id, int n, int me) {
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  kolo_comm_t comm = nullptr;
  if (kolo_comm_init_rank(&comm, n, &id, me) != KOLO_SUCCESS) return std::string("init: ") + kolo_last_error();
  void* stream = nullptr;
  if (!dev.stream_create(&stream).ok()) return "stream_create";
  std::string why;
  const size_t max_count = (size_t{1} << 20) + 333;  // two chunks of the device_ipc path
  void* d_in = nullptr;
  void* d_out = nullptr;
  if (!dev.malloc(&d_in, max_count * 4).ok() || !dev.malloc(&d_out, max_count * 4).ok()) return "malloc";
  struct Wire { kolo_dtype_t dtype; double u, floor_rel; };  // floor_rel: d / amax for fp8
  const Wire wires[] = {{KOLO_FLOAT16, 0x1p-11, 0}, {KOLO_BFLOAT16, 0x1p-8, 0},
                        {KOLO_FLOAT8_E4M3, 0x1p-4, 0x1p-10 / 448}, {KOLO_FLOAT8_E5M2, 0x1p-3, 0x1p-17 / 57344}};
  int variant = 0;
  for (const Wire& w : wires) {
    for (int algo : {KOLO_ALGO_ONE_SHOT, KOLO_ALGO_TWO_SHOT}) {
      for (size_t count : {size_t{1}, size_t{1001}, max_count}) {
        ++variant;
        const bool in_place = variant % 2 == 0, avg = variant % 3 == 0;
        kolo_coll_options options = KOLO_COLL_OPTIONS_INIT;
        options.wire_dtype = w.dtype;
        options.algorithm = algo;
        if (!avg) options.prescale = 0.5, options.postscale = 3.0;
        // x(r, i): magnitudes in [0.5, 2), signs and values varying with rank and index.
        auto x = [&](int r, size_t i) {
          const uint32_t h = static_cast<uint32_t>(i * 2654435761u + r * 40503u + variant * 977u);
          const float mag = 0.5f + static_cast<float>(h % 3000) / 2000.0f;
          return (h >> 16) & 1 ? -mag : mag;
        };
        std::vector<float> host(count);
        for (size_t i = 0; i < count; ++i) host[i] = x(me, i);
        void* out = in_place ? d_in : d_out;
        if (!dev.memcpy_async(d_in, host.data(), count * 4, stream).ok()) return "h2d";
        if (kolo_allreduce_ex(d_in, out, count, KOLO_FLOAT32, avg ? KOLO_AVG : KOLO_SUM, &options, comm, stream) !=
            KOLO_SUCCESS) {
          return std::string("allreduce_ex: ") + kolo_last_error();
        }
        g_results[me].assign(count, 0);
        if (!dev.memcpy_async(g_results[me].data(), out, count * 4, stream).ok()) return "d2h";
        if (!dev.stream_synchronize(stream, kolo::Deadline(120)).ok()) return "sync";
        // Every rank checks the bound on its own result; the bits are compared after join.
        const double pre = avg ? 1.0 : 0.5, post = avg ? 1.0 / n : 3.0;
        const double amax = 2.0 * pre, amax_result = amax * n * post;
        size_t differs = 0;
        for (size_t i = 0; i < count && why.empty(); ++i) {
          double exact = 0, sum_abs = 0, err_in = 0;
          float fp32 = 0;
          for (int r = 0; r < n; ++r) {
            const double v = pre * x(r, i);
            exact += v;
            sum_abs += std::fabs(v);
            err_in += w.u * std::fabs(v) + w.floor_rel * amax;
            fp32 += static_cast<float>(v);
          }
          exact *= post;
          double bound = std::fabs(post) * (err_in + n * 0x1p-23 * sum_abs) + 0x1p-23 * std::fabs(exact);
          if (algo == KOLO_ALGO_TWO_SHOT) bound += w.u * std::fabs(exact) * 1.01 + w.floor_rel * amax_result;
          const float got = g_results[me][i];
          if (!(std::fabs(got - exact) <= bound)) {
            why = "wire " + std::to_string(w.dtype) + " algo " + std::to_string(algo) + " count " +
                  std::to_string(count) + " element " + std::to_string(i) + ": " + std::to_string(got) + ", exact " +
                  std::to_string(exact) + ", bound " + std::to_string(bound);
          }
          if (got != static_cast<float>(fp32 * post)) ++differs;
        }
        if (why.empty() && n > 1 && count > 1000 && differs == 0) why = "no element shows compression";
        // One-shot with fp16, bf16 or fp8 codes, one kernel up to its box (protocol flagged)
        // or through the slots: the host twins' bits (kernels/compress.h), which the slot
        // path's kernels equal, so both paths give the same bits.
        if (why.empty() && algo == KOLO_ALGO_ONE_SHOT && n > 1) {  // one rank: a copy, no wire
          const kolo::WireFormat fmt = kolo::wire_format(static_cast<kolo::DType>(w.dtype));
          const kolo::Scale pre_scale{avg ? 1.0 : 0.5, 1}, post_scale{avg ? 1.0 : 3.0, avg ? n : 1};
          std::vector<std::vector<char>> codes(n, std::vector<char>(kolo::wire_bytes(fmt, count)));
          std::vector<const void*> wires(n);
          std::vector<float> xs(count), want(count);
          for (int r = 0; r < n; ++r) {
            for (size_t i = 0; i < count; ++i) xs[i] = x(r, i);
            if (!kolo::compress(codes[r].data(), xs.data(), count, fmt, pre_scale).ok()) return "host compress";
            wires[r] = codes[r].data();
          }
          if (!kolo::decompress_sum_all(want.data(), wires.data(), n, count, fmt, post_scale).ok()) return "host sum";
          if (std::memcmp(want.data(), g_results[me].data(), count * 4) != 0) {
            why = "one-shot wire " + std::to_string(w.dtype) + " count " + std::to_string(count) +
                  ": bits differ from the host codecs'";
          }
        }
        if (!why.empty()) break;
        // Another rank may read g_results only after every rank has written it: a
        // barrier before and after the comparison (by rank 0).
        if (kolo_barrier(comm) != KOLO_SUCCESS) return std::string("barrier: ") + kolo_last_error();
        if (me == 0) {
          for (int r = 1; r < n && why.empty(); ++r) {
            if (std::memcmp(g_results[r].data(), g_results[0].data(), count * 4) != 0) {
              why = "rank " + std::to_string(r) + "'s bits differ from rank 0's, wire " + std::to_string(w.dtype) +
                    " algo " + std::to_string(algo) + " count " + std::to_string(count);
            }
          }
        }
        if (kolo_barrier(comm) != KOLO_SUCCESS) return std::string("barrier: ") + kolo_last_error();
      }
      if (!why.empty()) break;
    }
    if (!why.empty()) break;
  }
  (void)dev.stream_destroy(stream);
  if (kolo_comm_destroy(comm) != KOLO_SUCCESS) why += std::string(" destroy: ") + kolo_last_error();
  // Freed after the destroy: freeing waits for the device, where the peers' last barrier
  // waits for this rank's (a deadlock, as with CUDA).
  (void)dev.free(d_in);
  (void)dev.free(d_out);
  return why;
}

// Registered buffers (kolo_mem_alloc + kolo_mem_register), read in place by the peers:
// allreduce forced two-shot (zero-copy) and automatic (large: zero-copy by the model) at
// offset 0 and at a symmetric offset, in place and not; broadcast and allgather in place;
// repeated. Then the misuse: host memory and bad handles refused on the calling rank, and
// (g_mismatch) ranks whose buffers lie at different offsets, or in a window on one rank
// only: KOLO_ERR_MISMATCH on every rank, reported through kolo_comm_get_async_error.
enum class Mismatch { kNone, kOffsets, kOneRankUnregistered };
Mismatch g_mismatch = Mismatch::kNone;

std::string registered_main(const kolo_unique_id& id, int n, int me) {
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  kolo_comm_t comm = nullptr;
  if (kolo_comm_init_rank(&comm, n, &id, me) != KOLO_SUCCESS) return std::string("init: ") + kolo_last_error();
  void* stream = nullptr;
  if (!dev.stream_create(&stream).ok()) return "stream_create";
  const size_t cap = (size_t{1} << 20) + 64;  // floats
  void* plain = nullptr;  // all device memory first (rank_main says why)
  if (!dev.malloc(&plain, 4096).ok()) return "malloc";
  void* send = nullptr;
  void* recv = nullptr;
  if (kolo_mem_alloc(&send, cap * 4) != KOLO_SUCCESS || kolo_mem_alloc(&recv, cap * 4) != KOLO_SUCCESS) {
    return std::string("kolo_mem_alloc: ") + kolo_last_error();
  }
  void* hs = nullptr;
  void* hr = nullptr;
  if (kolo_mem_register(comm, send, cap * 4, &hs) != KOLO_SUCCESS || kolo_mem_register(comm, recv, cap * 4, &hr) != KOLO_SUCCESS) {
    return std::string("kolo_mem_register: ") + kolo_last_error();
  }
  std::string why;
  auto expect = [&](const std::vector<float>& got, const std::vector<float>& want, const char* what) {
    for (size_t i = 0; i < want.size() && why.empty(); ++i) {
      if (got[i] != want[i]) {
        why = std::string(what) + " element " + std::to_string(i) + ": " + std::to_string(got[i]) + ", want " +
              std::to_string(want[i]);
      }
    }
  };
  float* s = static_cast<float*>(send);
  float* r = static_cast<float*>(recv);
  for (int round = 0; round < 2 && why.empty(); ++round) {
    for (size_t offset : {size_t{0}, size_t{48}}) {
      for (size_t count : {size_t{1}, size_t{1001}, size_t{1} << 20}) {
        for (bool in_place : {false, true}) {
          for (int algo : {KOLO_ALGO_TWO_SHOT, 0}) {
            std::vector<float> host(count), out(count), want(count);
            for (size_t i = 0; i < count; ++i) {
              host[i] = static_cast<float>((i * 7 + me * 3 + round) % 61);
              want[i] = 0;
              for (int q = 0; q < n; ++q) want[i] += static_cast<float>((i * 7 + q * 3 + round) % 61);
            }
            float* in = s + offset;
            float* res = in_place ? in : r + offset;
            kolo_coll_options o = KOLO_COLL_OPTIONS_INIT;
            o.algorithm = algo;
            if (!dev.memcpy_async(in, host.data(), count * 4, stream).ok()) return "h2d";
            if (kolo_allreduce_ex(in, res, count, KOLO_FLOAT32, KOLO_SUM, &o, comm, stream) != KOLO_SUCCESS) {
              return std::string("allreduce: ") + kolo_last_error();
            }
            if (!dev.memcpy_async(out.data(), res, count * 4, stream).ok()) return "d2h";
            if (!dev.stream_synchronize(stream, kolo::Deadline(60)).ok()) return "sync";
            expect(out, want, "registered allreduce");
          }
        }
      }
    }
    // Broadcast from the last rank and allgather, both in place, in the recv window.
    const size_t count = 3000;
    std::vector<float> host(count * n), out(count * n), want(count * n);
    for (size_t i = 0; i < count * n; ++i) host[i] = static_cast<float>(me * 100000 + i);
    if (!dev.memcpy_async(r, host.data(), count * n * 4, stream).ok()) return "h2d";
    if (kolo_broadcast(r, r, count, KOLO_FLOAT32, n - 1, comm, stream) != KOLO_SUCCESS) {
      return std::string("broadcast: ") + kolo_last_error();
    }
    if (kolo_allgather(r + me * count, r, count, KOLO_FLOAT32, comm, stream) != KOLO_SUCCESS) {
      return std::string("allgather: ") + kolo_last_error();
    }
    if (!dev.memcpy_async(out.data(), r, count * n * 4, stream).ok()) return "d2h";
    if (!dev.stream_synchronize(stream, kolo::Deadline(60)).ok()) return "sync";
    // The broadcast writes the root's first block over every rank's block 0; the allgather
    // then collects block q of rank q: the root's values for q = 0, rank q's own after.
    for (int q = 0; q < n; ++q) {
      for (size_t j = 0; j < count; ++j) {
        want[q * count + j] = q == 0 ? static_cast<float>((n - 1) * 100000 + j) : static_cast<float>(q * 100000 + q * count + j);
      }
    }
    expect(out, want, "registered broadcast + allgather");
  }
  // Misuse on the calling rank: refused before anything runs, the communicator stays usable.
  std::vector<float> host_memory(16);
  void* h = nullptr;
  if (kolo_mem_register(comm, host_memory.data(), 64, &h) != KOLO_ERR_INVALID_ARGUMENT) why += " host memory registered";
  if (kolo_mem_deregister(comm, nullptr) != KOLO_ERR_INVALID_ARGUMENT) why += " null handle deregistered";
  if (n > 1) {
    // A registration one rank cannot make (past its allocation's end) fails on every rank
    // at once, not at KOLO_TIMEOUT (60 s here).
    const auto start = std::chrono::steady_clock::now();
    void* bad = nullptr;
    const kolo_result_t rc = kolo_mem_register(comm, send, me == 0 ? cap * 4 + 4096 : cap * 4, &bad);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rc == KOLO_SUCCESS || took > 10) why += " a registration failing on rank 0: " + std::to_string(rc) + " after " + std::to_string(took) + " s";
  }
  if (why.empty() && g_mismatch != Mismatch::kNone && n > 1) {
    float* in = s;
    if (g_mismatch == Mismatch::kOffsets && me == 0) in = s + 16;
    if (g_mismatch == Mismatch::kOneRankUnregistered && me == 0) in = static_cast<float*>(plain);
    kolo_coll_options o = KOLO_COLL_OPTIONS_INIT;
    o.algorithm = KOLO_ALGO_TWO_SHOT;
    const kolo_result_t rc = kolo_allreduce_ex(in, in, 256, KOLO_FLOAT32, KOLO_SUM, &o, comm, stream);
    (void)dev.stream_synchronize(stream, kolo::Deadline(60));
    kolo_result_t async = KOLO_SUCCESS;
    const auto start = std::chrono::steady_clock::now();
    while (rc == KOLO_SUCCESS && async == KOLO_SUCCESS && std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
      if (kolo_comm_get_async_error(comm, &async) != KOLO_SUCCESS) return "get_async_error";
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const kolo_result_t got = rc != KOLO_SUCCESS ? rc : async;
    if (got != KOLO_ERR_MISMATCH) why += " mismatch reported as " + std::to_string(got);
    else if (std::string(kolo_last_error()).find("differs from rank") == std::string::npos) {
      why += std::string(" mismatch message: ") + kolo_last_error();
    }
  } else if (kolo_mem_deregister(comm, hs) != KOLO_SUCCESS || kolo_mem_deregister(comm, hr) != KOLO_SUCCESS) {
    why += std::string(" deregister: ") + kolo_last_error();
  } else if (kolo_mem_deregister(comm, hs) != KOLO_ERR_INVALID_ARGUMENT) {
    why += " deregistered twice";
  }
  (void)dev.stream_destroy(stream);
  (void)kolo_comm_destroy(comm);
  (void)kolo_mem_free(send);
  (void)kolo_mem_free(recv);
  (void)dev.free(plain);
  return why;
}

// CUDA graph capture (the emulated device records a stream's work and replays it): each
// rank captures a small allreduce (one-shot from the slots), a large one (two chunks, two
// slots) and one of registered buffers (read in place), then launches the graph five
// times with new inputs, with an uncaptured allreduce between launches. Every replay must
// give the new sums: barrier numbers come from device memory, not from the capture. A
// capture before any device call (kolo's setup cannot be captured) is refused.
std::string graph_main(const kolo_unique_id& id, int n, int me) {
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  kolo_comm_t comm = nullptr;
  if (kolo_comm_init_rank(&comm, n, &id, me) != KOLO_SUCCESS) return std::string("init: ") + kolo_last_error();
  void* stream = nullptr;
  if (!dev.stream_create(&stream).ok()) return "stream_create";
  const size_t small = 1000, large = (size_t{3} << 19) + 5, reg = 70000;  // floats
  void *a = nullptr, *b = nullptr, *rs = nullptr, *rr = nullptr, *hs = nullptr, *hr = nullptr;
  void* e = nullptr;  // for the uncaptured calls; all memory first (rank_main says why)
  if (!dev.malloc(&a, small * 4).ok() || !dev.malloc(&b, large * 4).ok() || !dev.malloc(&e, large * 4).ok()) {
    return "malloc";
  }
  if (kolo_mem_alloc(&rs, reg * 4) != KOLO_SUCCESS || kolo_mem_alloc(&rr, reg * 4) != KOLO_SUCCESS ||
      kolo_mem_register(comm, rs, reg * 4, &hs) != KOLO_SUCCESS || kolo_mem_register(comm, rr, reg * 4, &hr) != KOLO_SUCCESS) {
    return std::string("registered buffers: ") + kolo_last_error();
  }
  // Captured before any device call: refused, the communicator goes on.
  if (!dev.stream_begin_capture(stream).ok()) return "begin_capture";
  const kolo_result_t early = kolo_allreduce(a, a, small, KOLO_FLOAT32, KOLO_SUM, comm, stream);
  void* graph = nullptr;
  if (!dev.stream_end_capture(stream, &graph).ok()) return "end_capture";
  (void)dev.graph_destroy(graph);
  if (early != KOLO_ERR_UNSUPPORTED) return "a capture before any device call was not refused: " + std::to_string(early);
  // Instantiation waits for the whole device (as CUDA's does): no rank queues a call that
  // waits for its peers until every rank has instantiated, here and after the capture below.
  if (kolo_barrier(comm) != KOLO_SUCCESS) return std::string("barrier: ") + kolo_last_error();
  if (kolo_allreduce(a, a, small, KOLO_FLOAT32, KOLO_SUM, comm, stream) != KOLO_SUCCESS) {  // sets up
    return std::string("warm-up: ") + kolo_last_error();
  }
  kolo_coll_options two = KOLO_COLL_OPTIONS_INIT;
  two.algorithm = KOLO_ALGO_TWO_SHOT;
  if (!dev.stream_begin_capture(stream).ok()) return "begin_capture";
  const kolo_result_t rc1 = kolo_allreduce(a, a, small, KOLO_FLOAT32, KOLO_SUM, comm, stream);
  const kolo_result_t rc2 = kolo_allreduce(b, b, large, KOLO_FLOAT32, KOLO_SUM, comm, stream);
  const kolo_result_t rc3 = kolo_allreduce_ex(rs, rr, reg, KOLO_FLOAT32, KOLO_SUM, &two, comm, stream);
  if (!dev.stream_end_capture(stream, &graph).ok()) return "end_capture";
  if (kolo_barrier(comm) != KOLO_SUCCESS) return std::string("barrier: ") + kolo_last_error();
  if (rc1 != KOLO_SUCCESS || rc2 != KOLO_SUCCESS || rc3 != KOLO_SUCCESS) {
    return std::string("captured calls: ") + kolo_last_error();
  }
  std::string why;
  std::vector<float> ha(small), hb(large), hr_in(reg), out;
  // Uncaptured device calls right after the capture and between launches (two chunks, so
  // both slots): a capture must not move the slots the uncaptured calls take.
  std::vector<float> he(large), oe(large);
  auto uncaptured = [&](int k) -> std::string {
    for (size_t i = 0; i < large; ++i) he[i] = static_cast<float>((i % 7) * (me + 1) + k);
    if (!dev.memcpy_async(e, he.data(), large * 4, stream).ok()) return "h2d";
    if (kolo_allreduce(e, e, large, KOLO_FLOAT32, KOLO_SUM, comm, stream) != KOLO_SUCCESS) {
      return std::string("uncaptured allreduce: ") + kolo_last_error();
    }
    if (!dev.memcpy_async(oe.data(), e, large * 4, stream).ok() || !dev.stream_synchronize(stream, kolo::Deadline(60)).ok()) {
      return "d2h";
    }
    for (size_t i = 0; i < large; ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r) want += static_cast<float>((i % 7) * (r + 1) + k);
      if (oe[i] != want) return "uncaptured allreduce " + std::to_string(k) + " element " + std::to_string(i);
    }
    return "";
  };
  why = uncaptured(-1);
  for (int launch = 0; launch < 5 && why.empty(); ++launch) {
    auto v = [&](int r, size_t i) { return static_cast<float>((i % 13) + r * 2 + launch * 100); };
    for (size_t i = 0; i < small; ++i) ha[i] = v(me, i);
    for (size_t i = 0; i < large; ++i) hb[i] = v(me, i);
    for (size_t i = 0; i < reg; ++i) hr_in[i] = v(me, i);
    if (!dev.memcpy_async(a, ha.data(), small * 4, stream).ok() || !dev.memcpy_async(b, hb.data(), large * 4, stream).ok() ||
        !dev.memcpy_async(rs, hr_in.data(), reg * 4, stream).ok()) {
      return "h2d";
    }
    if (!dev.graph_launch(graph, stream).ok()) return "graph_launch";
    // An uncaptured call between launches, on another buffer region (b's tail is unused
    // by nothing: use a fresh one-element allreduce on a).
    float one = 1, all = 0;
    if (kolo_allreduce(&one, &all, 1, KOLO_FLOAT32, KOLO_SUM, comm, nullptr) != KOLO_SUCCESS) {
      return std::string("host allreduce between launches: ") + kolo_last_error();
    }
    if (launch % 2 == 1) why = uncaptured(launch);
    for (auto [ptr, count, name] : {std::tuple<void*, size_t, const char*>{a, small, "small"},
                                    {b, large, "large"}, {rr, reg, "registered"}}) {
      out.assign(count, -1);
      if (!dev.memcpy_async(out.data(), ptr, count * 4, stream).ok()) return "d2h";
      if (!dev.stream_synchronize(stream, kolo::Deadline(60)).ok()) return "sync";
      for (size_t i = 0; i < count && why.empty(); ++i) {
        float want = 0;
        for (int r = 0; r < n; ++r) want += v(r, i);
        if (out[i] != want) {
          why = std::string(name) + " allreduce, launch " + std::to_string(launch) + ", element " + std::to_string(i) +
                ": " + std::to_string(out[i]) + ", want " + std::to_string(want);
        }
      }
    }
  }
  (void)dev.graph_destroy(graph);
  kolo_result_t async = KOLO_ERR_INTERNAL;
  if (kolo_comm_get_async_error(comm, &async) != KOLO_SUCCESS || async != KOLO_SUCCESS) why += " async error";
  if (kolo_mem_deregister(comm, hs) != KOLO_SUCCESS || kolo_mem_deregister(comm, hr) != KOLO_SUCCESS) why += " deregister";
  (void)dev.stream_destroy(stream);
  if (kolo_comm_destroy(comm) != KOLO_SUCCESS) why += std::string(" destroy: ") + kolo_last_error();
  (void)dev.free(a);
  (void)dev.free(b);
  (void)dev.free(e);
  (void)kolo_mem_free(rs);
  (void)kolo_mem_free(rr);
  return why;
}

// The one-kernel allreduce (protocol flagged, calls up to 64 KB): float32, float64, int32
// and int8 (4, 8 and 1 elements of 8 bytes per flagged line), sum / max / prod / avg,
// prescale 0.5 and postscale 4, counts around the line and box sizes (16384 floats fill a
// box; 16385 go through the slots), in place and not, 8-byte aligned and not, three
// rounds. Every result against the exact value. Then (g_flagged_mismatch) ranks that make
// different calls: allreduces whose counts differ by one, or broadcasts from different
// roots (where a rank receives from the root alone, but checks every peer's header):
// KOLO_ERR_MISMATCH on every rank, from the tags in the boxes. Otherwise a broadcast whose
// non-roots pass a null send buffer.
enum class FlaggedMismatch { kNone, kCounts, kRoots };
FlaggedMismatch g_flagged_mismatch = FlaggedMismatch::kNone;

std::string flagged_main(const kolo_unique_id& id, int n, int me) {
  const kolo::device::DeviceOps& dev = kolo::device::runtime();
  kolo_comm_t comm = nullptr;
  if (kolo_comm_init_rank(&comm, n, &id, me) != KOLO_SUCCESS) return std::string("init: ") + kolo_last_error();
  void* stream = nullptr;
  if (!dev.stream_create(&stream).ok()) return "stream_create";
  const size_t cap = 16385 + 8;  // elements of 8 bytes at most
  void* send = nullptr;
  void* recv = nullptr;
  if (!dev.malloc(&send, cap * 8).ok() || !dev.malloc(&recv, cap * 8).ok()) return "malloc";
  if (kolo_barrier(comm) != KOLO_SUCCESS) return std::string("barrier: ") + kolo_last_error();
  // Rank r's element i: small integers, so every sum, product and scaling is exact.
  auto value = [](int r, size_t i) { return static_cast<double>((i * 7 + static_cast<size_t>(r) * 3) % 4 + 1); };
  struct Type {
    kolo_dtype_t dtype;
    size_t bytes;
  };
  std::string why;
  for (int round = 0; round < 3 && why.empty(); ++round) {
    for (Type t : {Type{KOLO_FLOAT32, 4}, Type{KOLO_FLOAT64, 8}, Type{KOLO_INT32, 4}, Type{KOLO_INT8, 1}}) {
      for (kolo_op_t op : {KOLO_SUM, KOLO_MAX, KOLO_PROD, KOLO_AVG}) {
        const bool floating = t.dtype == KOLO_FLOAT32 || t.dtype == KOLO_FLOAT64;
        if (op == KOLO_PROD && t.dtype == KOLO_INT8 && n > 3) continue;  // 4^5 overflows int8
        for (size_t count : {size_t{1}, size_t{3}, size_t{1000}, 65536 / t.bytes, 65536 / t.bytes + 1}) {
          for (size_t offset : {size_t{0}, size_t{1}}) {
            for (bool in_place : {false, true}) {
              const bool scaled = floating && op == KOLO_SUM && offset == 1;
              std::vector<char> host(count * t.bytes), out(count * t.bytes);
              auto put = [&](std::vector<char>& b, size_t i, double v) {
                if (t.dtype == KOLO_FLOAT32) reinterpret_cast<float*>(b.data())[i] = static_cast<float>(v);
                if (t.dtype == KOLO_FLOAT64) reinterpret_cast<double*>(b.data())[i] = v;
                if (t.dtype == KOLO_INT32) reinterpret_cast<int32_t*>(b.data())[i] = static_cast<int32_t>(v);
                if (t.dtype == KOLO_INT8) reinterpret_cast<int8_t*>(b.data())[i] = static_cast<int8_t>(v);
              };
              auto get = [&](const std::vector<char>& b, size_t i) -> double {
                if (t.dtype == KOLO_FLOAT32) return reinterpret_cast<const float*>(b.data())[i];
                if (t.dtype == KOLO_FLOAT64) return reinterpret_cast<const double*>(b.data())[i];
                if (t.dtype == KOLO_INT32) return reinterpret_cast<const int32_t*>(b.data())[i];
                return reinterpret_cast<const int8_t*>(b.data())[i];
              };
              for (size_t i = 0; i < count; ++i) put(host, i, value(me, i));
              char* in = static_cast<char*>(send) + offset * t.bytes;
              char* res = in_place ? in : static_cast<char*>(recv) + offset * t.bytes;
              kolo_coll_options o = KOLO_COLL_OPTIONS_INIT;
              if (scaled) {
                o.prescale = 0.5;
                o.postscale = 4;
              }
              if (!dev.memcpy_async(in, host.data(), host.size(), stream).ok()) return "h2d";
              if (kolo_allreduce_ex(in, res, count, t.dtype, op, &o, comm, stream) != KOLO_SUCCESS) {
                return std::string("allreduce: ") + kolo_last_error();
              }
              if (!dev.memcpy_async(out.data(), res, out.size(), stream).ok()) return "d2h";
              if (!dev.stream_synchronize(stream, kolo::Deadline(60)).ok()) return "sync";
              for (size_t i = 0; i < count && why.empty(); ++i) {
                double want = op == KOLO_PROD ? 1 : 0;
                for (int q = 0; q < n; ++q) {
                  const double v = value(q, i) * (scaled ? 0.5 : 1);
                  want = op == KOLO_MAX ? std::max(want, v) : op == KOLO_PROD ? want * v : want + v;
                }
                if (op == KOLO_AVG) want = floating ? want / n : std::floor(want / n);
                if (scaled) want *= 4;
                // An average is the sum times 1/n, rounded in the type: within one rounding.
                const double tolerance = op == KOLO_AVG && floating ? want * 1e-6 : 0;
                if (std::fabs(get(out, i) - want) > tolerance) {
                  why = "flagged allreduce dtype " + std::to_string(t.dtype) + " op " + std::to_string(op) + " count " +
                        std::to_string(count) + " offset " + std::to_string(offset) + (in_place ? " in place" : "") +
                        " element " + std::to_string(i) + ": " + std::to_string(get(out, i)) + ", want " +
                        std::to_string(want);
                }
              }
            }
          }
        }
      }
    }
  }
  // A broadcast whose non-roots pass no send buffer (it matters at the root only), in one
  // kernel too.
  if (why.empty() && g_flagged_mismatch == FlaggedMismatch::kNone) {
    const int root = n - 1;
    std::vector<float> host(1000), out(1000, -1);
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i * 3 + 1);
    if (me == root && !dev.memcpy_async(send, host.data(), host.size() * 4, stream).ok()) return "h2d";
    if (kolo_broadcast(me == root ? send : nullptr, recv, host.size(), KOLO_FLOAT32, root, comm, stream) != KOLO_SUCCESS) {
      return std::string("broadcast: ") + kolo_last_error();
    }
    if (!dev.memcpy_async(out.data(), recv, out.size() * 4, stream).ok()) return "d2h";
    if (!dev.stream_synchronize(stream, kolo::Deadline(60)).ok()) return "sync";
    if (out != host) why = "broadcast with no send buffer on the non-roots: wrong result";
  }
  if (why.empty() && g_flagged_mismatch != FlaggedMismatch::kNone && n > 1) {
    const kolo_result_t rc =
        g_flagged_mismatch == FlaggedMismatch::kCounts
            ? kolo_allreduce(send, recv, me == 0 ? 100 : 101, KOLO_FLOAT32, KOLO_SUM, comm, stream)
            : kolo_broadcast(send, recv, 100, KOLO_FLOAT32, me == 0 ? 1 : 0, comm, stream);
    (void)dev.stream_synchronize(stream, kolo::Deadline(60));
    kolo_result_t async = KOLO_SUCCESS;
    const auto start = std::chrono::steady_clock::now();
    while (rc == KOLO_SUCCESS && async == KOLO_SUCCESS && std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
      if (kolo_comm_get_async_error(comm, &async) != KOLO_SUCCESS) return "get_async_error";
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const kolo_result_t got = rc != KOLO_SUCCESS ? rc : async;
    if (got != KOLO_ERR_MISMATCH) why += " mismatch reported as " + std::to_string(got);
  } else {
    kolo_result_t async = KOLO_ERR_INTERNAL;
    if (kolo_comm_get_async_error(comm, &async) != KOLO_SUCCESS || async != KOLO_SUCCESS) why += " async error";
  }
  (void)dev.stream_destroy(stream);
  (void)kolo_comm_destroy(comm);
  (void)dev.free(send);
  (void)dev.free(recv);
  return why;
}

void run_threads(int n, const char* ipc, std::string (*main_fn)(const kolo_unique_id&, int, int)) {
  for (const char* v : {"KOLO_RANK", "KOLO_SIZE", "KOLO_ADDR", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}) unsetenv(v);
  setenv("KOLO_DEVICE", "emulated", 1);
  setenv("KOLO_DEVICE_IPC", ipc, 1);
  setenv("KOLO_TIMEOUT", "60", 1);
  kolo_unique_id id;
  if (kolo_get_unique_id(&id) != KOLO_SUCCESS) std::exit(2);
  std::vector<std::string> why(n);
  std::vector<std::thread> ranks;
  g_results.assign(n, {});
  for (int r = 0; r < n; ++r) ranks.emplace_back([&, r] { why[r] = main_fn(id, n, r); });
  for (std::thread& t : ranks) t.join();
  int bad = 0;
  for (int r = 0; r < n; ++r) {
    if (!why[r].empty()) std::fprintf(stderr, "rank %d: %s\n", r, why[r].c_str()), ++bad;
  }
  std::exit(bad == 0 ? 0 : 1);
}

// Every count of thread ranks running main_fn, each in a fresh process (the device runtime
// is chosen once per process): every rank must return no complaint.
using RankMain = std::string (*)(const kolo_unique_id&, int, int);
void expect_ranks_pass(std::initializer_list<int> counts, const char* ipc, RankMain main_fn = rank_main) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (int n : counts) EXPECT_EXIT(run_threads(n, ipc, main_fn), ::testing::ExitedWithCode(0), "") << n << " thread ranks";
}

TEST(ThreadRanks, DeviceCollectivesThroughIpcKernels) { expect_ranks_pass({2, 3}, "1"); }

// KOLO_DEVICE_BARRIER=host with ranks that are threads of one process. A process runs the
// host functions of all its streams on one thread, so barriers as host functions deadlocked
// here (one rank's wait held another's post back): they are a word the stream waits for
// on the device and a thread of each rank's executor that writes it.
TEST(ThreadRanks, HostBarriersWorkForThreadsOfOneProcess) {
  setenv("KOLO_DEVICE_BARRIER", "host", 1);
  expect_ranks_pass({2, 3}, "1");
  unsetenv("KOLO_DEVICE_BARRIER");
}

// Ranks that are threads of one process read each other's plain (unregistered) buffers in
// place at their own addresses (transport/ipc/ipc_peer_buffers.h): the 12 MB allreduces
// of rank_main are planned zero-copy, and give the same results.
TEST(ThreadRanks, LargeCallsReadPlainBuffersInPlace) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  setenv("KOLO_DEBUG", "INFO", 1);
  setenv("KOLO_DEBUG_SUBSYS", "PLAN", 1);
  EXPECT_EXIT(run_threads(3, "1", rank_main), ::testing::ExitedWithCode(0),
              "allreduce of 12582912 B on 3 ranks: device_ipc [a-z_]+, protocol zero_copy");
  unsetenv("KOLO_DEBUG");
  unsetenv("KOLO_DEBUG_SUBSYS");
}

TEST(ThreadRanks, DeviceCollectivesStaged) { expect_ranks_pass({3}, "0"); }

TEST(ThreadRanks, RegisteredBuffersReadInPlace) { expect_ranks_pass({1, 2, 3}, "1", registered_main); }

TEST(ThreadRanks, RegisteredBuffersAtOtherOffsetsAreAMismatchOnEveryRank) {
  for (Mismatch m : {Mismatch::kOffsets, Mismatch::kOneRankUnregistered}) {
    SCOPED_TRACE(static_cast<int>(m));
    g_mismatch = m;
    expect_ranks_pass({3}, "1", registered_main);
  }
  g_mismatch = Mismatch::kNone;
}

TEST(ThreadRanks, CapturedInACudaGraphAndReplayed) { expect_ranks_pass({1, 2, 3}, "1", graph_main); }

TEST(ThreadRanks, SmallAllreducesInOneKernel) { expect_ranks_pass({2, 3, 5}, "1", flagged_main); }

TEST(ThreadRanks, SmallCollectivesThatDifferAreAMismatchOnEveryRank) {
  for (FlaggedMismatch m : {FlaggedMismatch::kCounts, FlaggedMismatch::kRoots}) {
    SCOPED_TRACE(static_cast<int>(m));
    g_flagged_mismatch = m;
    expect_ranks_pass({3}, "1", flagged_main);
  }
  g_flagged_mismatch = FlaggedMismatch::kNone;
}

TEST(ThreadRanks, CompressedAllreduceThroughIpcKernels) { expect_ranks_pass({1, 2, 3, 5}, "1", compressed_main); }

}  // namespace
