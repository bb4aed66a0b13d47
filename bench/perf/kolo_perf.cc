// kolo-perf: nccl-tests-style benchmark of kolo's collectives. One process per rank (start
// it with kolorun, mpirun or srun); rank 0 prints the table that nccl-tests prints, so
// scripts that parse nccl-tests output parse this too.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/peers/peer_bench_common.h"
#include "kolo/kolo.h"
#include "perf_collectives.h"
#include "perf_data.h"

using namespace kolo_perf;

namespace {

struct Options {
  std::string collective;
  size_t min_bytes = 32 << 20;
  size_t max_bytes = 32 << 20;
  double factor = 0;      // -f; 0 = use the increment
  size_t increment = 1 << 20;
  int iters = 20;
  int warmup = 5;  // per size: 1 left the first timed size's out-of-place column ~2x slow (fresh buffers)
  bool check = true;
  int average = 1;  // 0 rank 0, 1 average, 2 min, 3 max
  int root = 0;
  int threads = 1;  // -t: ranks per process, as threads (each its own communicator and stream)
  std::vector<kolo_dtype_t> dtypes{KOLO_FLOAT32};
  std::vector<kolo_op_t> ops{KOLO_SUM};
  std::string json_path;
  bool device = false;  // -G / --device: buffers in device memory, calls on a stream
  std::string backend = "kolo";  // --backend kolo|nccl: who runs device calls (KOLO_BACKEND)
  kolo_dtype_t wire = KOLO_DTYPE_COUNT;  // --wire: allreduce compressed on the wire
  bool registered = false;  // --registered: device buffers from kolo_mem_alloc, registered
  bool graph = false;       // --graph: the timed calls captured into a CUDA graph, launched
  bool latency = false;     // --latency: each timed call timed alone; min, median, p99 columns
};

void print_usage(FILE* out) {
  std::fprintf(out, "usage: kolo-perf <collective> [-b minbytes] [-e maxbytes] [-f factor | -i increment] "
                    "[-n iters] [-w warmup] [-c 0|1] [-d dtype|all] [-o op|all] [-r root] [-a 0-3] [-t threads] [-G] "
                    "[--backend kolo|nccl] [--wire half|bfloat16|f8e4m3|f8e5m2] [--registered] [--graph] [--latency] "
                    "[--json FILE]\n"
                    "collectives:");
  for (const std::string& n : collective_names()) std::fprintf(out, " %s", n.c_str());
  std::fprintf(out, "\n");
}

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "kolo-perf: %s\n", message.c_str());
  print_usage(stderr);
  std::exit(2);
}

// kolo-perf --help: what each option does (nccl-tests' flags and meanings where they exist).
[[noreturn]] void help() {
  std::printf("kolo-perf: an nccl-tests-style benchmark of one collective over kolo, with checked results.\n"
              "Run it under a launcher: kolorun -np 4 kolo-perf allreduce -b 8 -e 128M -f 2\n\n");
  print_usage(stdout);
  std::printf("\n"
              "  -b, -e BYTES        smallest and largest message (K, M, G suffixes); default 32M each\n"
              "  -f FACTOR           multiply the size by FACTOR (> 1) each step; -i BYTES adds BYTES instead\n"
              "  -n N                timed iterations per size (>= 1; default 20)\n"
              "  -w N                untimed warm-up calls per size (>= 0; default 5)\n"
              "  -c 0|1              check every result (default 1): the 'wrong' column counts bad values\n"
              "  -d TYPE|all         int8 uint8 int32 uint32 int64 uint64 half bfloat16 float double\n"
              "                      f8e4m3 f8e5m2 (default float)\n"
              "  -o OP|all           sum prod max min avg (default sum)\n"
              "  -r ROOT             root of broadcast and reduce (0 .. ranks-1)\n"
              "  -a 0|1|2|3          time reported over ranks: rank 0's, average, min, max (default 1)\n"
              "  -t N                N ranks per process as threads, each its own communicator (1..64)\n"
              "  -G, --device        buffers in device memory, calls on a stream (needs a GPU, or\n"
              "                      KOLO_DEVICE=emulated to run the device path on the CPU)\n"
              "  --backend kolo|nccl device calls run by kolo's device path or by NCCL (dlopen)\n"
              "  --wire TYPE         allreduce/reduce_scatter/allgather compressed on the wire\n"
              "  --registered        device buffers from kolo_mem_alloc, registered (read in place)\n"
              "  --graph             the timed calls captured once in a CUDA graph and replayed\n"
              "  --latency           time each call alone: min, median, p99 columns\n"
              "  --json FILE         the table as JSON too\n"
              "  -g, -m, -z, -p N    nccl-tests' flags, accepted and ignored (one GPU per rank)\n"
              "Environment: kolorun --help-env.\n");
  std::exit(0);
}

