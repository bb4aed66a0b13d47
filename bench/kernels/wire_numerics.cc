// kolo-wire-numerics: the error of a compressed allreduce against the number of ranks,
// simulated with kolo's host codecs (kernels/compress.h), for kolo's scheme and the naive
// one, per wire type: the largest error over the elements, in the unit below. Prints a
// Markdown table; --png PATH plots the positive-values columns.
//
//   kolo   each contribution encoded once, decoded and summed in fp32 in rank order, the
//          sum encoded once more and decoded by every rank (the two-shot form that the
//          compressed executor runs across hosts; the one-shot form skips the last
//          rounding).
//   naive  the running sum re-encoded after every addition, as a ring that carries
//          partial sums in the wire type does (for fp16 and bf16: Horovod's and
//          PyTorch's cast to 16 bits followed by a 16-bit sum).
//
// Error unit, per element: one rounding of the wire type applied to every contribution,
// u * sum_k |x_k| (fp16 u = 2^-11, bf16 2^-8, fp8 e4m3 2^-4, e5m2 2^-3; for block-scaled
// fp8 |x_k| is the largest magnitude in the element's block of contribution k, which
// sets that block's scale). kolo's bound is 2 of these units whatever the rank count.
//
//   kolo-wire-numerics [--values N] [--max-ranks N] [--png PATH]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/compress.h"
#include "tools/kolo_plan/png_plot.h"

namespace {

using kolo::WireFormat;

struct Wire {
  const char* name;
  kolo::DType dtype;
  double unit;
};

struct Errors {
  double max = 0, mean = 0;
};

void die(const kolo::Status& s) {
  std::fprintf(stderr, "kolo-wire-numerics: %s\n", s.message().c_str());
  std::exit(1);
}

void check(const kolo::Status& s) {
  if (!s.ok()) die(s);
}

std::vector<char> encode(const float* x, size_t n, WireFormat fmt) {
  std::vector<char> wire(kolo::wire_bytes(fmt, n) + 16);
  check(kolo::compress(wire.data(), x, n, fmt, kolo::Scale{}));
  return wire;
}

std::vector<float> decode(const std::vector<char>& wire, size_t n, WireFormat fmt) {
  std::vector<float> x(n);
  check(kolo::decompress(x.data(), wire.data(), n, fmt, kolo::Scale{}));
  return x;
}

Errors measure(const std::vector<float>& got, const std::vector<double>& exact, const std::vector<double>& unit) {
  Errors e;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(got[i] - exact[i]) / unit[i];
    e.max = std::max(e.max, err);
    e.mean += err / got.size();
  }
  return e;
}

}  // namespace

