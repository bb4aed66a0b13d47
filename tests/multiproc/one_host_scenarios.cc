// The multi-process worker's scenarios for the one-host path's own protocols: small
// messages through the fast boxes, compressed allreduce of host buffers, and ranks whose
// calls differ between the two paths. Checks count into worker_checks.h.
#include "one_host_scenarios.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "worker_checks.h"

namespace one_host_scenarios {

using worker_checks::expect;
using worker_checks::must;

// The one-host small-message path (engine/executors/local/fast_box.h) interleaved with the staging
// slots: counts either side of a box (1032 floats fit, 1033 do not), rotating roots (a
// root waits for nobody, so the next call must wait until the peers are done with its
// box), barriers in between, values that change every round. Ranks on other hosts or over
// TCP run the same calls through their own paths.
void small_messages(kolo_comm_t comm) {
  const int p = kolo_comm_size(comm), r = kolo_comm_rank(comm);
  const size_t counts[] = {1, 3, 1032, 1033, 257, 5000, 1032};
  for (int iter = 0; iter < 280; ++iter) {
    const size_t count = counts[iter % 7];
    const int root = (iter / 4) % p;
    const std::string what = "round " + std::to_string(iter) + " count " + std::to_string(count);
    std::vector<float> in(count), out(count * p, -1.0f);
    size_t wrong = 0;
    switch (iter % 6) {
      case 0:
        for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(r + iter + i % 7);
        must(kolo_allreduce(in.data(), out.data(), count, KOLO_FLOAT32, KOLO_SUM, comm, nullptr), "allreduce " + what);
        for (size_t i = 0; i < count; ++i) wrong += out[i] != static_cast<float>(p * (iter + i % 7) + p * (p - 1) / 2);
        break;
      case 1:
        for (size_t i = 0; i < count; ++i) in[i] = r == root ? static_cast<float>(iter * 3 + i % 5) : -2.0f;
        must(kolo_broadcast(in.data(), out.data(), count, KOLO_FLOAT32, root, comm, nullptr), "broadcast " + what);
        for (size_t i = 0; i < count; ++i) wrong += out[i] != static_cast<float>(iter * 3 + i % 5);
        break;
      case 2:
        for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(r * 2 + i % 3);
        must(kolo_reduce(in.data(), out.data(), count, KOLO_FLOAT32, KOLO_SUM, root, comm, nullptr), "reduce " + what);
        for (size_t i = 0; r == root && i < count; ++i) wrong += out[i] != static_cast<float>(p * (p - 1) + p * (i % 3));
        break;
      case 3:
        for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(r + iter + i % 3);
        must(kolo_allgather(in.data(), out.data(), count, KOLO_FLOAT32, comm, nullptr), "allgather " + what);
        for (int q = 0; q < p; ++q) {
          for (size_t i = 0; i < count; ++i) wrong += out[q * count + i] != static_cast<float>(q + iter + i % 3);
        }
        break;
      case 4: {  // a block of count for every rank; block q of rank r holds r + q + i % 5
        const size_t block = std::max<size_t>(1, count / p);
        std::vector<float> all(block * p), mine(block, -1.0f);
        for (int q = 0; q < p; ++q) {
          for (size_t i = 0; i < block; ++i) all[q * block + i] = static_cast<float>(r + q + i % 5);
        }
        must(kolo_reduce_scatter(all.data(), mine.data(), block, KOLO_FLOAT32, KOLO_SUM, comm, nullptr),
             "reduce_scatter " + what);
        for (size_t i = 0; i < block; ++i) wrong += mine[i] != static_cast<float>(p * (p - 1) / 2 + p * (r + i % 5));
        break;
      }
      default: {  // alltoall, in place every other time: rank q gets r * 100 + q + i % 3 from r
        const size_t block = std::max<size_t>(1, count / p);
        std::vector<float> all(block * p), got(block * p, -1.0f);
        for (int q = 0; q < p; ++q) {
          for (size_t i = 0; i < block; ++i) all[q * block + i] = static_cast<float>(r * 100 + q + i % 3);
        }
        float* result = iter % 12 == 5 ? all.data() : got.data();
        must(kolo_alltoall(all.data(), result, block, KOLO_FLOAT32, comm, nullptr), "alltoall " + what);
        for (int q = 0; q < p; ++q) {
          for (size_t i = 0; i < block; ++i) wrong += result[q * block + i] != static_cast<float>(q * 100 + r + i % 3);
        }
      }
    }
    expect(wrong == 0, what + ": " + std::to_string(wrong) + " wrong");
    if (iter % 10 == 9) must(kolo_barrier(comm), "barrier " + what);
  }
  // Broadcasts back to back from one root, which waits for nobody: it runs ahead of the
  // others until it must reuse a box they have not finished with.
  for (int iter = 0; iter < 100; ++iter) {
    const int root = p - 1;
    float value = r == root ? static_cast<float>(iter * 7 + 1) : -1.0f;
    float got = -2.0f;
    must(kolo_broadcast(&value, &got, 1, KOLO_FLOAT32, root, comm, nullptr), "broadcast run " + std::to_string(iter));
    expect(got == static_cast<float>(iter * 7 + 1), "broadcast run " + std::to_string(iter));
  }
}

// The small-call lane (engine/call_runner.h): a repeated small allreduce runs from the
// plan kept after its first call. Every dtype and op (AVG too: its divisor is kept with the
// lowered call), in place and not, more keys than the lane holds (it evicts and re-arms),
// broadcasts and staged calls of other sizes in between (they replace the one-host plan the
// lane must not share), fresh buffers every round (the lane swaps them in), and values that
// change every round. Then what the lane must refuse as the whole path does: a NULL or a
// partly overlapping buffer after the key was armed.
void small_lane(kolo_comm_t comm) {
  const int p = kolo_comm_size(comm), r = kolo_comm_rank(comm);
  const kolo_op_t ops[] = {KOLO_SUM, KOLO_PROD, KOLO_MIN, KOLO_MAX, KOLO_AVG};
  const size_t counts[] = {1, 2, 3, 5, 7, 64};  // six keys a dtype: more than the lane holds
  for (int iter = 0; iter < 240; ++iter) {
    const size_t count = counts[iter % 6];
    const kolo_op_t op = ops[(iter / 6) % 5];
    const kolo_dtype_t dtype = (iter / 30) % 2 == 0 ? KOLO_FLOAT64 : KOLO_INT32;
    const bool in_place = iter % 4 == 3;
    // Values 1 or 2 (products stay exact); rank r adds (r + iter + i) % 2.
    std::vector<double> in(count), expect_v(count);
    std::vector<int32_t> in_i(count);
    for (size_t i = 0; i < count; ++i) {
      double sum = 0, prod = 1, lo = 3, hi = 0;
      for (int q = 0; q < p; ++q) {
        const double v = 1 + (q + iter + i) % 2;
        sum += v, prod *= v, lo = std::min(lo, v), hi = std::max(hi, v);
      }
      expect_v[i] = op == KOLO_SUM ? sum : op == KOLO_PROD ? prod : op == KOLO_MIN ? lo : op == KOLO_MAX ? hi
                  : dtype == KOLO_INT32 ? std::trunc(sum / p) : sum * (1.0 / p);  // as kolo scales
      in[i] = 1 + (r + iter + i) % 2;
      in_i[i] = static_cast<int32_t>(in[i]);
    }
    const std::string what = "lane round " + std::to_string(iter) + " count " + std::to_string(count);
    size_t wrong = 0;
    if (dtype == KOLO_FLOAT64) {
      std::vector<double> out(count, -1);
      double* result = in_place ? in.data() : out.data();
      must(kolo_allreduce(in.data(), result, count, dtype, op, comm, nullptr), "allreduce " + what);
      for (size_t i = 0; i < count; ++i) wrong += result[i] != expect_v[i];
    } else {
      std::vector<int32_t> out(count, -1);
      int32_t* result = in_place ? in_i.data() : out.data();
      must(kolo_allreduce(in_i.data(), result, count, dtype, op, comm, nullptr), "allreduce " + what);
      for (size_t i = 0; i < count; ++i) wrong += result[i] != static_cast<int32_t>(expect_v[i]);
    }
    expect(wrong == 0, what + ": " + std::to_string(wrong) + " wrong");
    if (iter % 7 == 6) {  // another one-host plan of the same size, and a staged call
      double b = r == 0 ? iter : -1;
      must(kolo_broadcast(&b, &b, 1, KOLO_FLOAT64, 0, comm, nullptr), "broadcast " + what);
      expect(b == iter, "broadcast " + what);
      std::vector<float> big(5000, 1.0f);
      must(kolo_allreduce(big.data(), big.data(), big.size(), KOLO_FLOAT32, KOLO_SUM, comm, nullptr), "staged " + what);
      expect(big[4999] == static_cast<float>(p), "staged " + what);
    }
  }
  // The key armed (8 floats, out of place), then calls it must not run as they are.
  std::vector<float> a(16, 1.0f), b(16, 0.0f);
  for (int i = 0; i < 3; ++i) must(kolo_allreduce(a.data(), b.data(), 8, KOLO_FLOAT32, KOLO_SUM, comm, nullptr), "armed");
  expect(kolo_allreduce(a.data(), nullptr, 8, KOLO_FLOAT32, KOLO_SUM, comm, nullptr) == KOLO_ERR_INVALID_ARGUMENT,
         "a NULL recv on an armed key is refused");
  expect(kolo_allreduce(a.data(), a.data() + 4, 8, KOLO_FLOAT32, KOLO_SUM, comm, nullptr) == KOLO_ERR_INVALID_ARGUMENT,
         "partly overlapping buffers on an armed key are refused");
  expect(std::string(kolo_last_error()).find("overlap") != std::string::npos,
         std::string("the refusal names the overlap: ") + kolo_last_error());
  // Still usable, and still on the same call numbers everywhere.
  must(kolo_allreduce(a.data(), b.data(), 8, KOLO_FLOAT32, KOLO_SUM, comm, nullptr), "after the refusals");
  expect(b[7] == static_cast<float>(p), "after the refusals");
}

// Both ranks have run allreduces of 5 and of 6 floats (both keys armed), then rank 0 calls
// 5 where the others call 6: both run from their lanes, and the op signatures still catch
// it: every rank gets the mismatch (or the failure of the rank that saw it), not a hang
// or a sum of different shapes.
int mismatch_on_lane(kolo_comm_t comm) {
  const int r = kolo_comm_rank(comm);
  std::vector<float> a(8, 1.0f), b(8);
  for (int i = 0; i < 3; ++i) {
    for (size_t count : {size_t{5}, size_t{6}}) {
      must(kolo_allreduce(a.data(), b.data(), count, KOLO_FLOAT32, KOLO_SUM, comm, nullptr), "arming");
    }
  }
  const size_t count = r == 0 ? 5 : 6;
  kolo_result_t rc = kolo_allreduce(a.data(), b.data(), count, KOLO_FLOAT32, KOLO_SUM, comm, nullptr);
  std::printf("rank %d: allreduce of %zu on the lane returned %s: %s\n", r, count, kolo_result_string(rc),
              kolo_last_error());
  return rc == KOLO_ERR_MISMATCH || rc == KOLO_ERR_REMOTE ? 0 : 1;
}

// The wire types, each with half an ulp at 1.0: one rounding, relative.
struct Wire {
  kolo_dtype_t dtype;
  double unit;
};
constexpr Wire kWires[] = {{KOLO_FLOAT16, 0x1p-11}, {KOLO_BFLOAT16, 0x1p-8}, {KOLO_FLOAT8_E4M3, 0x1p-4},
                           {KOLO_FLOAT8_E5M2, 0x1p-3}};

// Compressed allreduce of host buffers (one host: the staging slots carry the wire type):
// every wire type x counts x in-place x one-shot/two-shot (KOLO_ALGO picks), the result
// within the bound of one rounding per contribution (one-shot) plus one of the result
// (two-shot) of the fp64 sum, and the same bits on every rank.
void compressed(kolo_comm_t comm) {
  const int p = kolo_comm_size(comm), me = kolo_comm_rank(comm);
  for (const Wire& w : kWires) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{4099}, (size_t{1} << 20) + 3}) {
      for (bool in_place : {false, true}) {
        std::vector<float> in(count), out(count, -1.0f);
        // Values in [1, 2): relative roundings bound the error of each contribution.
        for (size_t i = 0; i < count; ++i) in[i] = 1.0f + static_cast<float>((i * 7 + me * 13) % 1000) / 1000.0f;
        kolo_coll_options options = KOLO_COLL_OPTIONS_INIT;
        options.wire_dtype = w.dtype;
        float* result = in_place ? in.data() : out.data();
        const std::vector<float> mine = in;
        const std::string what = std::string("compressed allreduce, wire ") + std::to_string(w.dtype) + ", count " +
                                 std::to_string(count) + (in_place ? " in-place" : "");
        must(kolo_allreduce_ex(in.data(), result, count, KOLO_FLOAT32, KOLO_SUM, &options, comm, nullptr), what);
        size_t wrong = 0;
        for (size_t i = 0; i < count; ++i) {
          double exact = 0;
          for (int q = 0; q < p; ++q) exact += 1.0 + static_cast<double>(static_cast<float>((i * 7 + q * 13) % 1000) / 1000.0f);
          // Each contribution rounded once, the result once more (two-shot); fp32 sums on top.
          const double bound = exact * (2 * w.unit + p * 0x1p-23) * 1.01;
          wrong += !(std::fabs(result[i] - exact) <= bound);
        }
        expect(wrong == 0, what + ": " + std::to_string(wrong) + " elements out of bound");
        // The same bits everywhere: the minimum and maximum over the ranks are ours.
        std::vector<float> lo(count), hi(count);
        must(kolo_allreduce(result, lo.data(), count, KOLO_FLOAT32, KOLO_MIN, comm, nullptr), what + " (min)");
        must(kolo_allreduce(result, hi.data(), count, KOLO_FLOAT32, KOLO_MAX, comm, nullptr), what + " (max)");
        expect(count == 0 || (std::memcmp(lo.data(), result, count * sizeof(float)) == 0 &&
                              std::memcmp(hi.data(), result, count * sizeof(float)) == 0),
               what + ": ranks got different results");
      }
    }
  }
}

