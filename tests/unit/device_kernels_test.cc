// The device kernels (kernels/device_kernels.h) on the emulated device, which runs the
// same per-thread body as the CUDA build (kernels/reduce_body.h) block by block: results
// against the host twins (reduce_into / scale_copy) bit for bit, with the output poisoned
// and guarded so that a skipped or stray store shows, over every dtype and op, 1..8
// inputs, scales, counts around the 16-byte vector width, pointer offsets 0..15 bytes
// (same and different misalignment), in place, and grids capped at 1, 2, 3 blocks so
// that the grid-stride loops take several steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/device_kernels.h"
#include "kernels/dtype.h"
#include "kernels/float_types.h"
#include "kernels/host_kernels.h"
#include "support/clock.h"
#include "support/device/device.h"

namespace kolo {
namespace {

const device::DeviceOps& emu() { return device::emulated_ops(); }

constexpr uint8_t kPoison = 0xA5;
constexpr size_t kMaxCount = 4099;
constexpr size_t kSlotBytes = 16 + kMaxCount * 8 + 64;  // offset, data, guard
constexpr DType kDTypes[] = {DType::kInt8,    DType::kUint8,      DType::kInt32,
                             DType::kUint32,  DType::kInt64,      DType::kUint64,
                             DType::kFloat16, DType::kBFloat16,   DType::kFloat32,
                             DType::kFloat64, DType::kFloat8E4M3, DType::kFloat8E5M2};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax};
constexpr size_t kCounts[] = {0, 1, 7, 15, 16, 17, 1000, 4099};
constexpr unsigned kCaps[] = {1, 2, 3, kKernelMaxBlocks};

// Random non-zero element: integers any non-zero bits; floats a value in +-[2^-4, 2^4)
// rounded to the dtype, so that sums and products of up to 8 never make a NaN (whose bits
// are not part of the contract).
void random_element(DType d, std::mt19937& rng, uint8_t* out) {
  const size_t es = dtype_size(d);
  if (!dtype_is_float(d)) {
    const uint64_t mask = es == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * es)) - 1;
    uint64_t v = 0;
    while (v == 0) v = (static_cast<uint64_t>(rng()) << 32 | rng()) & mask;
    std::memcpy(out, &v, es);
    return;
  }
  const float mag = std::ldexp(1.0f + static_cast<float>(rng() % 4096) / 4096.0f,
                               static_cast<int>(rng() % 8) - 4);
  const float f = (rng() & 1) ? -mag : mag;
  uint64_t raw = 0;
  switch (d) {
    case DType::kFloat16: raw = float_to_half(f); break;
    case DType::kBFloat16: raw = float_to_bf16(f); break;
    case DType::kFloat8E4M3: raw = float_to_fp8_e4m3(f); break;
    case DType::kFloat8E5M2: raw = float_to_fp8_e5m2(f); break;
    case DType::kFloat32: std::memcpy(&raw, &f, 4); break;
    default: {
      const double x = f;
      std::memcpy(&raw, &x, 8);
    }
  }
  std::memcpy(out, &raw, es);
}

// Emulated device buffers reused by every case (a memfd mapping per case would dominate).
class DeviceKernels : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (auto& s : slots_) ASSERT_TRUE(emu().malloc(&s, kSlotBytes).ok());
  }
  static void TearDownTestSuite() {
    for (auto& s : slots_) EXPECT_TRUE(emu().free(s).ok());
  }
  static uint8_t* slot(int i) { return static_cast<uint8_t*>(slots_[i]); }
  static inline void* slots_[kMaxReduceInputs + 1] = {};
};

struct Case {
  DType dtype;
  ReduceOp op;
  int nsrcs;
  size_t count;
  Scale scale;
  size_t dst_off;                    // bytes, a multiple of the element size
  size_t src_off[kMaxReduceInputs];  // likewise
  bool in_place;                     // dst is srcs[0] (dst_off = src_off[0])
  bool use_scale_copy;               // nsrcs == 1 through scale_copy
  unsigned max_blocks;
};

std::string describe(const Case& c) {
  std::string s = str_cat(dtype_name(c.dtype), " ", op_name(c.op), " nsrcs ", c.nsrcs, " count ",
                          c.count, " scale ", c.scale.factor, "/", c.scale.divisor, " dst+",
                          c.dst_off, " srcs+");
  for (int k = 0; k < c.nsrcs; ++k) s = str_cat(s, c.src_off[k], k + 1 < c.nsrcs ? "," : "");
  return str_cat(s, c.in_place ? " in place" : "", c.use_scale_copy ? " scale_copy" : "",
                 " max_blocks ", c.max_blocks);
}