size_t parse_size(const std::string& text) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || value < 0) usage_error("bad size '" + text + "'");
  std::string suffix(end);
  double scale = suffix.empty() ? 1 : suffix == "K" || suffix == "k" ? 1 << 10 : suffix == "M" || suffix == "m" ? 1 << 20
             : suffix == "G" || suffix == "g" ? double(1 << 30) : -1;
  if (scale < 0) usage_error("bad size suffix in '" + text + "'");
  return static_cast<size_t>(value * scale);
}

int parse_int(const std::string& text, const char* flag) {
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0') usage_error(std::string("bad value '") + text + "' for " + flag);
  return static_cast<int>(value);
}

// A whole number in [low, high] for `flag`, else a usage error naming the range.
int parse_int_in(const std::string& text, const char* flag, int low, int high) {
  const int value = parse_int(text, flag);
  if (value < low || value > high) {
    usage_error(std::string(flag) + " takes " + std::to_string(low) + " to " + std::to_string(high) + ", not " + text);
  }
  return value;
}

Options parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) help();
  }
  if (argc < 2) usage_error("missing collective");
  Options o;
  o.collective = argv[1];
  // kolo-perf uses kolo's public API alone, as a user's program would, so it reads this
  // itself (not through support/env.h); kolo_init checks the value.
  if (const char* backend = std::getenv("KOLO_BACKEND")) o.backend = backend;  // env-table: exempt
  if (find_collective(o.collective) == nullptr) usage_error("unknown collective '" + o.collective + "'");
  for (int i = 2; i < argc; ++i) {
    std::string flag = argv[i];
    // Device memory (kolo's device runtime; not nccl-tests' -G <graph iterations>).
    if (flag == "-G" || flag == "--device") {
      o.device = true;
      continue;
    }
    if (flag == "--graph") {  // device memory, the timed calls replayed from a CUDA graph
      o.graph = true;
      o.device = true;
      continue;
    }
    if (flag == "--registered") {  // device memory, registered with the communicator
      o.registered = true;
      o.device = true;
      continue;
    }
    if (flag == "--latency") {  // per-iteration times: min, median, p99 after the table's columns
      o.latency = true;
      continue;
    }
    if (i + 1 >= argc) usage_error("missing value for " + flag);
    std::string value = argv[++i];
    if (flag == "-b" || flag == "--minbytes") o.min_bytes = parse_size(value);
    else if (flag == "-e" || flag == "--maxbytes") o.max_bytes = parse_size(value);
    else if (flag == "-f" || flag == "--stepfactor") {
      char* end = nullptr;
      o.factor = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0') usage_error("bad value '" + value + "' for -f");
    }
    else if (flag == "-i" || flag == "--stepbytes") { o.increment = parse_size(value); o.factor = 0; }
    else if (flag == "-n" || flag == "--iters") o.iters = parse_int_in(value, "-n", 1, 1 << 24);
    else if (flag == "-w" || flag == "--warmup_iters") o.warmup = parse_int_in(value, "-w", 0, 1 << 24);
    else if (flag == "-c" || flag == "--check") o.check = parse_int_in(value, "-c", 0, 1) != 0;
    else if (flag == "-a" || flag == "--average") o.average = parse_int_in(value, "-a", 0, 3);
    else if (flag == "-r" || flag == "--root") o.root = parse_int_in(value, "-r", 0, 1 << 20);
    else if (flag == "--json") o.json_path = value;
    else if (flag == "--wire") {
      if (!parse_dtype(value, &o.wire) || wire_unit_roundoff(o.wire) == 0) {
        usage_error("--wire takes half, bfloat16, f8e4m3 or f8e5m2, not '" + value + "'");
      }
    }
    else if (flag == "--backend") {
      if (value != "kolo" && value != "nccl") usage_error("--backend takes kolo or nccl, not '" + value + "'");
      o.backend = value;
    }
    else if (flag == "-d" || flag == "--datatype") {
      o.dtypes.clear();
      for (int d = 0; d < KOLO_DTYPE_COUNT; ++d) {
        if (value == "all") o.dtypes.push_back(static_cast<kolo_dtype_t>(d));
      }
      kolo_dtype_t dtype;
      if (value != "all" && !parse_dtype(value, &dtype)) usage_error("unknown datatype '" + value + "'");
      if (value != "all") o.dtypes.push_back(dtype);
    } else if (flag == "-o" || flag == "--op") {
      o.ops.clear();
      for (int p = 0; p < kElementwiseOps; ++p) {
        if (value == "all") o.ops.push_back(static_cast<kolo_op_t>(p));
      }
      kolo_op_t op;
      if (value != "all" && !parse_op(value, &op)) usage_error("unknown op '" + value + "'");
      if (value != "all") o.ops.push_back(op);
    } else if (flag == "-t" || flag == "--nthreads") {
      o.threads = parse_int(value, "-t");
      if (o.threads < 1 || o.threads > 64) usage_error("-t takes 1 to 64 threads");
    } else if (flag == "-g" || flag == "-m" || flag == "-z" || flag == "-p") {
      // nccl-tests flags for GPUs per thread, graphs: one GPU per rank here.
    } else {
      usage_error("unknown option " + flag);
    }
  }
  if (o.max_bytes < o.min_bytes) usage_error("-e must be at least -b");
  if (o.factor != 0 && o.factor <= 1) usage_error("-f must be greater than 1");
  if (o.iters < 1) usage_error("-n must be at least 1");
  if (o.backend == "nccl") o.device = true;  // NCCL takes device memory only
  if (o.latency && o.graph) usage_error("--latency times each call; --graph launches them all at once");
  if (o.wire != KOLO_DTYPE_COUNT) {
    // Compression carries float sums: float data, SUM or AVG (the default dtype and op).
    if (o.collective != "allreduce" && o.collective != "reduce_scatter" && o.collective != "allgather") {
      usage_error("--wire applies to allreduce, reduce_scatter and allgather");
    }
    if (o.dtypes.size() != 1 || o.dtypes[0] != KOLO_FLOAT32) usage_error("--wire compresses float data (-d float)");
    if (o.ops.size() == kElementwiseOps) o.ops = {KOLO_SUM, KOLO_AVG};  // -o all: the ops that compress
    for (kolo_op_t op : o.ops) {
      if (op != KOLO_SUM && op != KOLO_AVG) usage_error("--wire compresses sums: -o sum, avg or all");
    }
  }
  return o;
}