// Compressed reduce_scatter and allgather (kolo_reduce_scatter_ex / kolo_allgather_ex):
// every wire type x counts x in-place. reduce_scatter: within one rounding per
// contribution of the fp64 sum (no rounding of the result), and not exact (the wire ran).
// allgather: each value within one rounding, not all exact, and the same bits on every
// rank, the block's owner included.
void compressed_scatter_gather(kolo_comm_t comm) {
  const int p = kolo_comm_size(comm), me = kolo_comm_rank(comm);
  // Values in [1, 2): relative roundings bound each contribution's error.
  auto value = [](int rank, size_t j) { return 1.0f + static_cast<float>((j * 7 + rank * 13) % 1000) / 1000.0f; };
  for (const Wire& w : kWires) {
    kolo_coll_options options = KOLO_COLL_OPTIONS_INIT;
    options.wire_dtype = w.dtype;
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{4099}, (size_t{1} << 18) + 3}) {
      for (bool in_place : {false, true}) {
        const std::string tail = std::string(", wire ") + std::to_string(w.dtype) + ", count " + std::to_string(count) +
                                 (in_place ? " in-place" : "");
        // reduce_scatter: rank me gets block me of the sum.
        std::vector<float> in(count * p), out(count, -1.0f);
        for (size_t j = 0; j < in.size(); ++j) in[j] = value(me, j);
        float* result = in_place ? in.data() + me * count : out.data();
        std::string what = "compressed reduce_scatter" + tail;
        must(kolo_reduce_scatter_ex(in.data(), result, count, KOLO_FLOAT32, KOLO_SUM, &options, comm, nullptr), what);
        size_t wrong = 0, inexact = 0;
        for (size_t i = 0; i < count; ++i) {
          double exact = 0;
          for (int q = 0; q < p; ++q) exact += value(q, me * count + i);
          const double bound = exact * (w.unit + p * 0x1p-23) * 1.01;
          wrong += !(std::fabs(result[i] - exact) <= bound);
          inexact += std::fabs(result[i] - exact) > exact * p * 0x1p-23;
        }
        expect(wrong == 0, what + ": " + std::to_string(wrong) + " elements out of bound");
        expect(count < 1000 || inexact > 0, what + ": exact everywhere: the wire type did not run");

        // allgather: block q is rank q's input, rounded once.
        std::vector<float> mine(count), gathered(count * p, -1.0f);
        for (size_t i = 0; i < count; ++i) mine[i] = value(me, i);
        if (in_place) std::copy(mine.begin(), mine.end(), gathered.begin() + me * count);
        const float* send = in_place ? gathered.data() + me * count : mine.data();
        what = "compressed allgather" + tail;
        must(kolo_allgather_ex(send, gathered.data(), count, KOLO_FLOAT32, &options, comm, nullptr), what);
        wrong = inexact = 0;
        for (int q = 0; q < p; ++q) {
          for (size_t i = 0; i < count; ++i) {
            const double exact = value(q, i), got = gathered[q * count + i];
            wrong += !(std::fabs(got - exact) <= exact * w.unit * 1.01);
            inexact += got != exact;
          }
        }
        expect(wrong == 0, what + ": " + std::to_string(wrong) + " elements out of bound");
        expect(count < 1000 || inexact > 0, what + ": exact everywhere: the wire type did not run");
        std::vector<float> lo(count * p), hi(count * p);
        must(kolo_allreduce(gathered.data(), lo.data(), count * p, KOLO_FLOAT32, KOLO_MIN, comm, nullptr), what + " (min)");
        must(kolo_allreduce(gathered.data(), hi.data(), count * p, KOLO_FLOAT32, KOLO_MAX, comm, nullptr), what + " (max)");
        expect(count == 0 || (std::memcmp(lo.data(), gathered.data(), count * p * sizeof(float)) == 0 &&
                              std::memcmp(hi.data(), gathered.data(), count * p * sizeof(float)) == 0),
               what + ": ranks got different results");
      }
    }
  }
  // Scales are for reductions: an allgather with one is refused on the calling rank.
  kolo_coll_options scaled = KOLO_COLL_OPTIONS_INIT;
  scaled.postscale = 2.0;
  float x = 1.0f, all[64];
  expect(kolo_allgather_ex(&x, all, 1, KOLO_FLOAT32, &scaled, comm, nullptr) == KOLO_ERR_INVALID_ARGUMENT,
         "allgather with a postscale refused");
}

