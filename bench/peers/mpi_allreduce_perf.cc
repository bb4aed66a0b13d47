// An MPI library's collectives (Open MPI as mpi_allreduce_perf, MPICH as
// mpich_allreduce_perf: the same source built twice) measured and printed the way
// kolo-perf prints (nccl-tests columns), so the tables compare line by line in one run.
// float data, sum.
//   mpirun -np N mpi_allreduce_perf [allreduce|reduce|broadcast|allgather|reduce_scatter|alltoall]
//          [-b min] [-e max] [-f factor] [-n iters] [-w warmup] [-c 0|1] [--latency]
// Sizes, counts and busbw follow kolo-perf (bench/perf/perf_collectives.cc): the size is
// the bytes of the whole buffer (allgather, reduce_scatter, alltoall: all ranks' blocks),
// the count column the elements of that size; busbw = algbw * 2(p-1)/p (allreduce),
// (p-1)/p (allgather, reduce_scatter, alltoall), 1 (broadcast, reduce); the time is the
// ranks' average. Placements as MPI has them: in-place is MPI_IN_PLACE (reduce_scatter's
// result then lands at the start of recv, alltoall exchanges within recv); out-of-place
// broadcast gives the root's recv the data as kolo's does (the root copies send to recv,
// then MPI_Bcast on recv), in-place broadcast is MPI_Bcast alone.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "peer_bench_common.h"

namespace {

using peer_bench::input_value;
using peer_bench::parse_size;

enum class Kind { kAllreduce, kReduce, kBroadcast, kAllgather, kReduceScatter, kAlltoall };

struct Coll {
  const char* name;
  Kind kind;
  bool per_rank;  // count per rank (per peer): the size is count * 4 * ranks
  bool reduces;
  bool rooted;
};

const Coll kColls[] = {
    {"allreduce", Kind::kAllreduce, false, true, false},
    {"reduce", Kind::kReduce, false, true, true},
    {"broadcast", Kind::kBroadcast, false, false, true},
    {"allgather", Kind::kAllgather, true, false, false},
    {"reduce_scatter", Kind::kReduceScatter, true, true, false},
    {"alltoall", Kind::kAlltoall, true, false, false},
};

constexpr int kRoot = 0;

double busbw_factor(Kind k, int p) {
  if (p <= 1) return 1.0;
  if (k == Kind::kAllreduce) return 2.0 * (p - 1) / p;
  if (k == Kind::kBroadcast || k == Kind::kReduce) return 1.0;
  return double(p - 1) / p;
}

// What rank `from` sends to rank `to` at index k in alltoall (kolo-perf's values).
float alltoall_value(int from, int to, size_t k) { return static_cast<float>((from * 3 + to * 5 + k) % 11); }

struct Bench {
  const Coll& coll;
  int rank, size;
  size_t n;  // MPI count argument: whole (allreduce, reduce, broadcast) or per rank
  std::vector<float> send, recv;

  // Fills the buffers for a placement (inputs in recv when in place).
  void prepare(bool in_place) {
    const size_t whole = coll.per_rank ? n * size : n;
    switch (coll.kind) {
      case Kind::kAllreduce:
      case Kind::kReduce:
      case Kind::kBroadcast:
        send.assign(n, 0);
        recv.assign(n, -1);
        if (coll.kind != Kind::kBroadcast || rank == kRoot) {
          for (size_t i = 0; i < n; ++i) (in_place ? recv : send)[i] = input_value(i, rank);
        }
        break;
      case Kind::kAllgather:
        send.assign(n, 0);
        recv.assign(whole, -1);
        for (size_t i = 0; i < n; ++i) (in_place ? recv[rank * n + i] : send[i]) = input_value(i, rank);
        break;
      case Kind::kReduceScatter:
        send.assign(whole, 0);
        recv.assign(in_place ? whole : n, -1);
        for (size_t i = 0; i < whole; ++i) (in_place ? recv : send)[i] = input_value(i, rank);
        break;
      case Kind::kAlltoall:
        send.assign(whole, 0);
        recv.assign(whole, -1);
        for (int q = 0; q < size; ++q) {
          for (size_t k = 0; k < n; ++k) (in_place ? recv : send)[q * n + k] = alltoall_value(rank, q, k);
        }
        break;
    }
  }