void die(const char* what, kolo_result_t rc) {
  std::fprintf(stderr, "kolo-perf: %s failed: %s: %s\n", what, kolo_result_string(rc), kolo_last_error());
  std::exit(1);
}

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One measured placement (out-of-place or in-place) of one size.
struct Measure {
  double time_us = 0;
  double algbw = 0;
  double busbw = 0;
  size_t wrong = 0;
  double err_max = 0, err_mean = 0;  // --wire: in units of one wire rounding (WireError)
  double lat_min = 0, lat_p50 = 0, lat_p99 = 0;  // --latency: per-call time (us), all ranks pooled
};

// --latency: every rank's every timed call, pooled (ranks x iterations samples: what a
// caller of the collective waits, on any rank); min, median and p99, nearest rank.
void latency_summary(const std::vector<double>& per_call, kolo_comm_t comm, Measure& m) {
  std::vector<double> pooled(per_call.size() * kolo_comm_size(comm));
  kolo_result_t rc = kolo_allgather(per_call.data(), pooled.data(), per_call.size(), KOLO_FLOAT64, comm, nullptr);
  if (rc != KOLO_SUCCESS) die("allgather of per-call timings", rc);
  const peer_bench::LatencySummary s = peer_bench::summarize_latency(pooled);
  m.lat_min = s.min;
  m.lat_p50 = s.p50;
  m.lat_p99 = s.p99;
}

