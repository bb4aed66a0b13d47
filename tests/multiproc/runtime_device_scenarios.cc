// The runtime worker's scenarios on device tensors and wire types (see runtime_worker.cc).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "perf_data.h"
#include "runtime_worker.h"
#include "support/device/device.h"
#include "worker_checks.h"

using kolo_perf::dtype_bytes;

namespace runtime_worker {

using worker_checks::expect;
using worker_checks::must;

namespace {

// Device tensors (KOLO_DEVICE=emulated): the random-order scenario with every buffer in
// device memory, written by a producer stream that is still busy when the tensors are
// enqueued, so that a runtime not waiting for the producer reads stale values.
struct DeviceTensor {
  void* send = nullptr;
  void* recv = nullptr;
  std::vector<void*> outs;  // from the allocator (allgather, alltoall)
  size_t out_bytes = 0;
};

void* alloc_device(void* data, size_t total, const size_t*, int) {
  auto* x = static_cast<DeviceTensor*>(data);
  void* p = nullptr;
  x->out_bytes = std::max<size_t>(total, 1) * 8;
  if (kolo_mem_alloc(&p, x->out_bytes) != KOLO_SUCCESS) return nullptr;
  x->outs.push_back(p);
  return p;
}

void sleep_20ms(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

void to_host(void* dst, const void* src, size_t bytes, void* stream) {
  const auto& dev = kolo::device::runtime();
  if (bytes == 0) return;
  must(static_cast<kolo_result_t>(dev.memcpy_async(dst, src, bytes, stream).code()), "copy to host");
  must(static_cast<kolo_result_t>(dev.stream_synchronize(stream, kolo::Deadline(30)).code()), "sync");
}

}  // namespace

void scenario_device_random_order(kolo_comm_t comm) {
  const int p = kolo_comm_size(comm), r = kolo_comm_rank(comm);
  const auto& dev = kolo::device::runtime();
  must(dev.device_count() > 0 ? KOLO_SUCCESS : KOLO_ERR_UNSUPPORTED, "a device (run with KOLO_DEVICE=emulated)");
  void* producer = nullptr;
  must(static_cast<kolo_result_t>(dev.stream_create(&producer).code()), "stream_create");
  constexpr int kTensors = 60, kSteps = 3;
  std::mt19937 rng(99 + r);
  for (int step = 0; step < kSteps; ++step) {
    std::vector<Tensor> tensors(kTensors);
    std::vector<DeviceTensor> devs(kTensors);
    std::vector<int> order(kTensors);
    // The producer is busy first: every copy below waits behind this.
    must(static_cast<kolo_result_t>(dev.launch_host_func(producer, sleep_20ms, nullptr).code()), "host func");
    for (int t = 0; t < kTensors; ++t) {
      order[t] = t;
      Tensor& x = tensors[t];
      prepare(x, t, step, r, p);
      DeviceTensor& d = devs[t];
      must(kolo_mem_alloc(&d.send, std::max<size_t>(x.send.size(), 1)), "alloc send");
      must(kolo_mem_alloc(&d.recv, std::max<size_t>(x.recv.size(), 1)), "alloc recv");
      must(static_cast<kolo_result_t>(dev.memset_async(d.recv, 0, x.recv.size(), producer).code()), "memset");
      const std::vector<char>& input = x.kind == 6 ? x.recv : x.send;
      must(static_cast<kolo_result_t>(
               dev.memcpy_async(x.kind == 6 ? d.recv : d.send, input.data(), input.size(), producer).code()),
           "fill");
    }
    std::shuffle(order.begin(), order.end(), rng);
    for (int t : order) {
      Tensor& x = tensors[t];
      DeviceTensor& d = devs[t];
      kolo_enqueue_options options = KOLO_ENQUEUE_OPTIONS_INIT;
      options.alloc = alloc_device;
      options.alloc_data = &d;
      options.stream = producer;
      const size_t n = x.send.size() / dtype_bytes(x.dtype);
      kolo_result_t rc;
      switch (x.kind) {
        case 6: rc = kolo_enqueue_broadcast(x.name.c_str(), d.recv, x.count, x.dtype, t % p, &options, comm, &x.request); break;
        case 7: rc = kolo_enqueue_allgather(x.name.c_str(), d.send, n / x.count, x.count, x.dtype, &options, comm, &x.request); break;
        case 8: {
          std::vector<size_t> splits(p, x.count);
          rc = kolo_enqueue_alltoall(x.name.c_str(), d.send, splits.data(), x.dtype, &options, comm, &x.request);
          break;
        }
        case 9: rc = kolo_enqueue_reduce_scatter(x.name.c_str(), d.send, d.recv, x.count, x.dtype, x.op, &options, comm, &x.request); break;
        default: rc = kolo_enqueue_allreduce(x.name.c_str(), d.send, d.recv, x.count, x.dtype, x.op, &options, comm, &x.request);
      }
      must(rc, "enqueue " + x.name);
    }
    for (int t : order) {
      must(kolo_wait(tensors[t].request), "wait " + tensors[t].name);
      must(kolo_request_free(tensors[t].request), "free");
    }
    // Completed requests' outputs are ready for any stream: read them on another one.
    void* reader = nullptr;
    must(static_cast<kolo_result_t>(dev.stream_create(&reader).code()), "stream_create");
    for (int t = 0; t < kTensors; ++t) {
      Tensor& x = tensors[t];
      DeviceTensor& d = devs[t];
      if (x.kind == 7 || x.kind == 8) {
        expect(d.outs.size() == 1, x.name + ": one output allocation");
        x.out.resize(d.out_bytes);
        if (!d.outs.empty()) to_host(x.out.data(), d.outs[0], d.out_bytes, reader);
      } else {
        to_host(x.recv.data(), d.recv, x.recv.size(), reader);
      }
      check(x, t, step, r, p);
      kolo_mem_free(d.send);
      kolo_mem_free(d.recv);
      for (void* o : d.outs) kolo_mem_free(o);
    }
    (void)dev.stream_destroy(reader);
  }
  // Whether a cycle found several device tensors ready depends on timing (a loaded
  // machine may negotiate them one by one): reported, not required.
  auto s = stats(comm);
  if (r == 0) {
    std::printf("rank 0: %llu allreduces for %llu device tensors\n", (unsigned long long)s.collectives,
                (unsigned long long)s.fused_tensors);
  }
  // Host memory on one rank, device memory on the others: a mismatch naming the memory.
  if (p > 1) {
    std::vector<float> host(16, 1.0f);
    void* d = nullptr;
    must(kolo_mem_alloc(&d, host.size() * sizeof(float)), "alloc");
    kolo_request_t req = nullptr;
    void* buf = r == 0 ? static_cast<void*>(host.data()) : d;
    must(kolo_enqueue_allreduce("mixed", buf, buf, host.size(), KOLO_FLOAT32, KOLO_SUM, nullptr, comm, &req),
         "enqueue mixed");
    kolo_result_t rc = kolo_wait(req);
    const std::string message = kolo_last_error();
    expect(rc == KOLO_ERR_MISMATCH && contains(message, "mixed") && contains(message, "memory") &&
               contains(message, "host") && contains(message, "device"),
           std::string("host vs device memory: ") + kolo_result_string(rc) + ": " + message);
    must(kolo_request_free(req), "free");
    // A request's own buffers of two kinds: refused at enqueue.
    rc = kolo_enqueue_allreduce("split.kinds", host.data(), d, host.size(), KOLO_FLOAT32, KOLO_SUM, nullptr, comm, &req);
    expect(rc == KOLO_ERR_INVALID_ARGUMENT && contains(kolo_last_error(), "host memory"),
           std::string("host send, device recv refused: ") + kolo_last_error());
    kolo_mem_free(d);
  }
  (void)dev.stream_destroy(producer);
}

// wire_dtype through the runtime: FLOAT32 data carried as FLOAT16 / BFLOAT16 / FLOAT8,
// summed in FLOAT32, on one host (shared memory) or several (the compressed executor).
// Small integers are exact in FLOAT16 and BFLOAT16, so those sums are; fused groups never
// mix wire types; ranks asking for different wire types get a mismatch naming wire_dtype.
void scenario_wire(kolo_comm_t comm) {
  const int p = kolo_comm_size(comm), r = kolo_comm_rank(comm);
  const kolo_dtype_t wires[] = {KOLO_DTYPE_COUNT, KOLO_FLOAT16, KOLO_BFLOAT16, KOLO_FLOAT8_E4M3};
  constexpr int kTensors = 24;
  size_t fp8_inexact = 0;  // proof that FLOAT8 was on the wire: exact sums would have none
  for (int step = 0; step < 2; ++step) {
    std::vector<std::vector<float>> in(kTensors), out(kTensors);
    std::vector<kolo_request_t> reqs(kTensors);
    for (int t = 0; t < kTensors; ++t) {
      const size_t n = 1 + static_cast<size_t>(t) * 331 % 3000;
      in[t].resize(n);
      out[t].assign(n, -1.0f);
      for (size_t i = 0; i < n; ++i) in[t][i] = float((i + static_cast<size_t>(r) + t) % 4);
      kolo_enqueue_options options = KOLO_ENQUEUE_OPTIONS_INIT;
      options.wire_dtype = wires[t % 4];
      must(kolo_enqueue_allreduce(("wire." + std::to_string(t)).c_str(), in[t].data(), out[t].data(), n, KOLO_FLOAT32,
                                  t % 3 == 0 ? KOLO_AVG : KOLO_SUM, &options, comm, &reqs[t]),
           "enqueue wire");
    }
    for (int t = 0; t < kTensors; ++t) {
      must(kolo_wait(reqs[t]), "wait wire");
      must(kolo_request_free(reqs[t]), "free");
      size_t wrong = 0;
      for (size_t i = 0; i < in[t].size(); ++i) {
        float sum = 0;
        for (int q = 0; q < p; ++q) sum += float((i + static_cast<size_t>(q) + t) % 4);
        const float want = t % 3 == 0 ? sum / float(p) : sum;
        // Block-scaled FLOAT8 keeps 3 mantissa bits of value / scale: within 2^-4 of the
        // block's largest value (3) per contribution, and one more rounding of the result.
        const float tolerance = wires[t % 4] == KOLO_FLOAT8_E4M3 ? 3.0f / 16 * float(p + 1) : 1e-6f * std::fabs(want);
        wrong += std::fabs(out[t][i] - want) > tolerance;
        fp8_inexact += wires[t % 4] == KOLO_FLOAT8_E4M3 && out[t][i] != want;
      }
      expect(wrong == 0, "wire." + std::to_string(t) + ": " + std::to_string(wrong) + " wrong");
    }
  }
  expect(fp8_inexact > 0, "FLOAT8 on the wire rounds some sums");
  std::vector<float> a(64, 1.0f), b(64);
  kolo_request_t req = nullptr;
  kolo_enqueue_options options = KOLO_ENQUEUE_OPTIONS_INIT;
  options.wire_dtype = r == p - 1 ? KOLO_BFLOAT16 : KOLO_FLOAT16;
  must(kolo_enqueue_allreduce("wire.bad", a.data(), b.data(), a.size(), KOLO_FLOAT32, KOLO_SUM, &options, comm, &req),
       "enqueue wire.bad");
  kolo_result_t rc = kolo_wait(req);
  const std::string message = kolo_last_error();
  must(kolo_request_free(req), "free");
  expect(p == 1 || (rc == KOLO_ERR_MISMATCH && contains(message, "wire_dtype") && contains(message, "wire.bad")),
         std::string("wire mismatch: ") + kolo_result_string(rc) + ": " + message);
  // Refused at enqueue: compressed integers and compressed broadcasts.
  std::vector<int32_t> ints(8, 1);
  options.wire_dtype = KOLO_FLOAT16;
  rc = kolo_enqueue_allreduce("wire.int", ints.data(), ints.data(), ints.size(), KOLO_INT32, KOLO_SUM, &options, comm,
                              &req);
  expect(rc == KOLO_ERR_UNSUPPORTED && contains(kolo_last_error(), "FLOAT32"), std::string("int32 data: ") + kolo_last_error());
  rc = kolo_enqueue_broadcast("wire.bcast", a.data(), a.size(), KOLO_FLOAT32, 0, &options, comm, &req);
  expect(rc == KOLO_ERR_UNSUPPORTED && contains(kolo_last_error(), "allreduce"), std::string("broadcast: ") + kolo_last_error());
}

// op=Adasum through the runtime (engine/runtime/op_runner.cc stages it through host memory),
// on host tensors and, where there is a device (KOLO_DEVICE=emulated), on device tensors a
// busy producer stream is still writing. Several tensors are enqueued at once so that
// fusion packs them; each must come out as kolo_allreduce's KOLO_ADASUM of it alone, bit
// for bit (the same pairing and arithmetic, one set of coefficients per tensor).
void scenario_adasum(kolo_comm_t comm) {
  const int r = kolo_comm_rank(comm);
  const auto& dev = kolo::device::runtime();
  const bool device = dev.device_count() > 0;
  const std::vector<size_t> counts = {1, 5, 300, 4096, 17};
  std::mt19937 rng(7 + r);
  std::normal_distribution<float> normal(0, 1);
  std::vector<std::vector<float>> inputs, want;
  for (size_t n : counts) {
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    std::vector<float> alone = x;
    must(kolo_allreduce(alone.data(), alone.data(), n, KOLO_FLOAT32, KOLO_ADASUM, comm, nullptr), "adasum alone");
    inputs.push_back(x);
    want.push_back(alone);
  }
  for (bool on_device : {false, true}) {
    if (on_device && !device) continue;
    void* producer = nullptr;
    if (on_device) {
      must(static_cast<kolo_result_t>(dev.stream_create(&producer).code()), "stream_create");
      must(static_cast<kolo_result_t>(dev.launch_host_func(producer, sleep_20ms, nullptr).code()), "host func");
    }
    std::vector<void*> bufs(counts.size());
    std::vector<kolo_request_t> requests(counts.size());
    for (size_t t = 0; t < counts.size(); ++t) {
      const size_t bytes = counts[t] * sizeof(float);
      if (on_device) {
        must(kolo_mem_alloc(&bufs[t], bytes), "alloc");
        must(static_cast<kolo_result_t>(dev.memcpy_async(bufs[t], inputs[t].data(), bytes, producer).code()), "fill");
      } else {
        bufs[t] = std::malloc(bytes);
        std::memcpy(bufs[t], inputs[t].data(), bytes);
      }
      kolo_enqueue_options options = KOLO_ENQUEUE_OPTIONS_INIT;
      options.stream = producer;
      const std::string name = std::string(on_device ? "dev" : "host") + ".adasum." + std::to_string(t);
      must(kolo_enqueue_allreduce(name.c_str(), bufs[t], bufs[t], counts[t], KOLO_FLOAT32, KOLO_ADASUM, &options, comm,
                                  &requests[t]),
           "enqueue " + name);
    }
    for (size_t t = 0; t < counts.size(); ++t) {
      must(kolo_wait(requests[t]), "wait adasum");
      must(kolo_request_free(requests[t]), "free");
      std::vector<float> got(counts[t]);
      if (on_device) {
        void* reader = nullptr;
        must(static_cast<kolo_result_t>(dev.stream_create(&reader).code()), "stream_create");
        to_host(got.data(), bufs[t], got.size() * sizeof(float), reader);
        (void)dev.stream_destroy(reader);
        kolo_mem_free(bufs[t]);
      } else {
        std::memcpy(got.data(), bufs[t], got.size() * sizeof(float));
        std::free(bufs[t]);
      }
      expect(std::memcmp(got.data(), want[t].data(), got.size() * sizeof(float)) == 0,
             std::string(on_device ? "device" : "host") + " tensor " + std::to_string(t) + " of " +
                 std::to_string(counts[t]) + ": the runtime's Adasum differs from kolo_allreduce's");
    }
    if (producer != nullptr) (void)dev.stream_destroy(producer);
  }
  // Adasum of integers is refused at enqueue, on this rank, naming the types.
  int32_t ints[4] = {1, 2, 3, 4};
  kolo_request_t req = nullptr;
  expect(kolo_enqueue_allreduce("adasum.ints", ints, ints, 4, KOLO_INT32, KOLO_ADASUM, nullptr, comm, &req) ==
             KOLO_ERR_INVALID_ARGUMENT,
         "adasum of INT32 refused at enqueue");
}

}  // namespace runtime_worker
