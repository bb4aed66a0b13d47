// Gloo's allreduce (Debian's libgloo, TCP transport; loopback unless GLOO_HOSTNAME says) measured and printed
// the way kolo-perf prints, as a second reference beside Open MPI. float sum only.
// Started by kolorun (KOLO_RANK, KOLO_SIZE); the ranks meet through a gloo FileStore in
// the directory given with -d.
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "peer_bench_common.h"

namespace {

using peer_bench::parse_size;

using ReduceFn = void (*)(void*, const void*, const void*, size_t);


void allreduce(const std::shared_ptr<gloo::Context>& context, float* send, float* recv, size_t count) {
  gloo::AllreduceOptions options(context);
  options.setInput(send, count);
  options.setOutput(recv, count);
  options.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
  gloo::allreduce(options);
}

void sum_doubles(const std::shared_ptr<gloo::Context>& context, double* values, size_t n) {
  gloo::AllreduceOptions options(context);
  options.setInput(values, n);
  options.setOutput(values, n);
  options.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<double>));
  gloo::allreduce(options);
}

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Average time per call in microseconds over ranks; with `lat` (--latency, as kolo-perf's)
// also the min, median and p99 (nearest rank) of every rank's calls pooled.
double time_allreduce(const std::shared_ptr<gloo::Context>& context, float* send, float* recv, size_t count,
                      int iters, int warmup, double* lat = nullptr) {
  for (int i = 0; i < warmup; ++i) allreduce(context, send, recv, count);
  std::vector<double> stamps(lat != nullptr ? iters + 1 : 0);
  gloo::BarrierOptions barrier(context);
  gloo::barrier(barrier);
  double start = now_us();
  if (lat != nullptr) stamps[0] = start;
  for (int i = 0; i < iters; ++i) {
    allreduce(context, send, recv, count);
    if (lat != nullptr) stamps[i + 1] = now_us();
  }
  double sum = (now_us() - start) / iters;
  sum_doubles(context, &sum, 1);
  if (lat != nullptr) {
    // Each rank fills its slot of a zeroed array; the sum is everyone's times.
    std::vector<double> pooled(size_t(iters) * context->size, 0.0);
    for (int i = 0; i < iters; ++i) pooled[size_t(context->rank) * iters + i] = stamps[i + 1] - stamps[i];
    sum_doubles(context, pooled.data(), pooled.size());
    const peer_bench::LatencySummary s = peer_bench::summarize_latency(pooled);
    lat[0] = s.min;
    lat[1] = s.p50;
    lat[2] = s.p99;
  }
  return sum / context->size;
}


}  // namespace

int main(int argc, char** argv) {
  // Set by kolorun; this peer benchmark links Gloo, not kolo, so it reads them itself.
  const char* rank_text = std::getenv("KOLO_RANK");  // env-table: exempt
  const char* size_text = std::getenv("KOLO_SIZE");  // env-table: exempt
  size_t min_bytes = 8, max_bytes = 256 << 20;
  double factor = 2;
  int iters = 20, warmup = 1;
  std::string dir;
  bool latency = false;
  for (int i = 1; i < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--latency") {
      latency = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) break;
    if (flag == "-b") min_bytes = parse_size(argv[i + 1]);
    else if (flag == "-e") max_bytes = parse_size(argv[i + 1]);
    else if (flag == "-f") factor = std::atof(argv[i + 1]);
    else if (flag == "-n") iters = std::atoi(argv[i + 1]);
    else if (flag == "-w") warmup = std::atoi(argv[i + 1]);
    else if (flag == "-d") dir = argv[i + 1];
  }
  if (rank_text == nullptr || size_text == nullptr || dir.empty() || factor <= 1) {
    std::fprintf(stderr, "usage: kolorun -np N gloo_allreduce_perf -d <shared empty dir> [-b min] [-e max] [-f factor] [-n iters] [-w warmup] [--latency]\n");
    return 2;
  }
  const int rank = std::atoi(rank_text), size = std::atoi(size_text);
  gloo::transport::tcp::attr attr;
  // GLOO_HOSTNAME: the address this rank listens on (test hosts: its own host name).
  const char* listen = std::getenv("GLOO_HOSTNAME");
  attr.hostname = listen != nullptr && *listen != '\0' ? listen : "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore file_store(dir);
  gloo::rendezvous::PrefixStore store("gloo_allreduce_perf", file_store);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->connectFullMesh(store, device);
  if (rank == 0) {
    std::printf("# gloo_allreduce_perf (Gloo allreduce over tcp, float sum), %d ranks\n", size);
    if (latency) {
      std::printf("# latency: each out-of-place call timed alone (steady_clock); min, median and p99 (nearest rank) "
                  "of every rank's %d calls pooled, in us\n",
                  iters);
    }
    std::printf("#%12s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s%s\n", "size", "count", "type",
                "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong",
                latency ? "   lat_min   lat_p50   lat_p99" : "");
  }
  long total_wrong = 0;
  const double bus_factor = size > 1 ? 2.0 * (size - 1) / size : 1.0;
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes = static_cast<size_t>(bytes * factor)) {
    const size_t count = bytes / sizeof(float);
    std::vector<float> send(count), recv(count);
    for (size_t i = 0; i < count; ++i) send[i] = peer_bench::input_value(i, rank);
    double lat[3] = {0, 0, 0};
    double out_us = time_allreduce(context, send.data(), recv.data(), count, iters, warmup, latency ? lat : nullptr);
    allreduce(context, send.data(), recv.data(), count);
    long wrong_out = peer_bench::count_wrong(recv, size);
    recv = send;
    double in_us = time_allreduce(context, recv.data(), recv.data(), count, iters, warmup);
    recv = send;
    allreduce(context, recv.data(), recv.data(), count);
    long wrong_in = peer_bench::count_wrong(recv, size);
    total_wrong += wrong_out + wrong_in;  // rank 0's count: each rank checks its own result
    if (rank == 0) {
      double algbw_out = out_us > 0 ? bytes / out_us / 1e3 : 0, algbw_in = in_us > 0 ? bytes / in_us / 1e3 : 0;
      std::printf(" %12zu  %12zu  %8s  %6s  %6d  %7.2f  %6.2f  %6.2f  %6ld  %7.2f  %6.2f  %6.2f  %6ld", bytes, count,
                  "float", "sum", -1, out_us, algbw_out, algbw_out * bus_factor, wrong_out, in_us, algbw_in,
                  algbw_in * bus_factor, wrong_in);
      if (latency) {
        auto digits = [](double us) { return us >= 10000 ? 0 : us >= 100 ? 1 : us >= 10 ? 2 : 3; };  // ns under 10 us
        std::printf("  %8.*f  %8.*f  %8.*f", digits(lat[0]), lat[0], digits(lat[1]), lat[1], digits(lat[2]), lat[2]);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  if (rank == 0) std::printf("# Out of bounds values : %ld %s\n", total_wrong, total_wrong == 0 ? "OK" : "FAILED");
  return total_wrong == 0 ? 0 : 1;
}
