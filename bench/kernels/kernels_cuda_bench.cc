// kolo_kernels_cuda_bench: the CUDA kernels' memory bandwidth against the device-to-device
// copy bandwidth measured in the same run, and the fused decompress-reduce-compress step
// against the unfused sequence (decompress, add, scale, compress as separate kernels).
//
//   kolo_kernels_cuda_bench [MiB ...]      sizes of the fp32 buffer, default 64 256
//
// GB/s = (bytes read + bytes written) / time, for the copy too (2 x its size), so every
// percentage compares memory traffic. Without a GPU it says so and exits 0.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "kernels/compress.h"
#include "kernels/cuda_kernels.h"

namespace kolo {
namespace {

#define CUDA_OK(expr)                                                                  \
  do {                                                                                 \
    const cudaError_t e_ = (expr);                                                     \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s failed: %s\n", #expr, cudaGetErrorString(e_));         \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

void must(const Status& st) {
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.to_string().c_str());
    std::exit(1);
  }
}

// Seconds per call of fn: a few warm-up calls, then the best of 5 timed batches.
double time_per_call(const std::function<void()>& fn) {
  for (int i = 0; i < 3; ++i) fn();
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  constexpr int kIters = 10;
  float best_ms = 1e30f;
  for (int batch = 0; batch < 5; ++batch) {
    CUDA_OK(cudaEventRecord(start));
    for (int i = 0; i < kIters; ++i) fn();
    CUDA_OK(cudaEventRecord(stop));
    CUDA_OK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
    best_ms = std::min(best_ms, ms);
  }
  CUDA_OK(cudaGetLastError());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best_ms / 1e3 / kIters;
}

struct Buffers {
  size_t n;
  float *a, *b, *c, *tmp;
  void *win, *wout;
};

void fill(const Buffers& buf) {
  std::vector<float> h(buf.n);
  // Values in about [-2, 2], none zero.
  for (size_t i = 0; i < buf.n; ++i) {
    h[i] = static_cast<float>((i * 2654435761u) % 2001) / 500.0f - 2.0f + 1e-3f;
  }
  CUDA_OK(cudaMemcpy(buf.a, h.data(), buf.n * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(buf.b, h.data(), buf.n * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(buf.c, h.data(), buf.n * 4, cudaMemcpyHostToDevice));
}

void report(const char* name, double bytes, double seconds, double copy_gbps) {
  const double gbps = bytes / seconds / 1e9;
  std::printf("  %-44s %10.1f us %9.1f GB/s %6.1f%% of copy\n", name, seconds * 1e6, gbps,
              100.0 * gbps / copy_gbps);
}

void run_size(size_t mib) {
  Buffers buf{};
  buf.n = mib * (size_t{1} << 20) / sizeof(float);
  const size_t n = buf.n;
  const size_t fbytes = n * sizeof(float);
  const size_t wmax = wire_bytes({DType::kFloat16, 0}, n) + 4096;
  CUDA_OK(cudaMalloc(&buf.a, fbytes));
  CUDA_OK(cudaMalloc(&buf.b, fbytes));
  CUDA_OK(cudaMalloc(&buf.c, fbytes));
  CUDA_OK(cudaMalloc(&buf.tmp, fbytes));
  CUDA_OK(cudaMalloc(&buf.win, wmax));
  CUDA_OK(cudaMalloc(&buf.wout, wmax));
  fill(buf);

  std::printf("\nfp32 buffer %zu MiB (%zu values)\n", mib, n);
  const double t_copy = time_per_call(
      [&] { CUDA_OK(cudaMemcpyAsync(buf.c, buf.a, fbytes, cudaMemcpyDeviceToDevice, nullptr)); });
  const double copy_gbps = 2.0 * fbytes / t_copy / 1e9;
  report("cudaMemcpy D2D (reference)", 2.0 * fbytes, t_copy, copy_gbps);

  const void* srcs2[2] = {buf.a, buf.b};
  report("reduce_into f32 sum, 2 inputs", 3.0 * fbytes, time_per_call([&] {
           must(cuda_reduce_into(buf.c, srcs2, 2, n, DType::kFloat32, ReduceOp::kSum, Scale{},
                                 nullptr));
         }), copy_gbps);
  const void* srcs8[8] = {buf.a, buf.b, buf.a, buf.b, buf.a, buf.b, buf.a, buf.b};
  report("reduce_into f32 sum, 8 inputs, scaled 1/8", 9.0 * fbytes, time_per_call([&] {
           must(cuda_reduce_into(buf.c, srcs8, 8, n, DType::kFloat32, ReduceOp::kSum,
                                 Scale{1.0, 8}, nullptr));
         }), copy_gbps);
  report("scale_copy f32 x0.5", 2.0 * fbytes, time_per_call([&] {
           must(cuda_scale_copy(buf.c, buf.a, n, DType::kFloat32, Scale{0.5, 1}, nullptr));
         }), copy_gbps);

  const WireFormat formats[] = {{DType::kFloat16, 0},
                                {DType::kBFloat16, 0},
                                {DType::kFloat8E4M3, 128},
                                {DType::kFloat8E5M2, 256}};
  const Scale half{1.0, 2};
  for (const WireFormat& wf : formats) {
    const double wb = static_cast<double>(wire_bytes(wf, n));
    const std::string tag = std::string(dtype_name(wf.dtype)) +
                            (wf.block ? "/" + std::to_string(wf.block) : std::string());
    must(cuda_compress(buf.win, buf.a, n, wf, Scale{}, nullptr));
    report(("compress " + tag).c_str(), fbytes + wb, time_per_call([&] {
             must(cuda_compress(buf.wout, buf.a, n, wf, half, nullptr));
           }), copy_gbps);
    report(("decompress " + tag).c_str(), fbytes + wb, time_per_call([&] {
             must(cuda_decompress(buf.c, buf.win, n, wf, half, nullptr));
           }), copy_gbps);
    report(("decompress_reduce " + tag).c_str(), 2.0 * fbytes + wb, time_per_call([&] {
             must(cuda_decompress_reduce(buf.c, buf.win, n, wf, half, nullptr));
           }), copy_gbps);
    const double t_fused = time_per_call([&] {
      must(cuda_decompress_reduce_compress(buf.wout, buf.b, buf.win, n, wf, half, nullptr));
    });
    report(("decompress_reduce_compress " + tag).c_str(), fbytes + 2 * wb, t_fused, copy_gbps);
    // The same step as separate kernels: decode to fp32, add, scale, encode.
    const double t_unfused = time_per_call([&] {
      must(cuda_decompress(buf.tmp, buf.win, n, wf, Scale{}, nullptr));
      const void* s[2] = {buf.tmp, buf.b};
      must(cuda_reduce_into(buf.tmp, s, 2, n, DType::kFloat32, ReduceOp::kSum, Scale{},
                            nullptr));
      must(cuda_scale_copy(buf.tmp, buf.tmp, n, DType::kFloat32, half, nullptr));
      must(cuda_compress(buf.wout, buf.tmp, n, wf, Scale{}, nullptr));
    });
    report(("  unfused: decompress, add, scale, compress " + tag).c_str(), fbytes + 2 * wb,
           t_unfused, copy_gbps);
    std::printf("  %-44s %10.2fx\n", ("fused speed-up " + tag).c_str(), t_unfused / t_fused);
  }
  cudaFree(buf.a);
  cudaFree(buf.b);
  cudaFree(buf.c);
  cudaFree(buf.tmp);
  cudaFree(buf.win);
  cudaFree(buf.wout);
}

}  // namespace
}  // namespace kolo

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("kolo_kernels_cuda_bench: no CUDA GPU (%s); nothing measured\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 0;
  }
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  std::printf("kolo_kernels_cuda_bench on %s (sm_%d%d, %d SMs)\n", prop.name, prop.major,
              prop.minor, prop.multiProcessorCount);
  std::vector<size_t> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::strtoull(argv[i], nullptr, 10));
  if (sizes.empty()) sizes = {64, 256};
  for (size_t mib : sizes) {
    if (mib > 0) kolo::run_size(mib);
  }
  return 0;
}
