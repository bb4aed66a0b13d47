// Numerics of compressed allreduce, simulated on the host with the real kernels: N ranks
// (2..64) each hold a vector; the result is compared with the exact (float64) sum.
//
// Schemes:
//   kolo direct  each rank encodes its piece once (fp16 on the wire), the owner decodes and
//                accumulates in fp32 (decompress, decompress_reduce ...,
//                decompress_reduce_compress), and the result is encoded once for the
//                allgather: one rounding per input plus one of the result.
//   kolo ring    a ring reduce-scatter whose wire carries the fp16 partial sum, decoded,
//                added in fp32 and re-encoded at every hop (decompress_reduce_compress
//                in place): N-1 roundings of growing partial sums. Shown to make clear
//                that the one-rounding bound needs the direct schedule.
//   naive        cast to fp16 and sum in fp16 across ranks, each hop rounding (Horovod's
//                and PyTorch's fp16 compression over an fp16 ring allreduce).
// Errors are in units of half an fp16 ulp of the exact result, i.e. one fp16 rounding
// (with mixed signs the sum is often much smaller than the partial sums, hence the large
// maxima of the schemes that round partial sums).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/compress.h"
#include "kernels/float_types.h"
#include "kernels/host_kernels.h"

namespace kolo {
namespace {

constexpr size_t kCount = 4096;
const WireFormat kFp16Wire{DType::kFloat16, 0};

// Half an ulp of fp16 at |x|: the largest error of one correct rounding to fp16.
double half_ulp_fp16(double x) {
  const double a = std::fabs(x);
  if (a < std::ldexp(1.0, -14)) return std::ldexp(1.0, -25);  // subnormal spacing / 2
  return std::ldexp(1.0, static_cast<int>(std::floor(std::log2(a))) - 11);
}

using Inputs = std::vector<std::vector<float>>;

std::vector<float> kolo_direct(const Inputs& x) {
  const size_t n = x.size();
  std::vector<std::vector<uint16_t>> wire(n, std::vector<uint16_t>(kCount));
  for (size_t r = 0; r < n; ++r) {
    EXPECT_TRUE(compress(wire[r].data(), x[r].data(), kCount, kFp16Wire, Scale{}).ok());
  }
  std::vector<float> acc(kCount), out(kCount);
  std::vector<uint16_t> result(kCount);
  EXPECT_TRUE(decompress(acc.data(), wire[0].data(), kCount, kFp16Wire, Scale{}).ok());
  for (size_t r = 1; r + 1 < n; ++r) {
    EXPECT_TRUE(decompress_reduce(acc.data(), wire[r].data(), kCount, kFp16Wire, Scale{}).ok());
  }
  EXPECT_TRUE(decompress_reduce_compress(result.data(), acc.data(), wire[n - 1].data(), kCount,
                                         kFp16Wire, Scale{})
                  .ok());
  EXPECT_TRUE(decompress(out.data(), result.data(), kCount, kFp16Wire, Scale{}).ok());
  return out;
}

std::vector<float> kolo_ring(const Inputs& x) {
  std::vector<uint16_t> wire(kCount);
  std::vector<float> out(kCount);
  EXPECT_TRUE(compress(wire.data(), x[0].data(), kCount, kFp16Wire, Scale{}).ok());
  for (size_t r = 1; r < x.size(); ++r) {
    EXPECT_TRUE(decompress_reduce_compress(wire.data(), x[r].data(), wire.data(), kCount,
                                           kFp16Wire, Scale{})
                    .ok());
  }
  EXPECT_TRUE(decompress(out.data(), wire.data(), kCount, kFp16Wire, Scale{}).ok());
  return out;
}

std::vector<float> naive_fp16(const Inputs& x) {
  std::vector<uint16_t> acc(kCount), in(kCount);
  std::vector<float> out(kCount);
  EXPECT_TRUE(compress(acc.data(), x[0].data(), kCount, kFp16Wire, Scale{}).ok());
  for (size_t r = 1; r < x.size(); ++r) {
    EXPECT_TRUE(compress(in.data(), x[r].data(), kCount, kFp16Wire, Scale{}).ok());
    const void* srcs[2] = {acc.data(), in.data()};
    EXPECT_TRUE(
        reduce_into(acc.data(), srcs, 2, kCount, DType::kFloat16, ReduceOp::kSum, Scale{}).ok());
  }
  EXPECT_TRUE(decompress(out.data(), acc.data(), kCount, kFp16Wire, Scale{}).ok());
  return out;
}

struct ErrStats {
  double max = 0, mean = 0;
};

// Error in units of `unit(i)`.
template <class Unit>
ErrStats measure(const std::vector<float>& got, const std::vector<double>& exact, Unit unit) {
  ErrStats s;
  for (size_t i = 0; i < kCount; ++i) {
    const double e = std::fabs(got[i] - exact[i]) / unit(i);
    s.max = std::max(s.max, e);
    s.mean += e / kCount;
  }
  return s;
}

struct Row {
  int n;
  ErrStats direct, ring, naive;
  // kolo direct's largest error over (one fp16 rounding of the sum + one of each input).
  double direct_vs_bound;
};

// Gradient-like data, N(mean, 1); fp16_inputs rounds them to fp16 first (data that is
// already half precision, as in mixed-precision training).
std::vector<Row> simulate(bool fp16_inputs, float mean) {
  std::vector<Row> rows;
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(mean, 1.0f);
  for (int n : {2, 3, 4, 8, 16, 32, 64}) {
    Inputs x(n, std::vector<float>(kCount));
    std::vector<double> exact(kCount, 0.0), abs_sum(kCount, 0.0);
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < kCount; ++i) {
        float v = dist(rng);
        if (fp16_inputs) v = half_to_float(float_to_half(v));
        x[r][i] = v;
        exact[i] += v;
        abs_sum[i] += half_ulp_fp16(v);
      }
    }
    // The bound also counts one rounding of each input: with fp32 inputs the wire must
    // round every input once, which no scheme that sends fp16 can avoid.
    auto unit = [&](size_t i) { return half_ulp_fp16(exact[i]); };
    auto bound = [&](size_t i) { return half_ulp_fp16(exact[i]) + abs_sum[i]; };
    const std::vector<float> direct = kolo_direct(x);
    rows.push_back({n, measure(direct, exact, unit), measure(kolo_ring(x), exact, unit),
                    measure(naive_fp16(x), exact, unit), measure(direct, exact, bound).max});
  }
  return rows;
}