// Values the wire types cannot carry, as kernels/README.md says, alike on every rank: a
// contribution above fp16's range (70000) is +inf with fp16 and finite with bf16 and fp8
// (block-scaled); a NaN stays NaN; +inf is +inf with fp16 and bf16, and makes its whole
// fp8 block NaN. The special values sit 400 apart, so no fp8 block of 128 holds two.
void compressed_special_values(kolo_comm_t comm) {
  const int p = kolo_comm_size(comm), me = kolo_comm_rank(comm);
  const size_t count = 4096;
  const size_t kBig = 100, kNan = 500, kInf = 900;
  for (kolo_dtype_t wire : {KOLO_FLOAT16, KOLO_BFLOAT16, KOLO_FLOAT8_E4M3, KOLO_FLOAT8_E5M2}) {
    const bool fp8 = wire == KOLO_FLOAT8_E4M3 || wire == KOLO_FLOAT8_E5M2;
    kolo_coll_options options = KOLO_COLL_OPTIONS_INIT;
    options.wire_dtype = wire;
    std::vector<float> in(count), out(count * p);
    for (size_t i = 0; i < count; ++i) in[i] = 1.0f + static_cast<float>(i % 7) / 8.0f;
    in[kBig] = 70000.0f;
    if (me == 0) in[kNan] = std::nanf("");
    in[kInf] = INFINITY;
    const std::string tail = ", wire " + std::to_string(wire);
    auto expect_special = [&](const float* got, double big, const std::string& what) {
      expect(wire == KOLO_FLOAT16 ? got[kBig] == INFINITY : std::fabs(got[kBig] - big) <= big * 0x1p-2,
             what + ": 70000 per rank gave " + std::to_string(got[kBig]));
      expect(std::isnan(got[kNan]), what + ": NaN gave " + std::to_string(got[kNan]));
      expect(fp8 ? std::isnan(got[kInf]) : got[kInf] == INFINITY, what + ": +inf gave " + std::to_string(got[kInf]));
    };
    // allreduce (out of place, then every rank's result gathered exactly and compared).
    must(kolo_allreduce_ex(in.data(), out.data(), count, KOLO_FLOAT32, KOLO_SUM, &options, comm, nullptr),
         "special values allreduce" + tail);
    expect_special(out.data(), 70000.0 * p, "special values allreduce" + tail);
    std::vector<float> all(count * p);
    must(kolo_allgather(out.data(), all.data(), count, KOLO_FLOAT32, comm, nullptr), "gather results" + tail);
    bool same = true;
    for (int q = 1; q < p; ++q) same &= std::memcmp(all.data(), all.data() + q * count, count * sizeof(float)) == 0;
    expect(same, "special values allreduce" + tail + ": ranks got different bits");
    // allgather: every rank's block carries the same specials (rank 0's NaN in block 0).
    if (me != 0) in[kNan] = std::nanf("");
    must(kolo_allgather_ex(in.data(), out.data(), count, KOLO_FLOAT32, &options, comm, nullptr),
         "special values allgather" + tail);
    for (int q = 0; q < p; ++q) expect_special(out.data() + q * count, 70000.0, "special values allgather" + tail);
  }
}

