// kernels/reduce_small.h gives reduce_into's bits, for every type and op it takes, 1-8
// inputs, odd counts, NaNs and infinities among the floats, misaligned buffers.
#include "kernels/reduce_small.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/host_kernels.h"

namespace kolo {
namespace {

template <class T>
T random_value(std::mt19937_64& rng, int i) {
  if constexpr (std::is_floating_point_v<T>) {
    if (i % 17 == 3) return std::numeric_limits<T>::quiet_NaN();
    if (i % 19 == 5) return -std::numeric_limits<T>::infinity();
    return static_cast<T>(std::uniform_real_distribution<double>(-1e6, 1e6)(rng));
  } else {
    return static_cast<T>(rng());
  }
}

template <class T>
void check_type(DType dtype) {
  std::mt19937_64 rng(42);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
    for (int n = 1; n <= 8; ++n) {
      for (size_t count : {size_t{1}, size_t{3}, size_t{11}, kReduceSmallMaxBytes / sizeof(T)}) {  // 11: blocks and a tail
        // One byte past alignment, as a user's buffer may be.
        std::vector<std::vector<unsigned char>> in(n, std::vector<unsigned char>(count * sizeof(T) + 1));
        std::vector<const void*> srcs;
        for (int k = 0; k < n; ++k) {
          for (size_t j = 0; j < count; ++j) {
            const T v = random_value<T>(rng, static_cast<int>(k * 7 + j));
            std::memcpy(in[k].data() + 1 + j * sizeof(T), &v, sizeof v);
          }
          srcs.push_back(in[k].data() + 1);
        }
        std::vector<unsigned char> fast(count * sizeof(T) + 1), slow(count * sizeof(T));
        ASSERT_TRUE(reduce_small(fast.data() + 1, srcs.data(), n, count, dtype, op));
        // reduce_into wants aligned inputs: the same values, aligned.
        std::vector<std::vector<T>> aligned(n, std::vector<T>(count));
        std::vector<const void*> aligned_srcs;
        for (int k = 0; k < n; ++k) {
          std::memcpy(aligned[k].data(), srcs[k], count * sizeof(T));
          aligned_srcs.push_back(aligned[k].data());
        }
        std::vector<T> out(count);
        ASSERT_TRUE(reduce_into(out.data(), aligned_srcs.data(), n, count, dtype, op, Scale{}).ok());
        EXPECT_EQ(std::memcmp(fast.data() + 1, out.data(), count * sizeof(T)), 0)
            << dtype_name(dtype) << " " << op_name(op) << " n=" << n << " count=" << count;
      }
    }
  }
}

TEST(ReduceSmall, SameBitsAsReduceInto) {
  check_type<float>(DType::kFloat32);
  check_type<double>(DType::kFloat64);
  check_type<int32_t>(DType::kInt32);
  check_type<uint32_t>(DType::kUint32);
  check_type<int64_t>(DType::kInt64);
  check_type<uint64_t>(DType::kUint64);
}

TEST(ReduceSmall, LeavesTheRestToReduceInto) {
  constexpr size_t kOver = kReduceSmallMaxBytes / sizeof(float) + 1;  // 4 bytes too many
  float a[kOver] = {}, b[kOver] = {};
  const void* srcs[2] = {a, b};
  EXPECT_FALSE(reduce_small(a, srcs, 2, kOver, DType::kFloat32, ReduceOp::kSum));
  EXPECT_FALSE(reduce_small(a, srcs, 2, 4, DType::kFloat16, ReduceOp::kSum));   // computed in float
  EXPECT_FALSE(reduce_small(a, srcs, 2, 4, DType::kFloat32, ReduceOp::kAvg));   // lowered before here
  EXPECT_FALSE(reduce_small(a, srcs, 0, 4, DType::kFloat32, ReduceOp::kSum));
}

}  // namespace
}  // namespace kolo