double combine(double mine, int average, kolo_comm_t comm) {
  double value = mine;
  kolo_op_t op = average == 2 ? KOLO_MIN : average == 3 ? KOLO_MAX : KOLO_SUM;
  if (average == 0) {
    kolo_result_t rc = kolo_broadcast(&mine, &value, 1, KOLO_FLOAT64, 0, comm, nullptr);
    if (rc != KOLO_SUCCESS) die("broadcast of timings", rc);
    return value;
  }
  kolo_result_t rc = kolo_allreduce(&mine, &value, 1, KOLO_FLOAT64, op, comm, nullptr);
  if (rc != KOLO_SUCCESS) die("allreduce of timings", rc);
  return average == 1 ? value / kolo_comm_size(comm) : value;
}

Measure measure(const Collective& coll, const Options& o, const Case& c, size_t count, bool in_place,
                kolo_comm_t comm, const Registered* registered) {
  Buffers buffers;
  buffers.registered = registered;
  coll.prepare(buffers, count, c, in_place);
  if (o.device && !device_upload(buffers)) std::exit(1);
  Measure m;
  // --graph needs one uncaptured call first: kolo sets up its device memory then.
  for (int i = 0; i < std::max(o.warmup, o.graph ? 1 : 0); ++i) {
    kolo_result_t rc = coll.call(buffers, count, c, in_place, comm);
    if (rc != KOLO_SUCCESS) die(coll.name, rc);
  }
  if (!device_sync(buffers)) std::exit(1);
  // --graph: the iterations captured once into a graph (after the warm-up, so that kolo's
  // device memory is set up), launched once per timing: launch overhead per call gone.
  void* graph = nullptr;
  if (o.graph) {
    if (!device_capture_begin(buffers)) std::exit(1);
    for (int i = 0; i < o.iters; ++i) {
      kolo_result_t rc = coll.call(buffers, count, c, in_place, comm);
      if (rc != KOLO_SUCCESS) die(coll.name, rc);
    }
    if ((graph = device_capture_end(buffers)) == nullptr) std::exit(1);
    // Every rank past its instantiation before any launches: ranks that share a GPU would
    // otherwise have a peer's replay spin for this rank while this rank's driver is still
    // building its graph (instantiation may wait for the device, as allocation does).
    kolo_barrier(comm);
    if (!device_graph_launch(buffers, graph) || !device_sync(buffers)) std::exit(1);  // warm-up
  }
  // --latency: a clock read after each call (and, on device memory, a stream sync, so a
  // call's time is until it is done); the total stays the first stamp to the last.
  std::vector<double> stamps(o.latency ? o.iters + 1 : 0);
  kolo_barrier(comm);
  double start = now_us();
  if (o.latency) stamps[0] = start;
  if (graph != nullptr && !device_graph_launch(buffers, graph)) std::exit(1);
  for (int i = 0; graph == nullptr && i < o.iters; ++i) {
    kolo_result_t rc = coll.call(buffers, count, c, in_place, comm);
    if (rc != KOLO_SUCCESS) die(coll.name, rc);
    if (o.latency) {
      if (o.device && !device_sync(buffers)) std::exit(1);
      stamps[i + 1] = now_us();
    }
  }
  // Device calls return once enqueued: the time counts until the stream is done.
  if (!device_sync(buffers)) std::exit(1);
  double elapsed = (now_us() - start) / o.iters;
  if (o.latency) {
    std::vector<double> per_call(o.iters);
    for (int i = 0; i < o.iters; ++i) per_call[i] = stamps[i + 1] - stamps[i];
    latency_summary(per_call, comm, m);
  }
  if (graph != nullptr) device_graph_destroy(graph);
  m.time_us = combine(elapsed, o.average, comm);
  const size_t bytes = coll.size_for(count, c);
  m.algbw = m.time_us > 0 ? bytes / m.time_us / 1e3 : 0;
  m.busbw = m.algbw * coll.busbw_factor(c.nranks);
  if (o.check) {
    coll.prepare(buffers, count, c, in_place);
    if (o.device && !device_upload(buffers)) std::exit(1);
    // --graph checks a replay: the call captured alone, launched once.
    if (o.graph && !device_capture_begin(buffers)) std::exit(1);
    kolo_result_t rc = coll.call(buffers, count, c, in_place, comm);
    if (rc != KOLO_SUCCESS) die(coll.name, rc);
    if (o.graph) {
      void* check = device_capture_end(buffers);
      if (check == nullptr) std::exit(1);
      kolo_barrier(comm);  // every rank instantiated first, as above
      if (!device_graph_launch(buffers, check)) std::exit(1);
      if (!device_sync(buffers)) std::exit(1);
      device_graph_destroy(check);
    }
    if (o.device && !device_download(buffers)) std::exit(1);
    wire_error() = WireError{};
    uint64_t wrong = coll.check(buffers, count, c, in_place);
    uint64_t total = 0;
    rc = kolo_allreduce(&wrong, &total, 1, KOLO_UINT64, KOLO_SUM, comm, nullptr);
    if (rc != KOLO_SUCCESS) die("allreduce of error counts", rc);
    m.wrong = total;
    if (c.wire != KOLO_DTYPE_COUNT) {
      const WireError& e = wire_error();
      double sums[2] = {e.sum, static_cast<double>(e.n)}, all[2] = {0, 0};
      if ((rc = kolo_allreduce(&e.max, &m.err_max, 1, KOLO_FLOAT64, KOLO_MAX, comm, nullptr)) != KOLO_SUCCESS ||
          (rc = kolo_allreduce(sums, all, 2, KOLO_FLOAT64, KOLO_SUM, comm, nullptr)) != KOLO_SUCCESS) {
        die("allreduce of compression errors", rc);
      }
      m.err_mean = all[1] > 0 ? all[0] / all[1] : 0;
    }
  }
  return m;
}

