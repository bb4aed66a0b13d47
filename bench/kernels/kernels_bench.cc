// Host kernel benchmarks (Google Benchmark): the host twins of kolo's element-wise kernels
// against memcpy of the same buffers. bytes_per_second counts bytes read + bytes written,
// so the kernels and memcpy compare directly as memory traffic.
//
//   ./kolo_kernels_bench --benchmark_min_time=0.2s
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/compress.h"
#include "kernels/float_types.h"
#include "kernels/host_kernels.h"

namespace kolo {
namespace {

// Buffers filled with non-trivial values (zeros or denormals would flatter or slow the
// conversions): floats in [-2, 2).
std::vector<float> make_floats(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t x = seed;
  for (auto& f : v) {
    x = x * 1664525u + 1013904223u;
    f = static_cast<float>(static_cast<int32_t>(x) >> 8) * (1.0f / (1 << 22));
  }
  return v;
}

void set_bytes(benchmark::State& state, size_t bytes_per_iter) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes_per_iter));
}

void check(benchmark::State& state, const Status& st) {
  if (!st.ok()) state.SkipWithError(st.to_string().c_str());
}

// memcpy of n floats: reads 4n bytes, writes 4n bytes.
void BM_Memcpy(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<float> a = make_floats(n, 1), b(n);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), n * sizeof(float));
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2 * n * sizeof(float));
}

// dst = a + b (out of place): reads 2 buffers, writes 1.
void BM_SumF32(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<float> a = make_floats(n, 1), b = make_floats(n, 2), c(n);
  const void* srcs[2] = {a.data(), b.data()};
  for (auto _ : state) {
    check(state, reduce_into(c.data(), srcs, 2, n, DType::kFloat32, ReduceOp::kSum, Scale{}));
    benchmark::ClobberMemory();
  }
  set_bytes(state, 3 * n * sizeof(float));
}

// a += b (in place, what a reduce-scatter step does): reads 2 buffers, writes 1.
void BM_SumF32InPlace(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<float> a = make_floats(n, 1), b = make_floats(n, 2);
  const void* srcs[2] = {a.data(), b.data()};
  for (auto _ : state) {
    check(state, reduce_into(a.data(), srcs, 2, n, DType::kFloat32, ReduceOp::kSum, Scale{}));
    benchmark::ClobberMemory();
  }
  set_bytes(state, 3 * n * sizeof(float));
}

// The codec ops on n values. Wire bytes: 2 per value (fp16/bf16), 1 + 4/block (fp8).
template <int kDType, int kBlock>
struct Wire {
  static WireFormat fmt() { return {static_cast<DType>(kDType), kBlock}; }
};

template <class W>
void BM_Compress(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const WireFormat f = W::fmt();
  std::vector<float> a = make_floats(n, 1);
  std::vector<uint8_t> wire(wire_bytes(f, n));
  for (auto _ : state) {
    check(state, compress(wire.data(), a.data(), n, f, Scale{1.0, 4}));
    benchmark::ClobberMemory();
  }
  set_bytes(state, n * sizeof(float) + wire.size());
}

template <class W>
void BM_Decompress(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const WireFormat f = W::fmt();
  std::vector<float> a = make_floats(n, 1), out(n);
  std::vector<uint8_t> wire(wire_bytes(f, n));
  check(state, compress(wire.data(), a.data(), n, f, Scale{}));
  for (auto _ : state) {
    check(state, decompress(out.data(), wire.data(), n, f, Scale{1.0, 4}));
    benchmark::ClobberMemory();
  }
  set_bytes(state, n * sizeof(float) + wire.size());
}

template <class W>
void BM_DecompressReduce(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const WireFormat f = W::fmt();
  std::vector<float> a = make_floats(n, 1), acc = make_floats(n, 2);
  std::vector<uint8_t> wire(wire_bytes(f, n));
  check(state, compress(wire.data(), a.data(), n, f, Scale{}));
  for (auto _ : state) {
    // Scale 1/2 keeps acc bounded over the iterations.
    check(state, decompress_reduce(acc.data(), wire.data(), n, f, Scale{1.0, 2}));
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2 * n * sizeof(float) + wire.size());
}

template <class W>
void BM_DecompressReduceCompress(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const WireFormat f = W::fmt();
  std::vector<float> a = make_floats(n, 1), acc = make_floats(n, 2);
  std::vector<uint8_t> in(wire_bytes(f, n)), out(in.size());
  check(state, compress(in.data(), a.data(), n, f, Scale{}));
  for (auto _ : state) {
    check(state, decompress_reduce_compress(out.data(), acc.data(), in.data(), n, f,
                                            Scale{1.0, 2}));
    benchmark::ClobberMemory();
  }
  set_bytes(state, n * sizeof(float) + 2 * in.size());
}

using Fp16 = Wire<static_cast<int>(DType::kFloat16), 0>;
using Bf16 = Wire<static_cast<int>(DType::kBFloat16), 0>;
using E4m3 = Wire<static_cast<int>(DType::kFloat8E4M3), 128>;
using E5m2 = Wire<static_cast<int>(DType::kFloat8E5M2), 256>;

// 256 Ki floats = 1 MiB (in L2 on most machines), 16 Mi floats = 64 MiB (memory).
#define KOLO_SIZES ->Arg(1 << 18)->Arg(1 << 24)->Unit(benchmark::kMicrosecond)

BENCHMARK(BM_Memcpy) KOLO_SIZES;
BENCHMARK(BM_SumF32) KOLO_SIZES;
BENCHMARK(BM_SumF32InPlace) KOLO_SIZES;
BENCHMARK(BM_Compress<Fp16>) KOLO_SIZES;
BENCHMARK(BM_Compress<Bf16>) KOLO_SIZES;
BENCHMARK(BM_Compress<E4m3>) KOLO_SIZES;
BENCHMARK(BM_Compress<E5m2>) KOLO_SIZES;
BENCHMARK(BM_Decompress<Fp16>) KOLO_SIZES;
BENCHMARK(BM_Decompress<E4m3>) KOLO_SIZES;
BENCHMARK(BM_DecompressReduce<Fp16>) KOLO_SIZES;
BENCHMARK(BM_DecompressReduce<Bf16>) KOLO_SIZES;
BENCHMARK(BM_DecompressReduce<E4m3>) KOLO_SIZES;
BENCHMARK(BM_DecompressReduceCompress<Fp16>) KOLO_SIZES;
BENCHMARK(BM_DecompressReduceCompress<Bf16>) KOLO_SIZES;
BENCHMARK(BM_DecompressReduceCompress<E4m3>) KOLO_SIZES;
BENCHMARK(BM_DecompressReduceCompress<E5m2>) KOLO_SIZES;

}  // namespace
}  // namespace kolo

BENCHMARK_MAIN();
