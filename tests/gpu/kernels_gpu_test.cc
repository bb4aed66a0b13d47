// GPU tests (ctest label gpu): every CUDA kernel in kernels/cuda_kernels.h against its host
// twin, bit for bit, on random non-zero inputs, with the outputs poisoned before each run
// so that a skipped store shows, over tails and misaligned pointers. Without a usable GPU
// every test skips with the reason.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/compress.h"
#include "kernels/cuda_kernels.h"
#include "kernels/device_kernels.h"
#include "kernels/functors.h"
#include "kernels/host_kernels.h"
#include "support/device/device.h"

namespace kolo {
namespace {

constexpr uint8_t kPoison = 0xA5;
constexpr size_t kGuard = 64;  // bytes past every buffer that must stay poisoned

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n == 0) {
      GTEST_SKIP() << "no CUDA GPU (cudaGetDeviceCount: "
                   << (err != cudaSuccess ? cudaGetErrorString(err) : "0 devices")
                   << "); GPU kernel tests skipped";
    }
  }
};

// Device memory holding a copy of a host byte vector.
class DeviceBytes {
 public:
  explicit DeviceBytes(const std::vector<uint8_t>& host) : size_(host.size()) {
    EXPECT_EQ(cudaMalloc(&ptr_, size_), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(ptr_, host.data(), size_, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBytes() { cudaFree(ptr_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  uint8_t* get() { return static_cast<uint8_t*>(ptr_); }
  std::vector<uint8_t> to_host() const {
    std::vector<uint8_t> out(size_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(out.data(), ptr_, size_, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }

 private:
  void* ptr_ = nullptr;
  size_t size_;
};

// Non-zero random fp32: random sign, magnitude log-uniform in [2^lo, 2^hi).
float random_value(std::mt19937& rng, int lo, int hi) {
  std::uniform_real_distribution<double> e(lo, hi);
  const double v = std::exp2(e(rng));
  return static_cast<float>(rng() & 1 ? -v : v);
}

void expect_same_bytes(const std::vector<uint8_t>& host, const std::vector<uint8_t>& dev,
                       const std::string& what) {
  ASSERT_EQ(host.size(), dev.size());
  if (std::memcmp(host.data(), dev.data(), host.size()) == 0) return;
  for (size_t i = 0; i < host.size(); ++i) {
    ASSERT_EQ(host[i], dev[i]) << what << ": byte " << i << " of " << host.size();
  }
}

// ---------------------------------------------------------------------------------------
// Codec kernels.

enum class Op { kCompress, kDecompress, kDecompressReduce, kDrc };

const WireFormat kFormats[] = {{DType::kFloat16, 0},     {DType::kBFloat16, 0},
                               {DType::kFloat8E4M3, 128}, {DType::kFloat8E4M3, 256},
                               {DType::kFloat8E5M2, 128}, {DType::kFloat8E5M2, 256}};

// A float buffer and a wire-in buffer with random contents; an output buffer poisoned.
// fshift and wshift move the fp32 and wire pointers off 16-byte alignment (by multiples of
// 4 and of the wire's alignment, 2 for fp16/bf16 and 4 for fp8).
void run_codec_case(WireFormat wf, Op op, size_t count, size_t fshift, size_t wshift,
                    Scale scale, uint32_t seed) {
  const std::string what = str_cat(dtype_name(wf.dtype), "/", wf.block, " op ",
                                   static_cast<int>(op), " count ", count, " fshift ", fshift,
                                   " wshift ", wshift, " scale ", scale.factor, "/",
                                   scale.divisor);
  SCOPED_TRACE(what);
  std::mt19937 rng(seed);
  const size_t wbytes = wire_bytes(wf, count);
  std::vector<uint8_t> fl(fshift + count * 4 + kGuard, kPoison);
  std::vector<uint8_t> win(wshift + wbytes + kGuard, kPoison);
  std::vector<uint8_t> wout(wshift + wbytes + kGuard, kPoison);
  for (size_t i = 0; i < count; ++i) {
    const float v = random_value(rng, -10, 10);
    std::memcpy(&fl[fshift + 4 * i], &v, 4);
  }
  // A valid wire input: random values, compressed on the host, never zero codes.
  if (op != Op::kCompress) {
    std::vector<float> src(count);
    for (auto& v : src) v = random_value(rng, -6, 6);
    ASSERT_TRUE(compress(win.data() + wshift, src.data(), count, wf, Scale{}).ok());
  }
  if (op == Op::kDecompress) std::fill(fl.begin(), fl.end(), kPoison);

  DeviceBytes dfl(fl), dwin(win), dwout(wout);
  auto f_h = reinterpret_cast<float*>(fl.data() + fshift);
  auto f_d = reinterpret_cast<float*>(dfl.get() + fshift);
  uint8_t* win_h = win.data() + wshift;
  uint8_t* win_d = dwin.get() + wshift;
  uint8_t* wout_h = wout.data() + wshift;
  uint8_t* wout_d = dwout.get() + wshift;
  Status sh, sd;
  switch (op) {
    case Op::kCompress:
      sh = compress(wout_h, f_h, count, wf, scale);
      sd = cuda_compress(wout_d, f_d, count, wf, scale, nullptr);
      break;
    case Op::kDecompress:
      sh = decompress(f_h, win_h, count, wf, scale);
      sd = cuda_decompress(f_d, win_d, count, wf, scale, nullptr);
      break;
    case Op::kDecompressReduce:
      sh = decompress_reduce(f_h, win_h, count, wf, scale);
      sd = cuda_decompress_reduce(f_d, win_d, count, wf, scale, nullptr);
      break;
    case Op::kDrc:
      sh = decompress_reduce_compress(wout_h, f_h, win_h, count, wf, scale);
      sd = cuda_decompress_reduce_compress(wout_d, f_d, win_d, count, wf, scale, nullptr);
      break;
  }
  ASSERT_TRUE(sh.ok()) << sh.to_string();
  ASSERT_TRUE(sd.ok()) << sd.to_string();
  expect_same_bytes(fl, dfl.to_host(), "fp32 buffer");
  expect_same_bytes(wout, dwout.to_host(), "wire out");
}

TEST_F(Gpu, CodecKernelsMatchHostTwinsBitForBit) {
  const size_t counts[] = {1, 15, 16, 17, 127, 128, 129, 255, 256, 257, 4099, (1u << 20) + 3};
  const Scale scales[] = {Scale{}, Scale{2.0, 3}};
  uint32_t seed = 1;
  for (const WireFormat& wf : kFormats) {
    for (Op op : {Op::kCompress, Op::kDecompress, Op::kDecompressReduce, Op::kDrc}) {
      for (size_t count : counts) {
        const size_t walign = wf.block ? 4 : 2;
        const size_t shifts[3][2] = {{0, 0}, {4, 4}, {0, walign}};
        for (const auto& sh : shifts) {
          for (const Scale& sc : scales) {
            // The large case (many blocks per grid) once per format and op: it is slow to
            // fill and check on the host.
            if (count > 4099 && (sh != shifts[0] || &sc != &scales[0])) continue;
            run_codec_case(wf, op, count, sh[0], sh[1], sc, seed++);
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// fp8 block rules on the device: zero, NaN, inf and tiny blocks. NaN bits may differ
// between host and device (the device's NaN is canonical), so NaN matches any NaN here.
TEST_F(Gpu, Fp8SpecialBlocksMatchHost) {
  for (DType d : {DType::kFloat8E4M3, DType::kFloat8E5M2}) {
    const WireFormat wf{d, 128};
    constexpr size_t kCount = 128 * 5 + 9;
    std::vector<float> src(kCount, 0.0f);
    for (size_t i = 128; i < kCount; ++i) src[i] = 0.25f + static_cast<float>(i % 13);
    src[2 * 128 + 5] = NAN;
    src[3 * 128 + 9] = -INFINITY;
    for (size_t i = 4 * 128; i < 5 * 128; ++i) src[i] = 1e-31f;
    std::vector<uint8_t> src_bytes(kCount * 4), wire(wire_bytes(wf, kCount), kPoison);
    std::memcpy(src_bytes.data(), src.data(), src_bytes.size());
    DeviceBytes dsrc(src_bytes), dwire(wire);
    ASSERT_TRUE(compress(wire.data(), src.data(), kCount, wf, Scale{}).ok());
    ASSERT_TRUE(cuda_compress(dwire.get(), reinterpret_cast<float*>(dsrc.get()), kCount, wf,
                              Scale{}, nullptr)
                    .ok());
    const std::vector<uint8_t> got = dwire.to_host();
    const size_t soff = wire_scales_offset(wf, kCount);
    for (size_t i = 0; i < wire.size(); ++i) {
      if (i >= soff) {
        float h, g;
        std::memcpy(&h, &wire[i & ~size_t{3}], 4);
        std::memcpy(&g, &got[i & ~size_t{3}], 4);
        if (std::isnan(h) && std::isnan(g)) continue;
      } else if (i < kCount && (wire[i] & 0x7f) == 0x7f && (got[i] & 0x7f) == 0x7f) {
        continue;  // NaN code, either sign
      }
      ASSERT_EQ(wire[i], got[i]) << dtype_name(d) << " byte " << i;
    }
  }
}

// ---------------------------------------------------------------------------------------
// reduce_into / scale_copy.

// Random non-zero element of any dtype: integers any non-zero bits; floats a non-zero
// value in [2^-4, 2^4) rounded to the dtype (sums and products of up to 8 stay finite in
// float, so no NaN can arise, whose bits the host and device may spell differently).
void random_element(DType d, std::mt19937& rng, uint8_t* out) {
  const size_t es = dtype_size(d);
  if (!dtype_is_float(d)) {
    const uint64_t mask = es == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * es)) - 1;
    uint64_t v = 0;
    while (v == 0) v = (static_cast<uint64_t>(rng()) << 32 | rng()) & mask;
    std::memcpy(out, &v, es);
    return;
  }
  const float f = random_value(rng, -4, 4);
  uint64_t raw = 0;
  switch (d) {
    case DType::kFloat16: raw = float_to_half(f); break;
    case DType::kBFloat16: raw = float_to_bf16(f); break;
    case DType::kFloat8E4M3: raw = float_to_fp8_e4m3(f); break;
    case DType::kFloat8E5M2: raw = float_to_fp8_e5m2(f); break;
    case DType::kFloat32: raw = float_to_bits(f); break;
    default: {
      const double x = f;
      std::memcpy(&raw, &x, 8);
    }
  }
  std::memcpy(out, &raw, es);
}

// max_blocks other than the default goes through device_reduce_into on the cuda backend
// with that grid cap, so the grid-stride loops take several steps.
void run_reduce_case(DType d, ReduceOp op, int nsrcs, size_t count, size_t shift_elems,
                     Scale scale, std::mt19937& rng, unsigned max_blocks = kKernelMaxBlocks) {
  SCOPED_TRACE(str_cat(dtype_name(d), " ", op_name(op), " nsrcs ", nsrcs, " count ", count,
                       " shift ", shift_elems, " scale ", scale.factor, "/", scale.divisor,
                       " max_blocks ", max_blocks));
  const size_t es = dtype_size(d);
  const size_t shift = shift_elems * es;
  const size_t bytes = shift + count * es + kGuard;
  std::vector<std::vector<uint8_t>> src(nsrcs, std::vector<uint8_t>(bytes, kPoison));
  for (auto& s : src) {
    for (size_t i = 0; i < count; ++i) random_element(d, rng, &s[shift + i * es]);
  }
  std::vector<uint8_t> dst(bytes, kPoison);
  std::vector<std::unique_ptr<DeviceBytes>> dsrc;
  for (auto& s : src) dsrc.push_back(std::make_unique<DeviceBytes>(s));
  DeviceBytes ddst(dst);
  std::vector<const void*> hp, dp;
  for (int k = 0; k < nsrcs; ++k) {
    hp.push_back(src[k].data() + shift);
    dp.push_back(dsrc[k]->get() + shift);
  }
  Status sh, sd;
  if (max_blocks != kKernelMaxBlocks) {
    sh = reduce_into(dst.data() + shift, hp.data(), nsrcs, count, d, op, scale);
    sd = device_reduce_into(*device::cuda_ops(), ddst.get() + shift, dp.data(), nsrcs, count, d, op,
                            scale, nullptr, max_blocks);
  } else if (nsrcs == 1) {
    sh = scale_copy(dst.data() + shift, hp[0], count, d, scale);
    sd = cuda_scale_copy(ddst.get() + shift, dp[0], count, d, scale, nullptr);
  } else {
    sh = reduce_into(dst.data() + shift, hp.data(), nsrcs, count, d, op, scale);
    sd = cuda_reduce_into(ddst.get() + shift, dp.data(), nsrcs, count, d, op, scale, nullptr);
  }
  const std::vector<uint8_t> got = ddst.to_host();
  ASSERT_TRUE(sh.ok()) << sh.to_string();
  ASSERT_TRUE(sd.ok()) << sd.to_string();
  expect_same_bytes(dst, got, "dst");
}

TEST_F(Gpu, ReduceKernelsMatchHostTwinsBitForBit) {
  std::mt19937 rng(3);
  const Scale scales[] = {Scale{}, Scale{1.0, 3}, Scale{0.5, 3}};
  for (int di = 0; di < static_cast<int>(DType::kCount); ++di) {
    const DType d = static_cast<DType>(di);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
      for (int nsrcs : {1, 2, 3, 8}) {
        if (nsrcs == 1 && op != ReduceOp::kSum) continue;  // scale_copy
        for (size_t count : {1, 37, 4099}) {
          for (size_t shift : {0, 1}) {
            for (const Scale& sc : scales) {
              run_reduce_case(d, op, nsrcs, count, shift, sc, rng);
              if (HasFatalFailure()) return;
            }
          }
        }
      }
    }
    // One large case per dtype: many blocks and a grid-stride loop.
    run_reduce_case(d, ReduceOp::kSum, 4, (1u << 20) + 5, 0, Scale{1.0, 4}, rng);
    if (HasFatalFailure()) return;
  }
}

// Grids of 1, 2 and 3 blocks: every grid-stride loop (prologue, packs, tail) steps many
// times; shift 1 misaligns every pointer alike, so the bulk still goes by 16-byte vectors.
TEST_F(Gpu, ReduceKernelsWithCappedGrids) {
  std::mt19937 rng(5);
  for (int di = 0; di < static_cast<int>(DType::kCount); ++di) {
    const DType d = static_cast<DType>(di);
    for (unsigned cap : {1u, 2u, 3u}) {
      for (size_t shift : {0, 1}) {
        run_reduce_case(d, ReduceOp::kMax, 3, 4099, shift, Scale{2.0, 3}, rng, cap);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// The direct sums of several wires (decompress_sum, recompress_sum), 1..8 inputs, against
// the host functions byte for byte: aligned (vector path) and misaligned by 4 bytes (the
// element path), a count with a short fp8 block and a tail.
TEST_F(Gpu, CodecSumsMatchHostTwinsBitForBit) {
  constexpr size_t kCount = 777;
  for (DType d : {DType::kFloat16, DType::kBFloat16, DType::kFloat8E4M3, DType::kFloat8E5M2}) {
    const WireFormat wf = wire_format(d);
    const size_t wb = wire_bytes(wf, kCount);
    std::mt19937 rng(3);
    for (size_t shift : {size_t{0}, size_t{4}}) {
      std::vector<std::vector<uint8_t>> wires(kMaxWireInputs, std::vector<uint8_t>(wb + shift, kPoison));
      std::vector<std::unique_ptr<DeviceBytes>> dwires;
      const void* host_in[kMaxWireInputs];
      const void* dev_in[kMaxWireInputs];
      for (int k = 0; k < kMaxWireInputs; ++k) {
        std::vector<float> src(kCount);
        for (auto& v : src) v = random_value(rng, -3, 3);
        ASSERT_TRUE(compress(wires[k].data() + shift, src.data(), kCount, wf, Scale{}).ok());
        dwires.push_back(std::make_unique<DeviceBytes>(wires[k]));
        host_in[k] = wires[k].data() + shift;
        dev_in[k] = dwires[k]->get() + shift;
      }
      for (int n = 1; n <= kMaxWireInputs; ++n) {
        const std::string what = std::string(dtype_name(d)) + " inputs " + std::to_string(n) + " shift " +
                                 std::to_string(shift);
        std::vector<uint8_t> out_h(kCount * 4 + shift, kPoison);
        DeviceBytes out_d(out_h);
        ASSERT_TRUE(decompress_sum(reinterpret_cast<float*>(out_h.data() + shift), host_in, n, kCount, wf, Scale{1, 3}).ok());
        ASSERT_TRUE(cuda_decompress_sum(reinterpret_cast<float*>(out_d.get() + shift), dev_in, n, kCount, wf, Scale{1, 3},
                                        nullptr).ok());
        expect_same_bytes(out_h, out_d.to_host(), "decompress_sum " + what);
        std::vector<uint8_t> re_h(wb + shift, kPoison);
        DeviceBytes re_d(re_h);
        ASSERT_TRUE(recompress_sum(re_h.data() + shift, host_in, n, kCount, wf, Scale{2, 1}).ok());
        ASSERT_TRUE(cuda_recompress_sum(re_d.get() + shift, dev_in, n, kCount, wf, Scale{2, 1}, nullptr).ok());
        expect_same_bytes(re_h, re_d.to_host(), "recompress_sum " + what);
      }
    }
  }
}

}  // namespace
}  // namespace kolo