// Runs one case on the host twin and on the emulated device; compares every byte of the
// destination slot, guards included.
void run_case(const Case& c, uint8_t* const* slots, std::mt19937& rng) {
  SCOPED_TRACE(describe(c));
  const size_t es = dtype_size(c.dtype);
  std::vector<std::vector<uint8_t>> host(kMaxReduceInputs + 1, std::vector<uint8_t>(kSlotBytes, kPoison));
  for (int k = 0; k < c.nsrcs; ++k) {
    for (size_t i = 0; i < c.count; ++i) random_element(c.dtype, rng, &host[k + 1][c.src_off[k] + i * es]);
  }
  const int dslot = c.in_place ? 1 : 0;
  for (int s = 0; s <= c.nsrcs; ++s) std::memcpy(slots[s], host[s].data(), kSlotBytes);

  std::vector<const void*> hsrc, dsrc;
  for (int k = 0; k < c.nsrcs; ++k) {
    hsrc.push_back(host[k + 1].data() + c.src_off[k]);
    dsrc.push_back(slots[k + 1] + c.src_off[k]);
  }
  uint8_t* hdst = host[dslot].data() + c.dst_off;
  uint8_t* ddst = slots[dslot] + c.dst_off;
  Status sh, sd;
  if (c.use_scale_copy) {
    sh = scale_copy(hdst, hsrc[0], c.count, c.dtype, c.scale);
    sd = device_scale_copy(emu(), ddst, dsrc[0], c.count, c.dtype, c.scale, nullptr, c.max_blocks);
  } else {
    sh = reduce_into(hdst, hsrc.data(), c.nsrcs, c.count, c.dtype, c.op, c.scale);
    sd = device_reduce_into(emu(), ddst, dsrc.data(), c.nsrcs, c.count, c.dtype, c.op, c.scale,
                            nullptr, c.max_blocks);
  }
  ASSERT_TRUE(sh.ok()) << sh.to_string();
  ASSERT_TRUE(sd.ok()) << sd.to_string();
  ASSERT_TRUE(emu().stream_synchronize(nullptr, Deadline(30)).ok());
  const uint8_t* got = slots[dslot];
  const std::vector<uint8_t>& want = host[dslot];
  for (size_t i = 0; i < kSlotBytes; ++i) {
    if (got[i] != want[i]) {
      const bool inside = i >= c.dst_off && i < c.dst_off + c.count * es;
      FAIL() << "byte " << i << (inside ? str_cat(" (element ", (i - c.dst_off) / es, ")") : " (outside dst)")
             << ": device " << int(got[i]) << ", host " << int(want[i]);
    }
  }
}

const Scale kScales[] = {Scale{}, Scale{0.5, 1}, Scale{1.0, 3}, Scale{2.0, 3}};