std::string format_measure(const Measure& m, bool check) {
  char line[128];
  char time[32];
  std::snprintf(time, sizeof(time), m.time_us >= 10000 ? "%7.0f" : m.time_us >= 100 ? "%7.1f" : "%7.2f", m.time_us);
  std::snprintf(line, sizeof(line), "  %7s  %6.2f  %6.2f  %6s", time, m.algbw, m.busbw,
                check ? std::to_string(m.wrong).c_str() : "N/A");
  return line;
}

// --latency: the out-of-place calls' min, median and p99 (us), after the other columns.
std::string format_latency(const Measure& out) {
  char line[64];
  auto digits = [](double us) { return us >= 10000 ? 0 : us >= 100 ? 1 : us >= 10 ? 2 : 3; };  // ns under 10 us
  std::snprintf(line, sizeof(line), "  %8.*f  %8.*f  %8.*f", digits(out.lat_min), out.lat_min, digits(out.lat_p50),
                out.lat_p50, digits(out.lat_p99), out.lat_p99);
  return line;
}

// --wire: the compression error of both placements, after the nccl-tests columns.
std::string format_wire_error(const Measure& out, const Measure& in, bool check) {
  if (!check) return "     N/A     N/A";
  char line[64];
  std::snprintf(line, sizeof(line), "  %6.3f  %6.3f", std::max(out.err_max, in.err_max), (out.err_mean + in.err_mean) / 2);
  return line;
}