  void call(bool in_place) {
    const int c = static_cast<int>(n);
    const void* s = in_place ? MPI_IN_PLACE : send.data();
    switch (coll.kind) {
      case Kind::kAllreduce:
        MPI_Allreduce(s, recv.data(), c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
      case Kind::kReduce:
        // MPI_IN_PLACE is the root's; the others send from recv, where their input is (their
        // recvbuf is not significant: send, so that no buffer is passed twice).
        if (in_place && rank != kRoot) MPI_Reduce(recv.data(), send.data(), c, MPI_FLOAT, MPI_SUM, kRoot, MPI_COMM_WORLD);
        else MPI_Reduce(s, recv.data(), c, MPI_FLOAT, MPI_SUM, kRoot, MPI_COMM_WORLD);
        break;
      case Kind::kBroadcast:
        if (!in_place && rank == kRoot && n > 0) std::memcpy(recv.data(), send.data(), n * sizeof(float));
        MPI_Bcast(recv.data(), c, MPI_FLOAT, kRoot, MPI_COMM_WORLD);
        break;
      case Kind::kAllgather:
        MPI_Allgather(s, c, MPI_FLOAT, recv.data(), c, MPI_FLOAT, MPI_COMM_WORLD);
        break;
      case Kind::kReduceScatter:
        MPI_Reduce_scatter_block(s, recv.data(), c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
      case Kind::kAlltoall:
        MPI_Alltoall(s, c, MPI_FLOAT, recv.data(), c, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    }
  }

  // Wrong elements on this rank.
  long check() const {
    auto sum_at = [&](size_t i) {
      float expected = 0;
      for (int r = 0; r < size; ++r) expected += input_value(i, r);
      return expected;
    };
    long wrong = 0;
    switch (coll.kind) {
      case Kind::kAllreduce:
      case Kind::kReduce:
        if (coll.kind == Kind::kReduce && rank != kRoot) break;
        for (size_t i = 0; i < n; ++i) wrong += recv[i] != sum_at(i);
        break;
      case Kind::kBroadcast:
        for (size_t i = 0; i < n; ++i) wrong += recv[i] != input_value(i, kRoot);
        break;
      case Kind::kAllgather:
        for (int q = 0; q < size; ++q) {
          for (size_t i = 0; i < n; ++i) wrong += recv[q * n + i] != input_value(i, q);
        }
        break;
      case Kind::kReduceScatter:
        for (size_t i = 0; i < n; ++i) wrong += recv[i] != sum_at(rank * n + i);
        break;
      case Kind::kAlltoall:
        for (int q = 0; q < size; ++q) {
          for (size_t k = 0; k < n; ++k) wrong += recv[q * n + k] != alltoall_value(q, rank, k);
        }
        break;
    }
    return wrong;
  }
};

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Timing {
  double avg_us = 0;                       // per call, the ranks' average (kolo-perf -a 1)
  double lat_min = 0, lat_p50 = 0, lat_p99 = 0;  // --latency, as kolo-perf computes them
};

Timing time_calls(Bench& b, bool in_place, int iters, int warmup, bool latency) {
  for (int i = 0; i < warmup; ++i) b.call(in_place);
  std::vector<double> stamps(latency ? iters + 1 : 0);
  MPI_Barrier(MPI_COMM_WORLD);
  double start = now_us();
  if (latency) stamps[0] = start;
  for (int i = 0; i < iters; ++i) {
    b.call(in_place);
    if (latency) stamps[i + 1] = now_us();
  }
  double mine = (now_us() - start) / iters, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  Timing t;
  t.avg_us = sum / b.size;
  if (latency) {
    // Every rank's every call pooled (ranks x iterations); nearest-rank percentiles.
    std::vector<double> per_call(iters), pooled(size_t(iters) * b.size);
    for (int i = 0; i < iters; ++i) per_call[i] = stamps[i + 1] - stamps[i];
    MPI_Allgather(per_call.data(), iters, MPI_DOUBLE, pooled.data(), iters, MPI_DOUBLE, MPI_COMM_WORLD);
    const peer_bench::LatencySummary s = peer_bench::summarize_latency(pooled);
    t.lat_min = s.min;
    t.lat_p50 = s.p50;
    t.lat_p99 = s.p99;
  }
  return t;
}

// The library's name and version in one line ("Open MPI v4.1.4", "MPICH Version: 4.0.2").
std::string library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string line(text, strnlen(text, sizeof(text)));
  line = line.substr(0, line.find('\n'));
  line = line.substr(0, line.find(", package"));
  std::replace(line.begin(), line.end(), '\t', ' ');
  return line;
}

std::string time_text(double us) {
  char text[32];
  std::snprintf(text, sizeof(text), us >= 10000 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f", us);
  return text;
}

[[noreturn]] void usage(int rank, const char* why) {
  if (rank == 0) {
    std::fprintf(stderr,
                 "mpi_allreduce_perf: %s\nusage: mpirun -np N mpi_allreduce_perf [collective] [-b min] [-e max] "
                 "[-f factor] [-n iters] [-w warmup] [-c 0|1] [--latency]\ncollectives:",
                 why);
    for (const Coll& c : kColls) std::fprintf(stderr, " %s", c.name);
    std::fprintf(stderr, "\n");
  }
  MPI_Finalize();
  std::exit(2);
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
  bool check = true, latency = false;
  const Coll* coll = &kColls[0];
  int i = 1;
  if (i < argc && argv[i][0] != '-') {
    coll = nullptr;
    for (const Coll& c : kColls) {
      if (std::strcmp(argv[i], c.name) == 0) coll = &c;
    }
    if (coll == nullptr) usage(rank, "unknown collective");
    ++i;
  }
  for (; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--latency") {
      latency = true;
      continue;
    }
    if (i + 1 >= argc) usage(rank, "missing value");
    const char* value = argv[++i];
    if (flag == "-b") min_bytes = parse_size(value);
    else if (flag == "-e") max_bytes = parse_size(value);
    else if (flag == "-f") factor = std::atof(value);
    else if (flag == "-n") iters = std::atoi(value);
    else if (flag == "-w") warmup = std::atoi(value);
    else if (flag == "-c") check = std::atoi(value) != 0;
    else usage(rank, "unknown option");
  }
  if (factor <= 1 || iters < 1 || max_bytes < min_bytes) usage(rank, "bad -f, -n, -b or -e");
  if (rank == 0) {
    std::printf("# mpi_allreduce_perf %s (%s, float%s), %d ranks, iters %d warmup %d\n", coll->name,
                library_version().c_str(), coll->reduces ? " sum" : "", size, iters, warmup);
    if (latency) {
      std::printf("# latency: each out-of-place call timed alone (steady_clock); min, median and p99 (nearest rank) "
                  "of every rank's %d calls pooled, in us\n",
                  iters);
    }
    std::printf("#%94s%35s\n", "out-of-place", "in-place");
    std::printf("#%12s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s%s\n", "size", "count", "type",
                "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong",
                latency ? "   lat_min   lat_p50   lat_p99" : "");
  }
  long total_wrong = 0;
  size_t last_count = SIZE_MAX;
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes = static_cast<size_t>(bytes * factor)) {
    const size_t n = bytes / sizeof(float) / (coll->per_rank ? size : 1);
    if (n != last_count) {  // sizes that round to the same count are measured once
      last_count = n;
      Bench b{*coll, rank, size, n, {}, {}};
      const size_t total_bytes = n * sizeof(float) * (coll->per_rank ? size : 1);
      Timing t[2];
      long wrong[2] = {0, 0}, all[2] = {0, 0};
      for (int in_place = 0; in_place < 2; ++in_place) {
        b.prepare(in_place);
        t[in_place] = time_calls(b, in_place, iters, warmup, latency && !in_place);
        if (check) {
          b.prepare(in_place);
          b.call(in_place);
          wrong[in_place] = b.check();
        }
      }
      MPI_Allreduce(wrong, all, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
      total_wrong += all[0] + all[1];
      if (rank == 0) {
        const double bus = busbw_factor(coll->kind, size);
        std::printf(" %12zu  %12zu  %8s  %6s  %6d", total_bytes, total_bytes / sizeof(float), "float",
                    coll->reduces ? "sum" : "none", coll->rooted ? kRoot : -1);
        for (int p = 0; p < 2; ++p) {
          const double algbw = t[p].avg_us > 0 ? total_bytes / t[p].avg_us / 1e3 : 0;
          std::printf("  %7s  %6.2f  %6.2f  %6s", time_text(t[p].avg_us).c_str(), algbw, algbw * bus,
                      check ? std::to_string(all[p]).c_str() : "N/A");
        }
        if (latency) {
          auto digits = [](double us) { return us >= 10000 ? 0 : us >= 100 ? 1 : us >= 10 ? 2 : 3; };  // ns under 10 us
          std::printf("  %8.*f  %8.*f  %8.*f", digits(t[0].lat_min), t[0].lat_min, digits(t[0].lat_p50), t[0].lat_p50,
                      digits(t[0].lat_p99), t[0].lat_p99);
        }
        std::printf("\n");
        std::fflush(stdout);
      }
    }
    if (bytes * factor <= bytes) break;
  }
  if (rank == 0) std::printf("# Out of bounds values : %ld %s\n", total_wrong, total_wrong == 0 ? "OK" : "FAILED");
  MPI_Finalize();
  return total_wrong == 0 ? 0 : 1;
}