void print(const char* title, const std::vector<Row>& rows) {
  std::printf("%s\n", title);
  std::printf("  %4s  %22s  %22s  %22s  %12s\n", "N", "kolo direct max/mean",
              "kolo ring max/mean", "naive fp16 max/mean", "direct/bound");
  for (const Row& r : rows) {
    std::printf("  %4d  %11.3f %10.3f  %11.3f %10.3f  %11.3f %10.3f  %12.3f\n", r.n,
                r.direct.max, r.direct.mean, r.ring.max, r.ring.mean, r.naive.max, r.naive.mean,
                r.direct_vs_bound);
  }
}

// Inputs already in fp16: the wire is exact, fp32 accumulation is (nearly) exact, and the
// result is rounded once, so kolo's error is at most one fp16 rounding whatever N is; the
// naive fp16 sum rounds at every hop and its error grows with N.
TEST(CompressionNumerics, Fp16InputsOneRoundingVersusNaive) {
  const std::vector<Row> rows = simulate(true, 0.0f);
  print("allreduce error, fp16 inputs N(0,1), in fp16 roundings of the exact sum "
        "(1.0 = half an ulp)",
        rows);
  for (const Row& r : rows) {
    EXPECT_LE(r.direct.max, 1.0 + 1e-3) << "N " << r.n;
  }
  EXPECT_GT(rows.back().naive.max, 4 * rows.back().direct.max);
  EXPECT_GT(rows.back().naive.mean, 4 * rows.front().naive.mean);
}

// fp32 inputs: each input is rounded once onto the wire; kolo's error stays within that
// plus one rounding of the result. With a common component in the data (mean 1), the
// input roundings average out against the growing sum and kolo stays near one rounding,
// while the naive sum's error grows with N.
TEST(CompressionNumerics, Fp32InputsWithinInputAndResultRounding) {
  const std::vector<Row> rows = simulate(false, 1.0f);
  print("allreduce error, fp32 inputs N(1,1), in fp16 roundings of the exact sum; "
        "direct/bound: "
        "kolo direct over (one rounding of the sum + one of each input)",
        rows);
  for (const Row& r : rows) {
    EXPECT_LE(r.direct_vs_bound, 1.0 + 1e-3) << "N " << r.n;
  }
  // Rows are N = 2, 3, 4, 8, 16, 32, 64; below N = 8 input rounding and cancellation
  // dominate every scheme alike.
  EXPECT_LE(rows.back().direct.max, 1.5);
  EXPECT_GT(rows.back().naive.mean, 2 * rows[3].naive.mean);
  EXPECT_GT(rows.back().naive.mean, 3 * rows.back().direct.mean);
}

}  // namespace
}  // namespace kolo
