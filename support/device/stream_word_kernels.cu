// The cuda backend's stand-in for stream memory operations on devices or drivers without
// them (cuStreamWaitValue32 returns CUDA_ERROR_NOT_SUPPORTED): a one-thread kernel that
// polls the word, and one that writes it. The wait gives up at its deadline (a GPU's
// %globaltimer), so even a word never written does not hold the stream forever.
#include <cuda_runtime.h>

#include <cstdint>

#include "support/status.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
#error "%globaltimer and __nanosleep need sm_70 or newer"
#endif

namespace kolo::device {
namespace {

__device__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void wait_word_kernel(const volatile uint32_t* word, uint32_t value, uint64_t timeout_ns) {
  const uint64_t start = now_ns();
  while (static_cast<int32_t>(*word - value) < 0) {
    if (now_ns() - start > timeout_ns) return;
    __nanosleep(500);
  }
  __threadfence_system();  // what the writer wrote before the word is seen after the wait
}

__global__ void write_word_kernel(volatile uint32_t* word, uint32_t value) {
  __threadfence_system();  // the stream's earlier writes first
  *word = value;
}

Status launched(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status();
  return error(Code::kSystem, "cuda: ", what, " kernel launch: ", cudaGetErrorString(err));
}

}  // namespace

Status cuda_wait_word_kernel(void* stream, uint32_t* word, uint32_t value, double timeout_s) {
  const auto timeout_ns = static_cast<uint64_t>(timeout_s * 1e9);
  wait_word_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(word, value, timeout_ns);
  return launched(cudaPeekAtLastError(), "wait_value");
}

Status cuda_write_word_kernel(void* stream, uint32_t* word, uint32_t value) {
  write_word_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(word, value);
  return launched(cudaPeekAtLastError(), "write_value");
}

}  // namespace kolo::device
