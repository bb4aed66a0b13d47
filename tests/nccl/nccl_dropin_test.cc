// An NCCL program, compiled against NVIDIA's nccl.h only and linked with -lnccl, run on
// kolo's drop-in libnccl.so.2 with host buffers (kolo's extension: host buffers block).
//
//   nccl_dropin_test collectives DIR   under kolorun -np N: rank 0 makes the unique id and
//                                      hands it to the others through DIR/id (the user's
//                                      own broadcast); then every collective x datatype x
//                                      op, in and out of place (gather and scatter too),
//                                      a send/recv ring in a group, all-to-all-v with
//                                      self-sends, grouped collectives, split, the scalable
//                                      init, PreMulSum, errors
//   nccl_dropin_test device DIR        under kolorun, KOLO_DEVICE=emulated: device buffers
//                                      from ncclMemAlloc, stream-ordered calls, a send to
//                                      itself on one stream received on another, a device
//                                      PreMulSum scalar, window registration
//   nccl_dropin_test abort DIR         under kolorun: ncclCommAbort from another thread
//                                      releases a blocked call
//   nccl_dropin_test abort_open_group DIR
//                                      under kolorun -np 2: ncclCommAbort from another
//                                      thread while this one has a group open on the
//                                      communicator (a send queued); its ncclGroupEnd then
//                                      fails instead of using a freed communicator (several
//                                      rounds, the two racing); this thread aborting its
//                                      own open group's communicator; and an abort of a
//                                      communicator under a hung ncclCommSplit
//   nccl_dropin_test init_all          one process: ncclCommInitAll with 3 communicators
//   nccl_dropin_test backend_guard     KOLO_BACKEND=nccl set: ncclCommInitRank refuses
#include <dlfcn.h>
#include <nccl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

int g_rank = 0;
int g_checks = 0;
int g_failures = 0;

void check(bool ok, const std::string& what) {
  ++g_checks;
  if (!ok) {
    ++g_failures;
    if (g_failures <= 30) std::printf("rank %d: FAIL: %s\n", g_rank, what.c_str());
  }
}

// An NCCL call that must succeed; the program stops if it does not (what follows needs it).
void must(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) {
    std::printf("rank %d: FAIL: %s returned %s: %s\n", g_rank, what, ncclGetErrorString(r), ncclGetLastError(nullptr));
    std::exit(1);
  }
}

// ---- Values of every ncclDataType_t, as doubles --------------------------------------
// The test's own codecs (no kolo header): decode by the format's fields; encode the small
// integers the test sends by searching the codes once.

struct Format {
  int bytes;
  int exponent_bits;  // 0: an integer type
  int mantissa_bits;
  bool is_signed;
};

Format format_of(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return {1, 0, 0, true};
    case ncclUint8: return {1, 0, 0, false};
    case ncclInt32: return {4, 0, 0, true};
    case ncclUint32: return {4, 0, 0, false};
    case ncclInt64: return {8, 0, 0, true};
    case ncclUint64: return {8, 0, 0, false};
    case ncclFloat16: return {2, 5, 10, true};
    case ncclFloat32: return {4, 8, 23, true};
    case ncclFloat64: return {8, 11, 52, true};
    case ncclBfloat16: return {2, 8, 7, true};
    case ncclFloat8e4m3: return {1, 4, 3, true};
    case ncclFloat8e5m2: return {1, 5, 2, true};
    default: return {0, 0, 0, false};
  }
}

const char* name_of(ncclDataType_t t) {
  static const char* names[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                                "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  return names[t];
}

bool is_float(ncclDataType_t t) { return format_of(t).exponent_bits > 0; }

double get(const void* buf, size_t i, ncclDataType_t t) {
  const Format f = format_of(t);
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const char*>(buf) + i * f.bytes, f.bytes);
  if (t == ncclFloat32) {
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
  if (t == ncclFloat64) {
    double v;
    std::memcpy(&v, &bits, 8);
    return v;
  }
  if (f.exponent_bits == 0) {
    const int width = 8 * f.bytes;
    if (f.is_signed && width < 64 && (bits >> (width - 1)) & 1)
      return static_cast<double>(static_cast<int64_t>(bits) - (int64_t{1} << width));
    return f.is_signed ? static_cast<double>(static_cast<int64_t>(bits)) : static_cast<double>(bits);
  }
  const int width = 8 * f.bytes;
  const bool negative = (bits >> (width - 1)) & 1;
  const int exponent = static_cast<int>((bits >> f.mantissa_bits) & ((1u << f.exponent_bits) - 1));
  const double mantissa = static_cast<double>(bits & ((uint64_t{1} << f.mantissa_bits) - 1));
  const int bias = (1 << (f.exponent_bits - 1)) - 1;
  double v = exponent == 0 ? std::ldexp(mantissa, 1 - bias - f.mantissa_bits)
                           : std::ldexp(1.0 + std::ldexp(mantissa, -f.mantissa_bits), exponent - bias);
  return negative ? -v : v;
}

void put(void* buf, size_t i, ncclDataType_t t, double v) {
  const Format f = format_of(t);
  char* p = static_cast<char*>(buf) + i * f.bytes;
  if (t == ncclFloat32) {
    float x = static_cast<float>(v);
    std::memcpy(p, &x, 4);
    return;
  }
  if (t == ncclFloat64) {
    std::memcpy(p, &v, 8);
    return;
  }
  if (f.exponent_bits == 0) {
    int64_t x = static_cast<int64_t>(v);
    std::memcpy(p, &x, f.bytes);  // little endian: the low bytes
    return;
  }
  // Small narrow floats: the code whose value is nearest (codes searched once per type).
  static std::vector<std::vector<uint16_t>> table(ncclNumTypes);
  std::vector<uint16_t>& codes = table[t];
  if (codes.empty()) {
    codes.assign(129, 0);
    std::vector<double> best(129, 1e300);
    const uint32_t n = 1u << (8 * f.bytes);
    for (uint32_t c = 0; c < n; ++c) {
      uint16_t code = static_cast<uint16_t>(c);
      const double value = get(&code, 0, t);
      if (!(value >= 0 && value <= 64.5)) continue;  // NaN too
      for (int k = 0; k <= 128; ++k) {
        const double d = std::fabs(value - k * 0.5);
        if (d < best[k]) {
          best[k] = d;
          codes[k] = code;
        }
      }
    }
  }
  const int k = static_cast<int>(std::lround(v * 2));
  if (k < 0 || k > 128) {
    std::printf("FAIL: test value %g out of the table\n", v);
    std::exit(2);
  }
  std::memcpy(p, &codes[k], f.bytes);
}

// ---- What each rank sends, and what a reduction of it gives ---------------------------
// Small values, so that every partial result is exact in every type (fp8 included):
// sums of 0/1, products of 1/2, max/min of 0..4.

const ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
const char* op_name(ncclRedOp_t op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return op < ncclNumOps ? names[op] : "premulsum";
}

double input(ncclRedOp_t op, ncclDataType_t t, int rank, size_t i) {
  switch (op) {
    case ncclProd: return 1 + (rank + i) % 2;
    case ncclMax:
    case ncclMin: return (rank * 3 + i) % 5;
    default: return (t == ncclFloat8e4m3 || t == ncclFloat8e5m2) ? (rank + i) % 2 : (rank + i) % 4;
  }
}

double reduced(ncclRedOp_t op, ncclDataType_t t, int size, size_t i) {
  double acc = input(op, t, 0, i);
  for (int r = 1; r < size; ++r) {
    const double v = input(op, t, r, i);
    switch (op) {
      case ncclProd: acc *= v; break;
      case ncclMax: acc = std::max(acc, v); break;
      case ncclMin: acc = std::min(acc, v); break;
      default: acc += v; break;
    }
  }
  if (op == ncclAvg) acc = is_float(t) ? acc / size : std::trunc(acc / size);
  return acc;
}

// Exact, but AVG's division rounds: within two units of the type's last place.
bool close(double got, double want, ncclDataType_t t, ncclRedOp_t op) {
  if (op != ncclAvg || !is_float(t)) return got == want;
  const double eps = std::ldexp(1.0, -format_of(t).mantissa_bits);
  return std::fabs(got - want) <= 2 * eps * std::max(1.0, std::fabs(want));
}

std::string where(const char* coll, ncclDataType_t t, ncclRedOp_t op, bool in_place, size_t i) {
  char s[160];
  std::snprintf(s, sizeof(s), "%s %s %s %s element %zu", coll, name_of(t), op_name(op),
                in_place ? "in place" : "out of place", i);
  return s;
}

// ---- The scenarios ---------------------------------------------------------------------

ncclUniqueId exchange_id(const std::string& dir, int rank, const char* name = "id") {
  ncclUniqueId id;
  const std::string path = dir + "/" + name;
  if (rank == 0) {
    must(ncclGetUniqueId(&id), "ncclGetUniqueId");
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(id.internal, sizeof(id.internal));
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      std::perror("rename");
      std::exit(1);
    }
    return id;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path, std::ios::binary);
    if (in && in.read(id.internal, sizeof(id.internal))) return id;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::printf("rank %d: FAIL: no unique id in %s after 60 s\n", rank, path.c_str());
  std::exit(1);
}