void print_header(const Options& o, kolo_comm_t comm) {
  const int rank = kolo_comm_rank(comm);
  const int size = kolo_comm_size(comm);
  struct Record { int rank; int pid; int device; char host[116]; } mine{}, *all = new Record[size];
  mine.rank = rank;
  mine.device = o.device ? device_current() : 0;
  mine.pid = static_cast<int>(getpid());
  gethostname(mine.host, sizeof(mine.host) - 1);
  kolo_result_t rc = kolo_allgather(&mine, all, sizeof(Record), KOLO_UINT8, comm, nullptr);
  if (rc != KOLO_SUCCESS) die("allgather of rank records", rc);
  if (rank == 0) {
    std::printf("# kolo-perf %s (kolo %d)\n", o.collective.c_str(), kolo_version());
    std::printf("# nThread %d nGpus 1 minBytes %zu maxBytes %zu step: %g(%s) warmup iters: %d iters: %d agg iters: 1 "
                "validation: %d graph: %d\n#\n# Using devices\n",
                o.threads, o.min_bytes, o.max_bytes, o.factor != 0 ? o.factor : double(o.increment),
                o.factor != 0 ? "factor" : "bytes", o.warmup, o.iters, o.check ? 1 : 0, o.graph ? 1 : 0);
    for (int r = 0; r < size; ++r) {
      std::printf("#  Rank %2d Group  0 Pid %6d on %10s device %2d [%s] %s\n", all[r].rank, all[r].pid, all[r].host,
                  o.device ? all[r].device : 0,
                  o.device ? device_runtime_name() : "cpu",
                  !o.device ? "host memory"
                  : o.backend == "nccl" ? "device memory, through NCCL (KOLO_BACKEND=nccl)"
                  : o.registered ? "device memory from kolo_mem_alloc, registered (read in place by the peers on one "
                                   "host where the collective allows)"
                                        : "device memory, kolo's device path (device_ipc kernels on one host where "
                                          "they apply, else staged through pinned host memory)");
    }
    if (o.wire != KOLO_DTYPE_COUNT) {
      std::printf("# wire: %s (fp32 data compressed on the wire, accumulated in fp32); maxerr/meanerr: |result - "
                  "exact| in units of one %s rounding of the contributions (u * sum |x_r|; allgather: u * |x|; "
                  "bound: 2 for allreduce, 1 for the others), both placements\n",
                  dtype_label(o.wire), dtype_label(o.wire));
    }
    if (o.latency) {
      std::printf("# latency: each out-of-place call timed alone (%s); min, median and p99 (nearest rank) "
                  "of every rank's %d calls pooled, in us\n",
                  o.device ? "until its stream is done" : "steady_clock", o.iters);
    }
    std::printf("#\n");
    std::printf("#%94s%35s\n", "out-of-place", "in-place");
    std::printf("#%12s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s%s%s\n", "size", "count", "type",
                "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong",
                o.wire != KOLO_DTYPE_COUNT ? "  maxerr meanerr" : "", o.latency ? "   lat_min   lat_p50   lat_p99" : "");
    std::printf("#%12s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s%s%s\n", "(B)", "(elements)", "", "", "",
                "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", o.wire != KOLO_DTYPE_COUNT ? "                " : "",
                o.latency ? "      (us)      (us)      (us)" : "");
    std::fflush(stdout);
  }
  delete[] all;
}

std::vector<size_t> sizes(const Options& o) {
  std::vector<size_t> out;
  for (size_t s = o.min_bytes; s <= o.max_bytes;) {
    out.push_back(s);
    size_t next = o.factor != 0 ? static_cast<size_t>(s * o.factor) : s + o.increment;
    if (next <= s) break;
    s = next;
  }
  return out;
}