int main(int argc, char** argv) {
  size_t values = 2048;
  int max_ranks = 1024;
  std::string png;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kolo-wire-numerics: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--values") values = std::strtoull(value().c_str(), nullptr, 10);
    else if (arg == "--max-ranks") max_ranks = std::atoi(value().c_str());
    else if (arg == "--png") png = value();
    else {
      std::fprintf(stderr, "usage: kolo-wire-numerics [--values N] [--max-ranks N] [--png PATH]\n");
      return 2;
    }
  }
  if (values < 1 || max_ranks < 2) {
    std::fprintf(stderr, "kolo-wire-numerics: --values must be >= 1 and --max-ranks >= 2\n");
    return 2;
  }
  const Wire wires[] = {{"fp16", kolo::DType::kFloat16, 0x1p-11},
                        {"bf16", kolo::DType::kBFloat16, 0x1p-8},
                        {"fp8 e4m3", kolo::DType::kFloat8E4M3, 0x1p-4},
                        {"fp8 e5m2", kolo::DType::kFloat8E5M2, 0x1p-3}};
  std::vector<int> ranks;
  for (int n = 2; n <= max_ranks; n *= 2) ranks.push_back(n);

  // Two sets of contributions, magnitudes in [0.5, 1) (no subnormals): all positive (the
  // naive scheme's worst case: its partial sums grow with every rank, and so do their
  // roundings) and random signs (gradient-like: partial sums and errors partly cancel).
  std::mt19937 rng(2026);
  std::uniform_real_distribution<float> mag(0.5f, 1.0f);
  std::vector<std::vector<float>> positive(ranks.back(), std::vector<float>(values)), signed_(positive);
  for (int k = 0; k < ranks.back(); ++k) {
    for (size_t i = 0; i < values; ++i) {
      positive[k][i] = mag(rng);
      signed_[k][i] = (rng() & 1 ? 1.0f : -1.0f) * mag(rng);
    }
  }

  kolo::plot::Chart chart;
  chart.title = "COMPRESSED ALLREDUCE ERROR";
  chart.x_label = "RANKS";
  chart.y_label = "MAX ERROR IN ROUNDINGS, POSITIVE VALUES";
  for (int n : ranks) {
    chart.x.push_back(n);
    chart.x_ticks.push_back(std::to_string(n));
  }
  std::printf("| wire | ranks | kolo, positive | naive, positive | kolo, random signs | naive, random signs |\n"
              "|---|---|---|---|---|---|\n");
  for (const Wire& w : wires) {
    const WireFormat fmt = kolo::wire_format(w.dtype);
    kolo::plot::Series kolo_line{std::string("KOLO ") + w.name, {}}, naive_line{std::string("NAIVE ") + w.name, {}};
    for (int n : ranks) {
      Errors kolo_err[2], naive_err[2];
      for (int set = 0; set < 2; ++set) {
        const auto& x = set == 0 ? positive : signed_;
        std::vector<double> exact(values, 0.0), unit(values, 0.0);
        for (int k = 0; k < n; ++k) {
          for (size_t i = 0; i < values; ++i) {
            exact[i] += x[k][i];
            double scale_of = std::fabs(x[k][i]);
            if (fmt.block > 0) {  // the block's largest magnitude sets its scale
              const size_t b0 = i / fmt.block * fmt.block, b1 = std::min(values, b0 + fmt.block);
              scale_of = 0;
              for (size_t j = b0; j < b1; ++j) scale_of = std::max(scale_of, double(std::fabs(x[k][j])));
            }
            unit[i] += w.unit * scale_of;
          }
        }
        // kolo: every contribution encoded once, fp32 sum in rank order, the sum encoded once.
        std::vector<std::vector<char>> encoded(n);
        for (int k = 0; k < n; ++k) encoded[k] = encode(x[k].data(), values, fmt);
        std::vector<float> acc(values, 0.0f);
        for (int k = 0; k < n; ++k) {
          check(kolo::decompress_reduce(acc.data(), encoded[k].data(), values, fmt, kolo::Scale{}));
        }
        kolo_err[set] = measure(decode(encode(acc.data(), values, fmt), values, fmt), exact, unit);
        // naive: the running sum carried in the wire type.
        std::vector<char> running = encoded[0];
        for (int k = 1; k < n; ++k) {
          std::vector<float> partial = decode(running, values, fmt);
          check(kolo::decompress_reduce(partial.data(), encoded[k].data(), values, fmt, kolo::Scale{}));
          running = encode(partial.data(), values, fmt);
        }
        naive_err[set] = measure(decode(running, values, fmt), exact, unit);
      }
      std::printf("| %s | %d | %.2f | %.2f | %.2f | %.2f |\n", w.name, n, kolo_err[0].max, naive_err[0].max,
                  kolo_err[1].max, naive_err[1].max);
      kolo_line.y.push_back(kolo_err[0].max);
      naive_line.y.push_back(naive_err[0].max);
    }
    chart.series.push_back(kolo_line);
    chart.series.push_back(naive_line);
  }
  if (!png.empty()) {
    std::string why;
    if (!kolo::plot::write_png(chart, png, &why)) {
      std::fprintf(stderr, "kolo-wire-numerics: %s\n", why.c_str());
      return 1;
    }
    std::fprintf(stderr, "kolo-wire-numerics: wrote %s\n", png.c_str());
  }
  return 0;
}