void test_reductions(ncclComm_t comm, int rank, int size, size_t count) {
  const int root = size - 1;
  for (int ti = 0; ti < ncclNumTypes; ++ti) {
    const ncclDataType_t t = static_cast<ncclDataType_t>(ti);
    const size_t es = format_of(t).bytes;
    for (ncclRedOp_t op : kOps) {
      for (int in_place = 0; in_place < 2; ++in_place) {
        // AllReduce and Reduce: count elements.
        std::vector<char> send(count * es), recv(count * es, 0x55);
        for (size_t i = 0; i < count; ++i) put(send.data(), i, t, input(op, t, rank, i));
        if (in_place) recv = send;
        must(ncclAllReduce(in_place ? recv.data() : send.data(), recv.data(), count, t, op, comm, nullptr),
             "ncclAllReduce");
        for (size_t i = 0; i < count; ++i) {
          const double got = get(recv.data(), i, t), want = reduced(op, t, size, i);
          check(close(got, want, t, op),
                where("allreduce", t, op, in_place, i) + ": " + std::to_string(got) + " != " + std::to_string(want));
        }
        recv.assign(count * es, 0x55);
        if (in_place) recv = send;
        must(ncclReduce(in_place ? recv.data() : send.data(), rank == root || in_place ? recv.data() : nullptr, count,
                        t, op, root, comm, nullptr),
             "ncclReduce");
        for (size_t i = 0; rank == root && i < count; ++i) {
          const double got = get(recv.data(), i, t), want = reduced(op, t, size, i);
          check(close(got, want, t, op), where("reduce", t, op, in_place, i) + ": " + std::to_string(got));
        }
        // ReduceScatter: size * count in, count out (rank's block; in place: in the input).
        std::vector<char> all(size * count * es), out(count * es, 0x55);
        for (size_t i = 0; i < size * count; ++i) put(all.data(), i, t, input(op, t, rank, i));
        char* result = in_place ? all.data() + rank * count * es : out.data();
        must(ncclReduceScatter(all.data(), result, count, t, op, comm, nullptr), "ncclReduceScatter");
        for (size_t i = 0; i < count; ++i) {
          const double got = get(result, i, t), want = reduced(op, t, size, rank * count + i);
          check(close(got, want, t, op), where("reduce_scatter", t, op, in_place, i) + ": " + std::to_string(got));
        }
      }
    }
  }
}