// One rank's whole run: header (rank 0), every size, the summary; the number of wrong
// values it saw.
uint64_t run_rank(const Options& o, kolo_comm_t comm) {
  const Collective& coll = *find_collective(o.collective);
  const int rank = kolo_comm_rank(comm);
  const int nranks = kolo_comm_size(comm);
  if (coll.rooted && (o.root < 0 || o.root >= nranks)) usage_error("root " + std::to_string(o.root) + " out of range");
  // The JSON file is written at the end: a path that cannot be written is refused first.
  if (rank == 0 && !o.json_path.empty() && !std::ofstream(o.json_path, std::ios::app)) {
    usage_error("--json: cannot write '" + o.json_path + "'");
  }
  if (o.device && !device_select(kolo_comm_local_rank(comm))) return 1;
  print_header(o, comm);
  Registered registered;
  if (o.device) {
    // Device memory for every case, taken once before any device call: the buffers of the
    // largest size, for each dtype. With ranks as threads on one GPU, an allocation while
    // a peer's collective waits on the device for this rank may wait for the device (CUDA
    // lists memory allocation among the implicit synchronizations), so none happens
    // between calls, and a barrier keeps every rank's first call after every allocation.
    size_t most = 0;
    for (kolo_dtype_t dtype : o.dtypes) {
      Case c{dtype, KOLO_SUM, o.root, rank, nranks, o.wire};
      for (bool in_place : {false, true}) {
        Buffers b;
        coll.prepare(b, coll.count_for(sizes(o).back(), c), c, in_place);
        most = std::max({most, b.send.size(), b.recv.size()});
      }
    }
    if (o.registered && !register_buffers(registered, comm, most)) return 1;
    if (!reserve_device_buffers(o.registered ? 0 : most)) return 1;
    const kolo_result_t rc = kolo_barrier(comm);
    if (rc != KOLO_SUCCESS) die("barrier after allocating device memory", rc);
  }

  nlohmann::json results = nlohmann::json::array();
  uint64_t total_wrong = 0;
  double busbw_sum = 0;
  int lines = 0;
  for (kolo_dtype_t dtype : o.dtypes) {
    for (kolo_op_t op : coll.reduces ? o.ops : std::vector<kolo_op_t>{KOLO_SUM}) {
      Case c{dtype, op, o.root, rank, nranks, o.wire};
      size_t last_count = SIZE_MAX;
      for (size_t bytes : sizes(o)) {
        size_t count = coll.count_for(bytes, c);
        if (count == last_count) continue;  // sizes that round to the same count
        last_count = count;
        Measure out = measure(coll, o, c, count, false, comm, o.registered ? &registered : nullptr);
        Measure in = measure(coll, o, c, count, true, comm, o.registered ? &registered : nullptr);
        total_wrong += out.wrong + in.wrong;
        busbw_sum += (out.busbw + in.busbw) / 2;
        ++lines;
        if (rank == 0) {
          std::printf(" %12zu  %12zu  %8s  %6s  %6d%s%s%s%s\n", coll.size_for(count, c),
                      count * (coll.size_for(count, c) / std::max<size_t>(1, count * dtype_bytes(dtype))),
                      dtype_label(dtype), coll.reduces ? op_label(op) : "none", coll.rooted ? o.root : -1,
                      format_measure(out, o.check).c_str(), format_measure(in, o.check).c_str(),
                      o.wire != KOLO_DTYPE_COUNT ? format_wire_error(out, in, o.check).c_str() : "",
                      o.latency ? format_latency(out).c_str() : "");
          std::fflush(stdout);
          results.push_back({{"collective", coll.name}, {"size", coll.size_for(count, c)}, {"count", count},
                             {"type", dtype_label(dtype)}, {"redop", coll.reduces ? op_label(op) : "none"},
                             {"root", coll.rooted ? o.root : -1}, {"nranks", nranks},
                             {"out_of_place", {{"time_us", out.time_us}, {"algbw", out.algbw}, {"busbw", out.busbw}, {"wrong", out.wrong}}},
                             {"in_place", {{"time_us", in.time_us}, {"algbw", in.algbw}, {"busbw", in.busbw}, {"wrong", in.wrong}}}});
          if (o.latency) {
            results.back()["out_of_place"]["latency_us"] = {{"min", out.lat_min}, {"p50", out.lat_p50}, {"p99", out.lat_p99}};
          }
          if (o.wire != KOLO_DTYPE_COUNT) {
            results.back()["wire"] = dtype_label(o.wire);
            results.back()["error_units"] = {{"max", std::max(out.err_max, in.err_max)},
                                             {"mean", (out.err_mean + in.err_mean) / 2}};
          }
        }
      }
    }
  }
  if (rank == 0) {
    std::printf("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(total_wrong),
                total_wrong == 0 ? "OK" : "FAILED");
    std::printf("# Avg bus bandwidth    : %g \n#\n", lines > 0 ? busbw_sum / lines : 0.0);
    std::fflush(stdout);
    if (!o.json_path.empty()) {
      std::ofstream json(o.json_path);
      json << nlohmann::json{{"nranks", nranks}, {"results", results}, {"wrong", total_wrong}}.dump(2) << "\n";
      if (!json.flush()) {
        std::fprintf(stderr, "kolo-perf: --json: writing '%s' failed\n", o.json_path.c_str());
        return total_wrong + 1;
      }
    }
  }
  if (o.registered) deregister_buffers(registered);
  // Device memory freed on every rank before any destroys the communicator (its device
  // barrier must not wait for a rank inside cudaFree, which waits for the device).
  if (o.device) {
    release_device_buffers();
    const kolo_result_t rc = kolo_barrier(comm);
    if (rc != KOLO_SUCCESS) die("barrier before destroy", rc);
  }
  return total_wrong;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  // --backend is KOLO_BACKEND for this process (read when the communicator is made).
  setenv("KOLO_BACKEND", o.backend.c_str(), 1);
  // Before CUDA starts: as many hardware queues as CUDA gives (8 by default). Thread-ranks'
  // streams beyond them share queues, where one rank's barrier kernel holds back the peer
  // work it waits for (docs/device.md, "Several ranks on one GPU").
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  kolo_comm_t world = nullptr;
  kolo_result_t rc = kolo_init(&world);
  if (rc != KOLO_SUCCESS) die("kolo_init", rc);
  if (o.threads == 1) {
    const uint64_t wrong = run_rank(o, world);
    kolo_comm_destroy(world);
    return wrong == 0 ? 0 : 1;
  }
  // -t T: T ranks in every process, as threads, in one communicator of processes x T
  // ranks made from a unique id that the first process shares over the world.
  kolo_unique_id id{};
  if (kolo_comm_rank(world) == 0 && (rc = kolo_get_unique_id(&id)) != KOLO_SUCCESS) die("kolo_get_unique_id", rc);
  rc = kolo_broadcast(&id, &id, sizeof id, KOLO_UINT8, 0, world, nullptr);
  if (rc != KOLO_SUCCESS) die("broadcast of the unique id", rc);
  const int nranks = kolo_comm_size(world) * o.threads, first = kolo_comm_rank(world) * o.threads;
  std::vector<uint64_t> wrong(o.threads, 0);
  std::vector<std::thread> ranks;
  for (int t = 0; t < o.threads; ++t) {
    ranks.emplace_back([&, t] {
      kolo_comm_t comm = nullptr;
      const kolo_result_t made = kolo_comm_init_rank(&comm, nranks, &id, first + t);
      if (made != KOLO_SUCCESS) die("kolo_comm_init_rank", made);
      wrong[t] = run_rank(o, comm);
      kolo_comm_destroy(comm);
    });
  }
  for (std::thread& r : ranks) r.join();
  kolo_comm_destroy(world);
  for (uint64_t w : wrong) {
    if (w != 0) return 1;
  }
  return 0;
}