// Ranks that ask for different wire types get KOLO_ERR_MISMATCH (or the failure of the
// rank that saw it), not data summed in two codes.
int mismatch_wire(kolo_comm_t comm) {
  const int r = kolo_comm_rank(comm), n = kolo_comm_size(comm);
  std::vector<float> a(100000, 1.0f), b(100000);
  kolo_coll_options options = KOLO_COLL_OPTIONS_INIT;
  options.wire_dtype = r == n - 1 ? KOLO_BFLOAT16 : KOLO_FLOAT16;
  kolo_result_t rc = kolo_allreduce_ex(a.data(), b.data(), a.size(), KOLO_FLOAT32, KOLO_SUM, &options, comm, nullptr);
  std::printf("rank %d: allreduce with wire %d returned %s: %s\n", r, options.wire_dtype, kolo_result_string(rc),
              kolo_last_error());
  return rc == KOLO_ERR_MISMATCH || rc == KOLO_ERR_REMOTE ? 0 : 1;
}

// One rank's allreduce fits a small-message box, the others' do not: every rank returns an
// error (the mismatch, or the failure of the rank that saw it) well before the timeout.
int mismatch_paths(kolo_comm_t comm) {
  const int r = kolo_comm_rank(comm), n = kolo_comm_size(comm);
  std::vector<float> a(100000, 1.0f), b(100000);
  const size_t count = r == n - 1 ? 100 : 100000;
  kolo_result_t rc = kolo_allreduce(a.data(), b.data(), count, KOLO_FLOAT32, KOLO_SUM, comm, nullptr);
  std::printf("rank %d: allreduce of %zu returned %s: %s\n", r, count, kolo_result_string(rc), kolo_last_error());
  return rc == KOLO_ERR_MISMATCH || rc == KOLO_ERR_REMOTE ? 0 : 1;
}

// The root's broadcast fits a small-message box, the others' does not: the root returns at
// once and runs on into small allreduces while the others wait for its staging slot. Every
// rank must get an error (the mismatch, or the failure of the rank that saw it) well
// before the timeout, not wait for it.
int mismatch_root_runs_on(kolo_comm_t comm) {
  const int r = kolo_comm_rank(comm);
  std::vector<float> a(100000, 1.0f), b(100000);
  kolo_result_t rc = kolo_broadcast(a.data(), b.data(), r == 0 ? 100 : 100000, KOLO_FLOAT32, 0, comm, nullptr);
  for (int i = 0; i < 3 && rc == KOLO_SUCCESS; ++i) {
    rc = kolo_allreduce(a.data(), b.data(), 4, KOLO_FLOAT32, KOLO_SUM, comm, nullptr);
  }
  std::printf("rank %d: returned %s: %s\n", r, kolo_result_string(rc), kolo_last_error());
  return rc == KOLO_ERR_MISMATCH || rc == KOLO_ERR_REMOTE ? 0 : 1;
}

}  // namespace one_host_scenarios