void test_data_movement(ncclComm_t comm, int rank, int size, size_t count) {
  const ncclRedOp_t none = ncclSum;  // for where(); these collectives have no op
  for (int ti = 0; ti < ncclNumTypes; ++ti) {
    const ncclDataType_t t = static_cast<ncclDataType_t>(ti);
    const size_t es = format_of(t).bytes;
    // 0..7: exact in every type, fp8 e5m2 included.
    auto value = [&](int r, size_t i) { return static_cast<double>((r * 5 + i) % 8); };
    for (int in_place = 0; in_place < 2; ++in_place) {
      for (int root = 0; root < size; root += std::max(1, size - 1)) {
        std::vector<char> send(count * es), recv(count * es, 0x55);
        for (size_t i = 0; i < count; ++i) put(send.data(), i, t, value(rank, i));
        if (in_place) recv = send;
        must(ncclBroadcast(in_place ? recv.data() : send.data(), recv.data(), count, t, root, comm, nullptr),
             "ncclBroadcast");
        for (size_t i = 0; i < count; ++i) {
          check(get(recv.data(), i, t) == value(root, i), where("broadcast", t, none, in_place, i));
        }
        if (in_place) {  // ncclBcast: the in-place form of its own
          recv = send;
          must(ncclBcast(recv.data(), count, t, root, comm, nullptr), "ncclBcast");
          for (size_t i = 0; i < count; ++i)
            check(get(recv.data(), i, t) == value(root, i), where("bcast", t, none, true, i));
        }
      }
      // AllGather: rank r's block at r * count.
      std::vector<char> mine(count * es), all(size * count * es, 0x55);
      for (size_t i = 0; i < count; ++i) put(mine.data(), i, t, value(rank, i));
      const char* send = mine.data();
      if (in_place) {
        std::memcpy(all.data() + rank * count * es, mine.data(), count * es);
        send = all.data() + rank * count * es;
      }
      must(ncclAllGather(send, all.data(), count, t, comm, nullptr), "ncclAllGather");
      for (int r = 0; r < size; ++r) {
        for (size_t i = 0; i < count; ++i) {
          check(get(all.data(), r * count + i, t) == value(r, i), where("allgather", t, none, in_place, r * count + i));
        }
      }
      // AlltoAll: block j of rank r goes to rank j; rank q's block arrives at q * count.
      std::vector<char> in(size * count * es), out(size * count * es, 0x55);
      for (size_t i = 0; i < size * count; ++i) put(in.data(), i, t, value(rank, i));
      if (in_place) out = in;
      must(ncclAlltoAll(in_place ? out.data() : in.data(), out.data(), count, t, comm, nullptr), "ncclAlltoAll");
      for (int q = 0; q < size; ++q) {
        for (size_t i = 0; i < count; ++i) {
          check(get(out.data(), q * count + i, t) == value(q, rank * count + i),
                where("alltoall", t, none, in_place, q * count + i));
        }
      }
      for (int root = 0; root < size; root += std::max(1, size - 1)) {
        // Gather: rank q's block at q * count on root (in place: root's block is its input).
        std::vector<char> gathered(size * count * es, 0x55);
        const char* gsend = mine.data();
        if (in_place && rank == root) {
          std::memcpy(gathered.data() + root * count * es, mine.data(), count * es);
          gsend = gathered.data() + root * count * es;
        }
        must(ncclGather(gsend, gathered.data(), count, t, root, comm, nullptr), "ncclGather");
        for (int q = 0; rank == root && q < size; ++q) {
          for (size_t i = 0; i < count; ++i) {
            check(get(gathered.data(), q * count + i, t) == value(q, i),
                  where("gather", t, none, in_place, q * count + i));
          }
        }
        // Scatter: root's block q to rank q (in place: root's output is its own block).
        std::vector<char> blocks(size * count * es), got(count * es, 0x55);
        for (size_t i = 0; i < size * count; ++i) put(blocks.data(), i, t, value(root, i));
        char* srecv = in_place && rank == root ? blocks.data() + root * count * es : got.data();
        must(ncclScatter(blocks.data(), srecv, count, t, root, comm, nullptr), "ncclScatter");
        for (size_t i = 0; i < count; ++i) {
          check(get(srecv, i, t) == value(root, rank * count + i), where("scatter", t, none, in_place, i));
        }
      }
    }
  }
}

// Every rank sends to the next and receives from the previous: without the group each
// rank's blocking send would wait for a receive that its peer has not posted.
void test_ring(ncclComm_t comm, int rank, int size) {
  if (size < 2) return;
  const size_t count = 1 << 20;  // 4 MB: more than any transport buffers
  std::vector<float> send(count), recv(count, -1);
  for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>(rank * 1000 + i % 1000);
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  must(ncclGroupStart(), "ncclGroupStart");
  must(ncclSend(send.data(), count, ncclFloat32, next, comm, nullptr), "ncclSend");
  must(ncclRecv(recv.data(), count, ncclFloat32, prev, comm, nullptr), "ncclRecv");
  must(ncclGroupEnd(), "ncclGroupEnd");
  bool ok = true;
  for (size_t i = 0; i < count; ++i) ok = ok && recv[i] == static_cast<float>(prev * 1000 + i % 1000);
  check(ok, "ring: the previous rank's data");
}

// An all-to-all with counts that differ per pair, as frameworks build it from sends and
// receives to every rank, this one included (kolo itself refuses peer == rank).
void test_alltoallv(ncclComm_t comm, int rank, int size) {
  auto count = [](int from, int to) { return static_cast<size_t>(1 + from + 2 * to); };
  std::vector<std::vector<int64_t>> out(size), in(size);
  must(ncclGroupStart(), "ncclGroupStart (alltoallv)");
  for (int q = 0; q < size; ++q) {
    out[q].assign(count(rank, q), 100 * rank + q);
    in[q].assign(count(q, rank), -1);
    must(ncclSend(out[q].data(), out[q].size(), ncclInt64, q, comm, nullptr), "ncclSend (alltoallv)");
    must(ncclRecv(in[q].data(), in[q].size(), ncclInt64, q, comm, nullptr), "ncclRecv (alltoallv)");
  }
  must(ncclGroupEnd(), "ncclGroupEnd (alltoallv)");
  for (int q = 0; q < size; ++q) {
    bool ok = true;
    for (int64_t v : in[q]) ok = ok && v == 100 * q + rank;
    check(ok, "alltoallv: the block from rank " + std::to_string(q));
  }
}

