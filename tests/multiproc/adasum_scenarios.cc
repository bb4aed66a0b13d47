#include "adasum_scenarios.h"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/float_types.h"
#include "worker_checks.h"

namespace adasum_scenarios {
namespace {

using worker_checks::expect;
using worker_checks::must;

using Vec = std::vector<double>;

// The reference, written from the definition and not from kolo's code: the pair
// combination in fp64, the ranks beyond the largest power of two p folded into ranks
// 0..n-p-1, then the binary tree over the p vectors in rank order.
Vec pair(const Vec& a, const Vec& b) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  const double tiny = std::sqrt(DBL_MIN);
  const double ca = aa >= tiny ? 1 - dot / (2 * aa) : 1, cb = bb >= tiny ? 1 - dot / (2 * bb) : 1;
  Vec out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = ca * a[i] + cb * b[i];
  return out;
}

Vec reference(std::vector<Vec> g) {
  const size_t n = g.size();
  size_t p = 1;
  while (p * 2 <= n) p *= 2;
  for (size_t i = 0; i + p < n; ++i) g[i] = pair(g[i], g[i + p]);
  g.resize(p);
  while (g.size() > 1) {
    std::vector<Vec> next;
    for (size_t k = 0; k < g.size(); k += 2) next.push_back(pair(g[k], g[k + 1]));
    g = next;
  }
  return g[0];
}

size_t elem_size(kolo_dtype_t t) { return t == KOLO_FLOAT64 ? 8 : t == KOLO_FLOAT32 ? 4 : 2; }

double load(const std::vector<char>& buf, size_t i, kolo_dtype_t t) {
  const char* p = buf.data() + i * elem_size(t);
  if (t == KOLO_FLOAT64) { double v; std::memcpy(&v, p, 8); return v; }
  if (t == KOLO_FLOAT32) { float v; std::memcpy(&v, p, 4); return v; }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return t == KOLO_FLOAT16 ? kolo::half_to_float(h) : kolo::bf16_to_float(h);
}

void store(std::vector<char>& buf, size_t i, kolo_dtype_t t, double v) {
  char* p = buf.data() + i * elem_size(t);
  if (t == KOLO_FLOAT64) { std::memcpy(p, &v, 8); return; }
  const float f = static_cast<float>(v);
  if (t == KOLO_FLOAT32) { std::memcpy(p, &f, 4); return; }
  const uint16_t h = t == KOLO_FLOAT16 ? kolo::float_to_half(f) : kolo::float_to_bf16(f);
  std::memcpy(p, &h, 2);
}

// Rank r's input, as the dtype holds it: every rank can make every rank's. kind 0: random
// normal; 1: orthogonal (rank r's vector lives on its own coordinates); 2: parallel (one
// direction, a scale per rank).
std::vector<char> input(int r, size_t count, kolo_dtype_t t, int kind) {
  std::vector<char> buf(count * elem_size(t));
  std::mt19937_64 gen(1000003u * (r + 1) + count * 31 + t);
  std::mt19937_64 shared(77 + count);
  // One distribution per engine: a normal_distribution keeps a spare value between calls.
  std::normal_distribution<double> own(0, 1), common(0, 1);
  const double scale = 0.5 + r;
  for (size_t i = 0; i < count; ++i) {
    double v = own(gen);
    if (kind == 1) v = (i % 7 == static_cast<size_t>(r) % 7) ? v : 0;
    if (kind == 2) v = scale * common(shared);
    store(buf, i, t, v);
  }
  return buf;
}

const char* dtype_label(kolo_dtype_t t) {
  return t == KOLO_FLOAT64 ? "float64" : t == KOLO_FLOAT32 ? "float32" : t == KOLO_FLOAT16 ? "float16" : "bfloat16";
}

// One unit of rounding of the type; the result is rounded once per tree level.
double unit(kolo_dtype_t t) {
  return t == KOLO_FLOAT64 ? DBL_EPSILON : t == KOLO_FLOAT32 ? FLT_EPSILON : t == KOLO_FLOAT16 ? 9.8e-4 : 7.9e-3;
}

// Every rank holds the same bits: MAX of (h, ~h) is (h, ~h) everywhere only if all h agree.
bool same_on_every_rank(kolo_comm_t comm, const std::vector<char>& buf) {
  uint64_t h = 1469598103934665603ull;
  for (char c : buf) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  uint64_t words[2] = {h, ~h};
  must(kolo_allreduce(words, words, 2, KOLO_UINT64, KOLO_MAX, comm, nullptr), "digest allreduce");
  return words[0] == h && words[1] == ~h;
}

void check_results(kolo_comm_t comm) {
  const int n = kolo_comm_size(comm), me = kolo_comm_rank(comm);
  int levels = 1;
  for (int p = 1; p < n; p *= 2) ++levels;
  for (kolo_dtype_t t : {KOLO_FLOAT64, KOLO_FLOAT32, KOLO_FLOAT16, KOLO_BFLOAT16}) {
    for (size_t count : {size_t{1}, size_t{7}, size_t{1000}, size_t{65537}}) {
      for (int kind : {0, 1, 2}) {
        for (bool in_place : {true, false}) {
          std::vector<Vec> all(n);
          for (int r = 0; r < n; ++r) {
            const std::vector<char> in = input(r, count, t, kind);
            for (size_t i = 0; i < count; ++i) all[r].push_back(load(in, i, t));
          }
          const Vec want = reference(all);
          std::vector<char> send = input(me, count, t, kind), recv(send.size());
          std::vector<char>& out = in_place ? send : recv;
          const std::string what = std::string("adasum ") + dtype_label(t) + " count " + std::to_string(count) +
                                   " kind " + std::to_string(kind) + (in_place ? " in-place" : " out-of-place");
          must(kolo_allreduce(send.data(), out.data(), count, t, KOLO_ADASUM, comm, nullptr), what);
          double err = 0, norm = 0;
          for (size_t i = 0; i < count; ++i) {
            const double d = load(out, i, t) - want[i];
            err += d * d;
            norm += want[i] * want[i];
          }
          // Relative to the largest of the result and the inputs: each level rounds values
          // as large as its inputs, and a pair that nearly cancels leaves a small result.
          for (int r = 0; r < n; ++r) {
            double in_norm = 0;
            for (double v : all[r]) in_norm += v * v;
            norm = std::max(norm, in_norm);
          }
          const double rel = std::sqrt(err / (norm > 0 ? norm : 1));
          // One rounding to the type per level, and the dot products' own fp64 rounding
          // (kolo and the reference add in different orders).
          const double tolerance = 4 * levels * (unit(t) + 4 * std::sqrt(static_cast<double>(count)) * DBL_EPSILON);
          expect(rel <= tolerance, what + ": relative error " + std::to_string(rel) + " against the fp64 reference");
          expect(same_on_every_rank(comm, out), what + ": ranks hold different bits");
          if (kind == 1) {  // orthogonal: the sum
            double sum_err = 0;
            for (size_t i = 0; i < count; ++i) {
              double s = 0;
              for (int r = 0; r < n; ++r) s += all[r][i];
              sum_err = std::max(sum_err, std::fabs(load(out, i, t) - s));
            }
            expect(sum_err <= 4 * levels * unit(t) * 8, what + ": orthogonal inputs do not sum");
          }
          if (kind == 2 && (n & (n - 1)) == 0) {  // parallel, power of two: the average
            double avg_err = 0;
            for (size_t i = 0; i < count; ++i) {
              double s = 0;
              for (int r = 0; r < n; ++r) s += all[r][i];
              avg_err = std::max(avg_err, std::fabs(load(out, i, t) - s / n));
            }
            expect(avg_err <= 4 * levels * unit(t) * 8 * n, what + ": parallel inputs do not average");
          }
        }
      }
    }
  }
  // Scales: prescale before, postscale after (Horovod's order).
  std::vector<char> x = input(me, 100, KOLO_FLOAT64, 0), y = x;
  kolo_coll_options options = KOLO_COLL_OPTIONS_INIT;
  options.prescale = 2.0;
  options.postscale = 0.25;
  must(kolo_allreduce(x.data(), x.data(), 100, KOLO_FLOAT64, KOLO_ADASUM, comm, nullptr), "adasum unscaled");
  must(kolo_allreduce_ex(y.data(), y.data(), 100, KOLO_FLOAT64, KOLO_ADASUM, &options, comm, nullptr), "adasum scaled");
  double worst = 0;
  // Adasum is homogeneous of degree 1: adasum(2g) = 2 adasum(g); then * 0.25.
  for (size_t i = 0; i < 100; ++i) worst = std::max(worst, std::fabs(load(y, i, KOLO_FLOAT64) - 0.5 * load(x, i, KOLO_FLOAT64)));
  expect(worst < 1e-12, "adasum with prescale 2 and postscale 0.25 is not half the plain result");
}

void check_errors(kolo_comm_t comm) {
  const int me = kolo_comm_rank(comm);
  std::vector<int32_t> ints(10, 1);
  expect(kolo_allreduce(ints.data(), ints.data(), 10, KOLO_INT32, KOLO_ADASUM, comm, nullptr) == KOLO_ERR_INVALID_ARGUMENT &&
             std::string(kolo_last_error()).find("FLOAT32") != std::string::npos,
         "adasum of INT32 is refused, naming the types it takes");
  std::vector<float> f(12, 1.0f);
  expect(kolo_reduce(f.data(), f.data(), 12, KOLO_FLOAT32, KOLO_ADASUM, 0, comm, nullptr) == KOLO_ERR_INVALID_ARGUMENT &&
             std::string(kolo_last_error()).find("allreduce only") != std::string::npos,
         "adasum in kolo_reduce is refused");
  expect(kolo_reduce_scatter(f.data(), f.data(), 1, KOLO_FLOAT32, KOLO_ADASUM, comm, nullptr) == KOLO_ERR_INVALID_ARGUMENT,
         "adasum in kolo_reduce_scatter is refused");
  kolo_group_start();
  expect(kolo_allreduce(f.data(), f.data(), 12, KOLO_FLOAT32, KOLO_ADASUM, comm, nullptr) == KOLO_ERR_INVALID_ARGUMENT,
         "adasum inside a group is refused");
  kolo_group_end();
  kolo_coll_options wire = KOLO_COLL_OPTIONS_INIT;
  wire.wire_dtype = KOLO_FLOAT16;
  expect(kolo_allreduce_ex(f.data(), f.data(), 12, KOLO_FLOAT32, KOLO_ADASUM, &wire, comm, nullptr) != KOLO_SUCCESS,
         "adasum with a compressed wire is refused");
  // Rank 0 asks for another count: every rank fails, and the communicator goes on.
  if (kolo_comm_size(comm) > 1) {
    const size_t count = me == 0 ? 11 : 12;
    expect(kolo_allreduce(f.data(), f.data(), count, KOLO_FLOAT32, KOLO_ADASUM, comm, nullptr) == KOLO_ERR_MISMATCH &&
               std::string(kolo_last_error()).find("differs from another rank") != std::string::npos,
           "adasum with another count on rank 0 fails on rank " + std::to_string(me));
    float one = 1;
    must(kolo_allreduce(&one, &one, 1, KOLO_FLOAT32, KOLO_SUM, comm, nullptr), "allreduce after the mismatch");
    expect(one == kolo_comm_size(comm), "the communicator works after an adasum mismatch");
  }
}

}  // namespace

void adasum(kolo_comm_t comm) {
  check_results(comm);
  check_errors(comm);
}

}  // namespace adasum_scenarios