// Every dtype, op, input count and count, with the scale, the grid cap and the offsets
// rotating: half the cases share one misalignment mod 16 (the peeled vector path), the
// others draw each pointer's offset on its own (mostly element by element).
TEST_F(DeviceKernels, MatchHostTwinsBitForBit) {
  std::mt19937 rng(12345);
  uint8_t* slots[kMaxReduceInputs + 1];
  for (int i = 0; i <= kMaxReduceInputs; ++i) slots[i] = slot(i);
  size_t n = 0;
  for (DType d : kDTypes) {
    const size_t es = dtype_size(d);
    for (ReduceOp op : kOps) {
      for (int nsrcs = 1; nsrcs <= kMaxReduceInputs; ++nsrcs) {
        for (size_t count : kCounts) {
          ++n;
          Case c{};
          c.dtype = d;
          c.op = op;
          c.nsrcs = nsrcs;
          c.count = count;
          c.scale = kScales[n % 4];
          if (n % 9 == 0) c.scale = Scale{1.0, nsrcs};  // AVG: integer division after the sum
          c.max_blocks = kCaps[(n / 4) % 4];
          const bool shared = n % 2 == 0;
          const size_t base = (rng() % 16) / es * es;
          c.dst_off = base;
          for (int k = 0; k < nsrcs; ++k) c.src_off[k] = shared ? base : (rng() % 16) / es * es;
          c.in_place = n % 5 == 0;
          if (c.in_place) c.dst_off = c.src_off[0];
          c.use_scale_copy = nsrcs == 1 && n % 3 == 0;
          run_case(c, slots, rng);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// Every shared misalignment 0..15 and every grid cap, for a 1-, 2- and 8-byte dtype: the
// prologue, the packs and the tail each start and end at every possible place, and with
// 1..3 blocks every loop runs many grid-stride steps.
TEST_F(DeviceKernels, EveryOffsetAndGridCap) {
  std::mt19937 rng(777);
  uint8_t* slots[kMaxReduceInputs + 1];
  for (int i = 0; i <= kMaxReduceInputs; ++i) slots[i] = slot(i);
  for (DType d : {DType::kFloat8E4M3, DType::kFloat16, DType::kFloat32, DType::kUint64}) {
    const size_t es = dtype_size(d);
    for (size_t off = 0; off < 16; off += es) {
      for (unsigned cap : kCaps) {
        for (size_t count : {size_t{17}, size_t{1000}, kMaxCount}) {
          Case c{};
          c.dtype = d;
          c.op = ReduceOp::kSum;
          c.nsrcs = 3;
          c.count = count;
          c.scale = Scale{2.0, 3};
          c.dst_off = off;
          for (int k = 0; k < 3; ++k) c.src_off[k] = off;
          c.max_blocks = cap;
          run_case(c, slots, rng);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// The work split: a shared misalignment peels a prologue and keeps the bulk vectorised;
// a different one goes element by element; the cap bounds the grid, so with one block of
// 256 threads the 1024 packs of 4099 floats take four grid-stride steps.
TEST(DeviceKernelsPlan, PeelsPrologueAndCapsTheGrid) {
  alignas(16) static float buf[4][kMaxCount + 13];  // rows of a multiple of 16 bytes
  const void* s4[2] = {buf[1] + 1, buf[2] + 1};
  ReducePlan p = plan_reduce(buf[0] + 1, s4, 2, kMaxCount, DType::kFloat32);
  EXPECT_EQ(p.head, 3u);
  EXPECT_EQ(p.npacks, (kMaxCount - 3) / 4);
  EXPECT_EQ(p.grid, 4u);  // 1024 packs / 256 threads
  p = plan_reduce(buf[0] + 1, s4, 2, kMaxCount, DType::kFloat32, 1);
  EXPECT_EQ(p.grid, 1u);
  const void* mixed[2] = {buf[1] + 1, buf[2] + 2};
  p = plan_reduce(buf[0] + 1, mixed, 2, kMaxCount, DType::kFloat32);
  EXPECT_EQ(p.npacks, 0u);
  EXPECT_EQ(p.grid, (kMaxCount + 255) / 256);
  const void* aligned[1] = {buf[1]};
  p = plan_reduce(buf[0], aligned, 1, 2, DType::kFloat32);
  EXPECT_EQ(p.head, 0u);
  EXPECT_EQ(p.npacks, 0u);
  EXPECT_EQ(p.grid, 1u);
  const void* s8[1] = {buf[1] + 2};
  p = plan_reduce(buf[0] + 2, s8, 1, 1, DType::kFloat32);  // the count ends inside the head
  EXPECT_EQ(p.head, 1u);
  EXPECT_EQ(p.npacks, 0u);
}

TEST_F(DeviceKernels, SameChecksAsTheHostTwins) {
  float* d = reinterpret_cast<float*>(slot(0));
  const void* srcs[2] = {slot(1), slot(2)};
  Status st = device_reduce_into(emu(), d, srcs, 2, 10, DType::kFloat32, ReduceOp::kAvg, Scale{}, nullptr);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("device_reduce_into: op avg"), std::string::npos) << st.message();
  st = device_reduce_into(emu(), d, srcs, 9, 10, DType::kFloat32, ReduceOp::kSum, Scale{}, nullptr);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  st = device_scale_copy(emu(), slot(0) + 1, slot(1), 10, DType::kFloat32, Scale{2.0, 1}, nullptr);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("device_scale_copy: dst"), std::string::npos) << st.message();
  st = device_scale_copy(emu(), d, d + 1, 10, DType::kFloat32, Scale{2.0, 1}, nullptr);
  EXPECT_NE(st.message().find("partly overlaps"), std::string::npos) << st.message();
  st = device_reduce_into(emu(), d, srcs, 2, 10, DType::kFloat32, ReduceOp::kSum, Scale{}, nullptr, 0);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
}

TEST_F(DeviceKernels, NoDeviceIsUnsupported) {
  const void* srcs[2] = {slot(1), slot(2)};
  Status st = device_reduce_into(device::none_ops(), slot(0), srcs, 2, 10, DType::kFloat32,
                                 ReduceOp::kSum, Scale{}, nullptr);
  EXPECT_EQ(st.code(), Code::kUnsupported);
  EXPECT_NE(st.message().find("no device runtime"), std::string::npos) << st.message();
}

// Codes and scales equal (fp8's padding between them is never written).
bool same_wire(const void* a, const void* b, WireFormat fmt, size_t count) {
  const size_t codes = count * dtype_size(fmt.dtype), scales = wire_scales_offset(fmt, count);
  const auto* x = static_cast<const uint8_t*>(a);
  const auto* y = static_cast<const uint8_t*>(b);
  return std::memcmp(x, y, codes) == 0 &&
         std::memcmp(x + scales, y + scales, wire_bytes(fmt, count) - std::max(scales, codes)) == 0;
}

// The codec launches on the emulated device give the host functions' bytes, on a stream;
// their argument checks are the host's.
TEST_F(DeviceKernels, CodecsMatchTheHostFunctions) {
  constexpr size_t kCount = 1001;
  std::mt19937 rng(5);
  std::vector<float> src(kCount);
  for (DType d : {DType::kFloat16, DType::kBFloat16, DType::kFloat8E4M3, DType::kFloat8E5M2}) {
    const WireFormat fmt = wire_format(d);
    const size_t wb = wire_bytes(fmt, kCount);
    const void* wires[3];
    std::vector<std::vector<uint8_t>> host_wires(3, std::vector<uint8_t>(wb));
    for (int k = 0; k < 3; ++k) {
      for (auto& v : src) v = std::ldexp(static_cast<float>(rng() % 2001) - 1000.0f, -7);
      // device: slots 1..3 hold the wires, slot 0 the source
      ASSERT_TRUE(emu().memcpy_async(slot(0), src.data(), kCount * 4, nullptr).ok());
      ASSERT_TRUE(device_compress(emu(), slot(k + 1), reinterpret_cast<const float*>(slot(0)), kCount, fmt,
                                  Scale{0.5, 1}, nullptr).ok());
      ASSERT_TRUE(compress(host_wires[k].data(), src.data(), kCount, fmt, Scale{0.5, 1}).ok());
      wires[k] = slot(k + 1);
      ASSERT_TRUE(emu().stream_synchronize(nullptr, Deadline(30)).ok());
      ASSERT_TRUE(same_wire(slot(k + 1), host_wires[k].data(), fmt, kCount)) << dtype_name(d) << " input " << k;
    }
    const void* host_ptrs[3] = {host_wires[0].data(), host_wires[1].data(), host_wires[2].data()};
    std::vector<float> want(kCount), got(kCount);
    ASSERT_TRUE(decompress_sum(want.data(), host_ptrs, 3, kCount, fmt, Scale{1, 3}).ok());
    ASSERT_TRUE(device_decompress_sum(emu(), reinterpret_cast<float*>(slot(0)), wires, 3, kCount, fmt, Scale{1, 3},
                                      nullptr).ok());
    ASSERT_TRUE(emu().memcpy_async(got.data(), slot(0), kCount * 4, nullptr).ok());
    ASSERT_TRUE(emu().stream_synchronize(nullptr, Deadline(30)).ok());
    ASSERT_EQ(std::memcmp(want.data(), got.data(), kCount * 4), 0) << dtype_name(d);
    std::vector<uint8_t> want_wire(wb), got_wire(wb);
    ASSERT_TRUE(recompress_sum(want_wire.data(), host_ptrs, 3, kCount, fmt, Scale{2, 1}).ok());
    ASSERT_TRUE(device_recompress_sum(emu(), slot(4), wires, 3, kCount, fmt, Scale{2, 1}, nullptr).ok());
    ASSERT_TRUE(emu().memcpy_async(got_wire.data(), slot(4), wb, nullptr).ok());
    ASSERT_TRUE(emu().stream_synchronize(nullptr, Deadline(30)).ok());
    ASSERT_TRUE(same_wire(want_wire.data(), got_wire.data(), fmt, kCount)) << dtype_name(d);
  }
  const void* none[1] = {nullptr};
  Status st = device_decompress_sum(emu(), reinterpret_cast<float*>(slot(0)), none, 1, 8, wire_format(DType::kFloat16),
                                    Scale{}, nullptr);
  EXPECT_NE(st.message().find("device_decompress_sum: wire input 0 is null"), std::string::npos) << st.message();
  st = device_compress(emu(), slot(1), reinterpret_cast<const float*>(slot(0)), 8, WireFormat{DType::kFloat32, 0},
                       Scale{}, nullptr);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  st = device_compress(device::none_ops(), slot(1), reinterpret_cast<const float*>(slot(0)), 8,
                       wire_format(DType::kFloat16), Scale{}, nullptr);
  EXPECT_EQ(st.code(), Code::kUnsupported);
}

}  // namespace
}  // namespace kolo