// Collectives in a group (as frameworks coalesce them), and empty calls (count 0).
void test_group_and_empty(ncclComm_t comm, int rank, int size) {
  int32_t a[3] = {rank, 1, 2}, b[2] = {10 * rank, 5};
  double c[4] = {0, 0, 0, 0};
  if (rank == 0) c[0] = 1.5, c[3] = -2;
  must(ncclGroupStart(), "ncclGroupStart (collectives)");
  must(ncclAllReduce(a, a, 3, ncclInt32, ncclSum, comm, nullptr), "grouped ncclAllReduce");
  must(ncclAllReduce(b, b, 2, ncclInt32, ncclMax, comm, nullptr), "grouped ncclAllReduce max");
  must(ncclBroadcast(c, c, 4, ncclFloat64, 0, comm, nullptr), "grouped ncclBroadcast");
  must(ncclGroupEnd(), "ncclGroupEnd (collectives)");
  check(a[0] == size * (size - 1) / 2 && a[1] == size && a[2] == 2 * size, "grouped allreduce sum");
  check(b[0] == 10 * (size - 1) && b[1] == 5, "grouped allreduce max");
  check(c[0] == 1.5 && c[3] == -2, "grouped broadcast");

  float x = 7;
  check(ncclAllReduce(&x, &x, 0, ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess, "allreduce of 0 elements");
  check(ncclBroadcast(&x, &x, 0, ncclFloat32, 0, comm, nullptr) == ncclSuccess, "broadcast of 0 elements");
  check(ncclAllGather(&x, &x, 0, ncclFloat32, comm, nullptr) == ncclSuccess, "allgather of 0 elements");
  check(x == 7, "0 elements: nothing written");
}

void test_split(ncclComm_t comm, int rank, int size) {
  ncclComm_t half = nullptr;
  must(ncclCommSplit(comm, rank % 2, rank, &half, nullptr), "ncclCommSplit");
  int n = 0, me = -1;
  must(ncclCommCount(half, &n), "ncclCommCount");
  must(ncclCommUserRank(half, &me), "ncclCommUserRank");
  check(n == (size + 1 - rank % 2) / 2, "split: size of the even/odd communicator");
  check(me == rank / 2, "split: rank in the even/odd communicator");
  int64_t v = rank;
  must(ncclAllReduce(&v, &v, 1, ncclInt64, ncclSum, half, nullptr), "ncclAllReduce on the split");
  int64_t want = 0;
  for (int r = rank % 2; r < size; r += 2) want += r;
  check(v == want, "split: allreduce of the old ranks of my color");
  must(ncclCommDestroy(half), "ncclCommDestroy (split)");

  // NCCL_SPLIT_NOCOLOR: the last rank is in no communicator.
  ncclComm_t rest = reinterpret_cast<ncclComm_t>(1);
  must(ncclCommSplit(comm, rank == size - 1 ? NCCL_SPLIT_NOCOLOR : 0, 0, &rest, nullptr), "ncclCommSplit NOCOLOR");
  if (rank == size - 1) {
    check(rest == nullptr, "split: NCCL_SPLIT_NOCOLOR gives NULL");
  } else {
    int m = 0;
    must(ncclCommCount(rest, &m), "ncclCommCount (rest)");
    check(m == size - 1, "split: the others' communicator");
    must(ncclCommDestroy(rest), "ncclCommDestroy (rest)");
  }
}

void test_premulsum(ncclComm_t comm, int rank, int size) {
  // Each rank's own scalar, rank + 1: sum over r of (r + 1) * x.
  double scalar = rank + 1;
  ncclRedOp_t op;
  must(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat64, ncclScalarHostImmediate, comm), "ncclRedOpCreatePreMulSum");
  scalar = 1000;  // host-immediate: read at creation, this does not count
  std::vector<double> x(17), y(17);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i);
  must(ncclAllReduce(x.data(), y.data(), x.size(), ncclFloat64, op, comm, nullptr), "ncclAllReduce premulsum");
  const double factor = size * (size + 1) / 2.0;
  bool ok = true;
  for (size_t i = 0; i < x.size(); ++i) ok = ok && y[i] == factor * i;
  check(ok, "premulsum host-immediate: sum of (rank+1) * x");
  check(ncclReduce(x.data(), y.data(), x.size(), ncclFloat64, op, 0, comm, nullptr) == ncclInvalidUsage,
        "premulsum on ncclReduce is refused (kolo has no prescale there)");
  check(ncclAllReduce(x.data(), y.data(), x.size(), ncclFloat32, op, comm, nullptr) == ncclInvalidArgument,
        "premulsum with another datatype than its own");
  must(ncclRedOpDestroy(op, comm), "ncclRedOpDestroy");
  check(ncclAllReduce(x.data(), y.data(), x.size(), ncclFloat64, op, comm, nullptr) == ncclInvalidArgument,
        "a destroyed operator is refused");
  check(std::strstr(ncclGetLastError(comm), "ncclRedOpCreatePreMulSum") != nullptr, "... saying what it is not");

  // "Device" residence on host memory: read at each call.
  float fscalar = 2;
  must(ncclRedOpCreatePreMulSum(&op, &fscalar, ncclFloat32, ncclScalarDevice, comm), "ncclRedOpCreatePreMulSum device");
  for (float s : {2.0f, 0.5f}) {
    fscalar = s;
    float v = 4;
    must(ncclAllReduce(&v, &v, 1, ncclFloat32, op, comm, nullptr), "ncclAllReduce premulsum device");
    check(v == 4 * s * size, "premulsum scalar read at the call: " + std::to_string(v));
  }
  must(ncclRedOpDestroy(op, comm), "ncclRedOpDestroy device");

  // Half precision scalar and data: 0.5 * (1 + 2 + ...) exact.
  uint16_t half_scalar = 0x3800;  // 0.5
  must(ncclRedOpCreatePreMulSum(&op, &half_scalar, ncclFloat16, ncclScalarHostImmediate, comm), "premulsum half");
  std::vector<char> h(2 * 4);
  for (size_t i = 0; i < 4; ++i) put(h.data(), i, ncclFloat16, 2.0 * i);
  must(ncclAllReduce(h.data(), h.data(), 4, ncclFloat16, op, comm, nullptr), "ncclAllReduce premulsum half");
  for (size_t i = 0; i < 4; ++i) check(get(h.data(), i, ncclFloat16) == 1.0 * i * size, "premulsum half");
  must(ncclRedOpDestroy(op, comm), "ncclRedOpDestroy half");
}

void expect_error(ncclResult_t got, ncclResult_t want, const char* needle, const std::string& what) {
  check(got == want, what + ": returned " + ncclGetErrorString(got));
  const char* message = ncclGetLastError(nullptr);
  check(message != nullptr && std::strstr(message, needle) != nullptr,
        what + ": ncclGetLastError says \"" + (message ? message : "(null)") + "\", wanted \"" + needle + "\"");
}

