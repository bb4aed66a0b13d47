// Open MPI's MPI_Allreduce measured and printed the way kolo-perf prints (nccl-tests
// columns), so the two can be compared line by line in one run. float sum only.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "peer_bench_common.h"

namespace {

using peer_bench::parse_size;


// Average time per call in microseconds, averaged over ranks.
double time_allreduce(const float* send, float* recv, size_t count, int iters, int warmup) {
  for (int i = 0; i < warmup; ++i) MPI_Allreduce(send, recv, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i) MPI_Allreduce(send, recv, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double mine = (MPI_Wtime() - start) / iters * 1e6, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return sum / size;
}


}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t min_bytes = 8, max_bytes = 256 << 20;
  double factor = 2;
  int iters = 20, warmup = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "-b") min_bytes = parse_size(argv[i + 1]);
    else if (flag == "-e") max_bytes = parse_size(argv[i + 1]);
    else if (flag == "-f") factor = std::atof(argv[i + 1]);
    else if (flag == "-n") iters = std::atoi(argv[i + 1]);
    else if (flag == "-w") warmup = std::atoi(argv[i + 1]);
  }
  if (rank == 0) {
    std::printf("# mpi_allreduce_perf (Open MPI MPI_Allreduce, float sum), %d ranks\n", size);
    std::printf("#%12s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type",
                "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  }
  long total_wrong = 0;
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes = static_cast<size_t>(bytes * factor)) {
    size_t count = bytes / sizeof(float);
    std::vector<float> send(count), recv(count);
    for (size_t i = 0; i < count; ++i) send[i] = peer_bench::input_value(i, rank);
    double out_us = time_allreduce(send.data(), recv.data(), count, iters, warmup);
    MPI_Allreduce(send.data(), recv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    long wrong_out = peer_bench::count_wrong(recv, size);
    recv = send;
    double in_us = time_allreduce(static_cast<const float*>(MPI_IN_PLACE), recv.data(), count, iters, warmup);
    recv = send;
    MPI_Allreduce(MPI_IN_PLACE, recv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    long wrong_in = peer_bench::count_wrong(recv, size);
    long wrong[2] = {wrong_out, wrong_in}, all[2] = {0, 0};
    MPI_Allreduce(wrong, all, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    total_wrong += all[0] + all[1];
    const double factor_bus = size > 1 ? 2.0 * (size - 1) / size : 1.0;
    if (rank == 0) {
      double algbw_out = out_us > 0 ? count * 4.0 / out_us / 1e3 : 0, algbw_in = in_us > 0 ? count * 4.0 / in_us / 1e3 : 0;
      std::printf(" %12zu  %12zu  %8s  %6s  %6d  %7.2f  %6.2f  %6.2f  %6ld  %7.2f  %6.2f  %6.2f  %6ld\n", count * 4, count,
                  "float", "sum", -1, out_us, algbw_out, algbw_out * factor_bus, all[0], in_us, algbw_in,
                  algbw_in * factor_bus, all[1]);
      std::fflush(stdout);
    }
    if (bytes * factor <= bytes) break;
  }
  if (rank == 0) std::printf("# Out of bounds values : %ld %s\n", total_wrong, total_wrong == 0 ? "OK" : "FAILED");
  MPI_Finalize();
  return total_wrong == 0 ? 0 : 1;
}