void test_errors(ncclComm_t comm, int rank, int size) {
  float x[4] = {1, 2, 3, 4}, y[4];
  expect_error(ncclAllReduce(x, y, 4, static_cast<ncclDataType_t>(ncclNumTypes), ncclSum, comm, nullptr),
               ncclInvalidArgument, "datatype 12", "bad datatype");
  expect_error(ncclAllReduce(x, y, 4, ncclFloat32, static_cast<ncclRedOp_t>(99), comm, nullptr), ncclInvalidArgument,
               "op 99", "bad op");
  expect_error(ncclBroadcast(x, y, 4, ncclFloat32, size, comm, nullptr), ncclInvalidArgument,
               std::to_string(size).c_str(), "bad root");
  expect_error(ncclReduce(x, y, 4, ncclFloat32, ncclSum, -1, comm, nullptr), ncclInvalidArgument, "-1",
               "negative root");
  expect_error(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument, "comm is NULL",
               "NULL comm");
  expect_error(ncclCommRevoke(comm, 0), ncclInvalidUsage, "ncclCommRevoke is not implemented",
               "unimplemented ncclCommRevoke");
  expect_error(ncclGather(x, y, 1, ncclFloat32, size, comm, nullptr), ncclInvalidArgument,
               ("root " + std::to_string(size)).c_str(), "gather: bad root");
  // A send to itself outside a group would never complete; inside one it needs its receive.
  expect_error(ncclSend(x, 4, ncclFloat32, rank, comm, nullptr), ncclInvalidUsage, "is this rank",
               "send to itself outside a group");
  must(ncclGroupStart(), "ncclGroupStart (unpaired)");
  must(ncclSend(x, 4, ncclFloat32, rank, comm, nullptr), "ncclSend to itself (unpaired)");
  expect_error(ncclGroupEnd(), ncclInvalidUsage, "without a partner", "a send to itself without its receive");
  expect_error(ncclCommShrink(comm, nullptr, 0, nullptr, nullptr, 0), ncclInvalidArgument, "newcomm is NULL",
               "ncclCommShrink without newcomm");
  ncclComm_t shrunk = nullptr;
  expect_error(ncclCommShrink(comm, nullptr, 0, &shrunk, nullptr, 7), ncclInvalidArgument, "shrinkFlags 7",
               "ncclCommShrink with unknown flags");
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  expect_error(ncclGroupSimulateEnd(&sim), ncclInvalidUsage, "ncclGroupSimulateEnd",
               "unimplemented ncclGroupSimulateEnd");
  // The communicator still works after all that.
  float v = 1;
  must(ncclAllReduce(&v, &v, 1, ncclFloat32, ncclSum, comm, nullptr), "ncclAllReduce after the errors");
  check(v == size, "allreduce after the errors");
  ncclResult_t async = ncclInternalError;
  must(ncclCommGetAsyncError(comm, &async), "ncclCommGetAsyncError");
  check(async == ncclSuccess, "no asynchronous error");
}

int run_collectives(const std::string& dir) {
  const char* r = std::getenv("KOLO_RANK");
  const char* s = std::getenv("KOLO_SIZE");
  if (r == nullptr || s == nullptr) {
    std::printf("run under kolorun (KOLO_RANK/KOLO_SIZE)\n");
    return 2;
  }
  const int rank = g_rank = std::atoi(r), size = std::atoi(s);

  int version = 0;
  must(ncclGetVersion(&version), "ncclGetVersion");
  check(version == NCCL_VERSION_CODE,
        "ncclGetVersion gives the header's NCCL_VERSION_CODE: " + std::to_string(version));

  const ncclUniqueId id = exchange_id(dir, rank);
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  must(ncclCommInitRankConfig(&comm, size, id, rank, &config), "ncclCommInitRankConfig");
  int n = 0, me = -1, device = -2;
  must(ncclCommCount(comm, &n), "ncclCommCount");
  must(ncclCommUserRank(comm, &me), "ncclCommUserRank");
  must(ncclCommCuDevice(comm, &device), "ncclCommCuDevice");
  check(n == size && me == rank, "count and rank");

  for (size_t count : {size_t{1}, size_t{37}}) {
    test_reductions(comm, rank, size, count);
    test_data_movement(comm, rank, size, count);
  }
  test_ring(comm, rank, size);
  test_group_and_empty(comm, rank, size);
  test_alltoallv(comm, rank, size);
  test_split(comm, rank, size);
  test_premulsum(comm, rank, size);
  test_errors(comm, rank, size);

  // A second communicator, through the scalable init (two ids, made by ranks 0 and 1).
  ncclUniqueId ids[2] = {exchange_id(dir, rank, "scalable0"), id};
  if (size > 1) {
    if (rank == 1) must(ncclGetUniqueId(&ids[1]), "ncclGetUniqueId (rank 1)");
    const std::string tmp = dir + "/scalable1.tmp", path = dir + "/scalable1";
    if (rank == 1) {
      std::ofstream(tmp, std::ios::binary).write(ids[1].internal, sizeof(ids[1].internal));
      std::rename(tmp.c_str(), path.c_str());
    }
    std::ifstream in;
    for (int tries = 0; tries < 3000 && !in.is_open(); ++tries) {
      in.open(path, std::ios::binary);
      if (!in.is_open()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    check(in.read(ids[1].internal, sizeof(ids[1].internal)).good(), "scalable: the second id");
  }
  ncclComm_t scalable = nullptr;
  must(ncclCommInitRankScalable(&scalable, size, rank, size > 1 ? 2 : 1, ids, nullptr), "ncclCommInitRankScalable");
  int64_t one = 1;
  must(ncclAllReduce(&one, &one, 1, ncclInt64, ncclSum, scalable, nullptr), "ncclAllReduce (scalable)");
  check(one == size, "allreduce on the communicator from ncclCommInitRankScalable");
  must(ncclCommDestroy(scalable), "ncclCommDestroy (scalable)");

  void* handle = nullptr;
  std::vector<char> buffer(4096);
  must(ncclCommRegister(comm, buffer.data(), buffer.size(), &handle), "ncclCommRegister");
  must(ncclCommDeregister(comm, handle), "ncclCommDeregister");
  must(ncclCommFinalize(comm), "ncclCommFinalize");
  must(ncclCommDestroy(comm), "ncclCommDestroy");
  std::printf("rank %d: collectives: %d checks, %d failed\n", rank, g_checks, g_failures);
  return g_failures == 0 && g_checks > 0 ? 0 : 1;
}

// cudaStreamSynchronize for the emulated device (emulated_device_sync.cc, linked into the
// build of this program against kolo's libnccl.so.2 only).
extern "C" int nccl_test_stream_synchronize(void* stream) __attribute__((weak));
extern "C" int nccl_test_stream_create(void** stream) __attribute__((weak));
extern "C" int nccl_test_stream_destroy(void* stream) __attribute__((weak));
extern "C" int nccl_test_fill_late(void* stream, void* p, int value, size_t bytes) __attribute__((weak));

// A send to itself on one stream, its receive on another (as all-to-all-v codes issue them
// from different streams): the copy on the receive's stream must come after the send
// stream's earlier work, here a late fill of the send buffer.
void test_self_across_streams(ncclComm_t comm, int rank, float* send, float* recv, size_t count) {
  void *send_stream = nullptr, *recv_stream = nullptr;
  check(nccl_test_stream_create(&send_stream) == 0 && nccl_test_stream_create(&recv_stream) == 0,
        "create two streams");
  for (size_t i = 0; i < count; ++i) recv[i] = -1.0f, send[i] = 0.0f;
  // Bytes of 0x3f: each float becomes 0x3f3f3f3f (about 0.747).
  check(nccl_test_fill_late(send_stream, send, 0x3f, count * sizeof(float)) == 0, "fill the send buffer late");
  must(ncclGroupStart(), "ncclGroupStart (self across streams)");
  must(ncclSend(send, count, ncclFloat32, rank, comm, static_cast<cudaStream_t>(send_stream)),
       "ncclSend to itself on stream 1");
  must(ncclRecv(recv, count, ncclFloat32, rank, comm, static_cast<cudaStream_t>(recv_stream)),
       "ncclRecv from itself on stream 2");
  must(ncclGroupEnd(), "ncclGroupEnd (self across streams)");
  check(nccl_test_stream_synchronize(recv_stream) == 0, "synchronize the receive's stream");
  uint32_t want = 0x3f3f3f3f;
  bool ok = true;
  for (size_t i = 0; i < count; ++i) ok = ok && std::memcmp(&recv[i], &want, sizeof(want)) == 0;
  check(ok, "self send/recv across streams: the receive has the send stream's late fill, got " +
                std::to_string(recv[0]));
  check(nccl_test_stream_destroy(send_stream) == 0 && nccl_test_stream_destroy(recv_stream) == 0,
        "destroy the streams");
}

// Device buffers on kolo's emulated device (KOLO_DEVICE=emulated): ncclMemAlloc memory is
// memfd-backed host memory there, so the test fills and reads it directly (a GPU program
// would cudaMemcpy). Calls are enqueued on the default stream and synchronized with it.
int run_device(const std::string& dir) {
  if (nccl_test_stream_synchronize == nullptr || nccl_test_fill_late == nullptr) {
    std::printf("FAIL: this build of the test has no stream synchronization for the emulated device\n");
    return 2;
  }
  const char* r = std::getenv("KOLO_RANK");
  const char* s = std::getenv("KOLO_SIZE");
  if (r == nullptr || s == nullptr) {
    std::printf("run under kolorun (KOLO_RANK/KOLO_SIZE)\n");
    return 2;
  }
  const int rank = g_rank = std::atoi(r), size = std::atoi(s);
  const ncclUniqueId id = exchange_id(dir, rank);
  ncclComm_t comm = nullptr;
  must(ncclCommInitRank(&comm, size, id, rank), "ncclCommInitRank");
  auto drain = [&] { check(nccl_test_stream_synchronize(nullptr) == 0, "stream synchronize"); };
  const size_t count = 1000;
  float *send = nullptr, *recv = nullptr, *all = nullptr, *scalar = nullptr;
  must(ncclMemAlloc(reinterpret_cast<void**>(&send), count * sizeof(float)), "ncclMemAlloc send");
  must(ncclMemAlloc(reinterpret_cast<void**>(&recv), count * sizeof(float)), "ncclMemAlloc recv");
  must(ncclMemAlloc(reinterpret_cast<void**>(&all), size * count * sizeof(float)), "ncclMemAlloc all");
  must(ncclMemAlloc(reinterpret_cast<void**>(&scalar), sizeof(float)), "ncclMemAlloc scalar");

  for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>((rank + i) % 7);
  must(ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, nullptr), "device ncclAllReduce");
  drain();
  bool ok = true;
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int q = 0; q < size; ++q) want += static_cast<float>((q + i) % 7);
    ok = ok && recv[i] == want;
  }
  check(ok, "device allreduce sum");

  must(ncclAllGather(send, all, count, ncclFloat32, comm, nullptr), "device ncclAllGather");
  drain();
  ok = true;
  for (int q = 0; q < size; ++q) {
    for (size_t i = 0; i < count; ++i) ok = ok && all[q * count + i] == static_cast<float>((q + i) % 7);
  }
  check(ok, "device allgather");

  // Gather to the last rank: point-to-point in a group, root's own block copied on the stream.
  for (size_t i = 0; i < size * count; ++i) all[i] = -1.0f;
  must(ncclGather(send, all, count, ncclFloat32, size - 1, comm, nullptr), "device ncclGather");
  drain();
  ok = true;
  for (int q = 0; rank == size - 1 && q < size; ++q) {
    for (size_t i = 0; i < count; ++i) ok = ok && all[q * count + i] == static_cast<float>((q + i) % 7);
  }
  check(ok, "device gather");

  test_self_across_streams(comm, rank, send, recv, count);

  for (size_t i = 0; i < count; ++i) recv[i] = rank == 0 ? static_cast<float>(i) : -1.0f;
  must(ncclBcast(recv, count, ncclFloat32, 0, comm, nullptr), "device ncclBcast");
  drain();
  ok = true;
  for (size_t i = 0; i < count; ++i) ok = ok && recv[i] == static_cast<float>(i);
  check(ok, "device broadcast");

  // PreMulSum with the scalar in device memory: read in stream order at the call.
  ncclRedOp_t op;
  *scalar = static_cast<float>(rank + 1);
  must(ncclRedOpCreatePreMulSum(&op, scalar, ncclFloat32, ncclScalarDevice, comm), "ncclRedOpCreatePreMulSum device");
  for (size_t i = 0; i < count; ++i) send[i] = 2.0f;
  must(ncclAllReduce(send, recv, count, ncclFloat32, op, comm, nullptr), "device ncclAllReduce premulsum");
  drain();
  ok = true;
  for (size_t i = 0; i < count; ++i) ok = ok && recv[i] == 2.0f * size * (size + 1) / 2;
  check(ok, "device premulsum with a device scalar: " + std::to_string(recv[0]));
  must(ncclRedOpDestroy(op, comm), "ncclRedOpDestroy");

  // Window registration: collective, as NCCL's; the registered buffers then serve in place.
  ncclWindow_t win_send = nullptr, win_recv = nullptr;
  must(ncclCommWindowRegister(comm, send, count * sizeof(float), &win_send, NCCL_WIN_COLL_SYMMETRIC),
       "ncclCommWindowRegister send");
  must(ncclCommWindowRegister(comm, recv, count * sizeof(float), &win_recv, NCCL_WIN_COLL_SYMMETRIC),
       "ncclCommWindowRegister recv");
  for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>(rank);
  must(ncclAllReduce(send, recv, count, ncclFloat32, ncclMax, comm, nullptr), "device ncclAllReduce in windows");
  drain();
  ok = true;
  for (size_t i = 0; i < count; ++i) ok = ok && recv[i] == static_cast<float>(size - 1);
  check(ok, "device allreduce max in registered windows");
  must(ncclCommWindowDeregister(comm, win_recv), "ncclCommWindowDeregister recv");
  must(ncclCommWindowDeregister(comm, win_send), "ncclCommWindowDeregister send");

  ncclResult_t async = ncclInternalError;
  must(ncclCommGetAsyncError(comm, &async), "ncclCommGetAsyncError");
  check(async == ncclSuccess, "no asynchronous error");
  must(ncclCommDestroy(comm), "ncclCommDestroy");
  for (float* p : {send, recv, all, scalar}) must(ncclMemFree(p), "ncclMemFree");
  std::printf("rank %d: device: %d checks, %d failed\n", rank, g_checks, g_failures);
  return g_failures == 0 && g_checks > 0 ? 0 : 1;
}

// ncclCommAbort from another thread while a call blocks (a watchdog's way): the call
// returns with an error, the abort succeeds, nothing hangs. Two or more ranks; rank 0's
// allreduce has no partner (the others never call it).
int run_abort(const std::string& dir) {
  const int rank = g_rank = std::atoi(std::getenv("KOLO_RANK")), size = std::atoi(std::getenv("KOLO_SIZE"));
  const ncclUniqueId id = exchange_id(dir, rank);
  ncclComm_t comm = nullptr;
  must(ncclCommInitRank(&comm, size, id, rank), "ncclCommInitRank");
  if (rank == 0) {
    ncclResult_t blocked = ncclSuccess;
    std::string message;
    const auto start = std::chrono::steady_clock::now();
    std::thread caller([&] {
      float x = 1;
      blocked = ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr);
      message = ncclGetLastError(nullptr);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    check(ncclCommAbort(comm) == ncclSuccess, std::string("ncclCommAbort: ") + ncclGetLastError(nullptr));
    caller.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("rank 0: the blocked allreduce returned %s after %.1f s: %s\n", ncclGetErrorString(blocked), seconds,
                message.c_str());
    check(blocked != ncclSuccess && !message.empty(), "the blocked call fails, with a message");
    check(seconds < 30, "... well before KOLO_TIMEOUT");
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    check(ncclCommAbort(comm) == ncclSuccess, std::string("ncclCommAbort: ") + ncclGetLastError(nullptr));
  }
  std::printf("rank %d: abort: %d checks, %d failed\n", rank, g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}

// One round of abort_open_group: rank 0's thread opens a group with a send to rank 1
// (which never receives: 4 MiB, too big to be sent eagerly) while the watchdog aborts the
// communicator; the group's end comes `delay_us` after the abort has started, from 0 (the
// two race) up. The group's end must fail, the abort succeed, nothing crash or hang.
void abort_open_group_round(const std::string& dir, int rank, int size, int round, int delay_us) {
  const ncclUniqueId id = exchange_id(dir, rank, ("open_group" + std::to_string(round)).c_str());
  ncclComm_t comm = nullptr;
  must(ncclCommInitRank(&comm, size, id, rank), "ncclCommInitRank (abort_open_group)");
  if (rank != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    check(ncclCommAbort(comm) == ncclSuccess, std::string("ncclCommAbort: ") + ncclGetLastError(nullptr));
    return;
  }
  std::vector<float> data(1 << 20, 1.0f);
  std::atomic<bool> queued{false}, aborting{false};
  ncclResult_t ended = ncclSuccess;
  std::string message;
  std::thread caller([&] {
    must(ncclGroupStart(), "ncclGroupStart (abort_open_group)");
    must(ncclSend(data.data(), data.size(), ncclFloat32, 1, comm, nullptr), "ncclSend in the open group");
    queued = true;
    while (!aborting) std::this_thread::yield();
    if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    ended = ncclGroupEnd();
    message = ncclGetLastError(nullptr);
  });
  while (!queued) std::this_thread::yield();
  aborting = true;
  const ncclResult_t aborted = ncclCommAbort(comm);
  const std::string abort_message = ncclGetLastError(nullptr);
  caller.join();
  std::printf("rank 0: round %d (group end %d us after the abort began): ncclGroupEnd returned %s: %s\n", round,
              delay_us, ncclGetErrorString(ended), message.c_str());
  const std::string what = "abort_open_group round " + std::to_string(round) + ": ";
  check(aborted == ncclSuccess, what + "ncclCommAbort returned " + ncclGetErrorString(aborted) + ": " + abort_message);
  check(ended != ncclSuccess && !message.empty(), what + "ncclGroupEnd after the abort returned " +
                                                       ncclGetErrorString(ended) + ": " + message);
}

// This thread aborts the communicator its own open group has a call on: the abort must not
// wait for the group (which only this thread can end), and the group's end reports it.
void abort_own_open_group(const std::string& dir, int rank, int size) {
  const ncclUniqueId id = exchange_id(dir, rank, "open_group_own");
  ncclComm_t comm = nullptr;
  must(ncclCommInitRank(&comm, size, id, rank), "ncclCommInitRank (abort own open group)");
  if (rank != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    check(ncclCommAbort(comm) == ncclSuccess, std::string("ncclCommAbort: ") + ncclGetLastError(nullptr));
    return;
  }
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  must(ncclGroupStart(), "ncclGroupStart (own open group)");
  must(ncclSend(x, 4, ncclFloat32, 1, comm, nullptr), "ncclSend (own open group)");
  must(ncclSend(x, 4, ncclFloat32, 0, comm, nullptr), "ncclSend to itself (own open group)");
  const auto start = std::chrono::steady_clock::now();
  check(ncclCommAbort(comm) == ncclSuccess,
        std::string("ncclCommAbort of this thread's open group: ") + ncclGetLastError(nullptr));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  check(seconds < 10, "ncclCommAbort of this thread's open group does not wait for it: " + std::to_string(seconds));
  expect_error(ncclGroupEnd(), ncclSystemError, "was aborted", "ncclGroupEnd of a group whose communicator was aborted");
  // The thread's group state is clean: a group on no communicator ends well.
  must(ncclGroupStart(), "ncclGroupStart (after the aborted group)");
  must(ncclGroupEnd(), "ncclGroupEnd (after the aborted group)");
  (void)y;
}

// A split that hangs (rank 1 never calls it) and the watchdog's abort: the split is counted
// in flight, so the abort waits for it to return (with an error) before freeing comm.
void abort_hung_split(const std::string& dir, int rank, int size) {
  const ncclUniqueId id = exchange_id(dir, rank, "hung_split");
  ncclComm_t comm = nullptr;
  must(ncclCommInitRank(&comm, size, id, rank), "ncclCommInitRank (hung split)");
  if (rank != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    check(ncclCommAbort(comm) == ncclSuccess, std::string("ncclCommAbort: ") + ncclGetLastError(nullptr));
    return;
  }
  ncclResult_t split = ncclSuccess;
  ncclComm_t part = nullptr;
  std::string message;
  const auto start = std::chrono::steady_clock::now();
  std::thread caller([&] {
    split = ncclCommSplit(comm, 0, rank, &part, nullptr);
    message = ncclGetLastError(nullptr);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  check(ncclCommAbort(comm) == ncclSuccess, std::string("ncclCommAbort of a hung split: ") + ncclGetLastError(nullptr));
  caller.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("rank 0: the hung split returned %s after %.1f s: %s\n", ncclGetErrorString(split), seconds,
              message.c_str());
  check(split != ncclSuccess && part == nullptr, "the hung split fails");
  check(seconds < 30, "... well before KOLO_TIMEOUT");
}

int run_abort_open_group(const std::string& dir) {
  const int rank = g_rank = std::atoi(std::getenv("KOLO_RANK")), size = std::atoi(std::getenv("KOLO_SIZE"));
  const int delays_us[] = {0, 0, 0, 50, 0, 200, 0, 1000, 0, 5000};
  int round = 0;
  const char* only = std::getenv("NCCL_TEST_ONLY");
  if (only == nullptr || std::string(only) == "rounds") {
    for (int delay : delays_us) abort_open_group_round(dir, rank, size, round++, delay);
  }
  if (only == nullptr || std::string(only) == "own") abort_own_open_group(dir, rank, size);
  if (only == nullptr || std::string(only) == "split") abort_hung_split(dir, rank, size);
  // Rank 0's process holds the rendezvous store: it stays until the others are done with it.
  const std::string finished = dir + "/finished" + std::to_string(rank);
  std::ofstream(finished).put('1');
  for (int q = 0; rank == 0 && q < size; ++q) {
    const std::string path = dir + "/finished" + std::to_string(q);
    for (int tries = 0; tries < 3000 && !std::ifstream(path).good(); ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::printf("rank %d: abort_open_group: %d rounds, %d checks, %d failed\n", rank, round, g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}

int run_init_all() {
  const int ndev = 3;
  ncclComm_t comms[ndev] = {};
  must(ncclCommInitAll(comms, ndev, nullptr), "ncclCommInitAll");
  std::vector<std::thread> threads;
  std::vector<int> counts(ndev), ranks(ndev), devices(ndev), sums(ndev);
  std::vector<ncclResult_t> results(ndev);
  // Host buffers block, so each communicator's rank calls from its own thread.
  for (int i = 0; i < ndev; ++i) {
    threads.emplace_back([&, i] {
      ncclCommCount(comms[i], &counts[i]);
      ncclCommUserRank(comms[i], &ranks[i]);
      ncclCommCuDevice(comms[i], &devices[i]);
      sums[i] = 10 * (i + 1);
      results[i] = ncclAllReduce(&sums[i], &sums[i], 1, ncclInt32, ncclSum, comms[i], nullptr);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < ndev; ++i) {
    check(results[i] == ncclSuccess, "init_all: allreduce on communicator " + std::to_string(i));
    check(counts[i] == ndev && ranks[i] == i, "init_all: count and rank of communicator " + std::to_string(i));
    check(devices[i] == i,
          "init_all: device of communicator " + std::to_string(i) + " = " + std::to_string(devices[i]));
    check(sums[i] == 60, "init_all: sum on communicator " + std::to_string(i) + " = " + std::to_string(sums[i]));
    must(ncclCommDestroy(comms[i]), "ncclCommDestroy");
  }
  int dup[2] = {0, 0};
  expect_error(ncclCommInitAll(comms, 2, dup), ncclInvalidUsage, "both device 0", "init_all: the same device twice");
  expect_error(ncclCommInitAll(comms, 0, nullptr), ncclInvalidArgument, "ndev = 0", "init_all: no devices");
  // A device that cannot exist: refused before any thread waits in kolo's init for the
  // others (which used to wait until KOLO_TIMEOUT), and the message says so once.
  int bad[3] = {0, -1, 2};
  const auto start = std::chrono::steady_clock::now();
  expect_error(ncclCommInitAll(comms, 3, bad), ncclInvalidArgument, "devlist[1] = -1", "init_all: device -1");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  check(seconds < 5, "init_all: a bad device is refused quickly, not after KOLO_TIMEOUT: " + std::to_string(seconds));
  const std::string message = ncclGetLastError(nullptr);
  check(message.find("kolo-nccl: kolo-nccl") == std::string::npos, "init_all: one prefix: " + message);
  check(comms[0] == nullptr && comms[1] == nullptr && comms[2] == nullptr, "init_all: no communicator on failure");
  std::printf("init_all: %d checks, %d failed\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}

int run_backend_guard() {
  check(dlsym(RTLD_DEFAULT, "kolo_nccl_dropin") != nullptr, "the drop-in's marker symbol is exported");
  ncclUniqueId id;
  must(ncclGetUniqueId(&id), "ncclGetUniqueId");
  ncclComm_t comm = nullptr;
  expect_error(ncclCommInitRank(&comm, 1, id, 0), ncclInvalidUsage, "KOLO_BACKEND=nccl",
               "ncclCommInitRank with KOLO_BACKEND=nccl");
  check(comm == nullptr, "no communicator");
  std::printf("backend_guard: %d checks, %d failed\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario == "collectives" && argc > 2) return run_collectives(argv[2]);
  if (scenario == "device" && argc > 2) return run_device(argv[2]);
  if (scenario == "abort" && argc > 2 && std::getenv("KOLO_RANK") != nullptr) return run_abort(argv[2]);
  if (scenario == "abort_open_group" && argc > 2 && std::getenv("KOLO_RANK") != nullptr) {
    return run_abort_open_group(argv[2]);
  }
  if (scenario == "init_all") return run_init_all();
  if (scenario == "backend_guard") return run_backend_guard();
  std::printf("usage: %s collectives DIR | device DIR | abort DIR | abort_open_group DIR | init_all | backend_guard\n", argv[0]);
  return 2;
}
