#include "perf_collectives.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include "perf_data.h"
#include "support/device/device.h"
#include "support/env.h"

namespace kolo_perf {
namespace {

size_t es(const Case& c) { return dtype_bytes(c.dtype); }

// Fills n elements of buf (from element `first`) with rank's values for op.
void fill(std::vector<char>& buf, size_t offset_elems, size_t n, const Case& c, int rank, size_t index_base,
          kolo_op_t op) {
  for (size_t i = 0; i < n; ++i) store_value(buf.data(), offset_elems + i, c.dtype, input_value(op, c.dtype, rank, index_base + i));
}

size_t count_whole(size_t bytes, const Case& c) { return bytes / es(c); }
size_t count_per_rank(size_t bytes, const Case& c) { return bytes / es(c) / c.nranks; }
size_t size_whole(size_t count, const Case& c) { return count * es(c); }
size_t size_all_ranks(size_t count, const Case& c) { return count * es(c) * c.nranks; }

// Values a rank sends to `peer` in alltoall: distinct per (from, to, index), exact in fp8.
double alltoall_value(const Case& c, int from, int to, size_t k) {
  return as_dtype(static_cast<double>((from * 3 + to * 5 + k) % 11), c.dtype);
}

// ---- allreduce / reduce
void prepare_reduce(Buffers& b, size_t n, const Case& c, bool in_place) {
  b.send.assign(n * es(c), 0);
  b.recv.assign(n * es(c), 0x7f);
  if (c.wire != KOLO_DTYPE_COUNT) {
    float* in = reinterpret_cast<float*>(in_place ? b.recv.data() : b.send.data());
    for (size_t i = 0; i < n; ++i) in[i] = wire_input_value(c.rank, i);
    return;
  }
  fill(in_place ? b.recv : b.send, 0, n, c, c.rank, 0, c.op);
}
// Compressed results: |got - exact| in units of one wire rounding of the contributions
// (u * mag) into wire_error(); counts those above `limit` units. exact_of(i) gives the
// exact value and its magnitude sum.
template <class ExactOf>
size_t check_wire_units(const float* got, size_t n, const Case& c, double limit, ExactOf exact_of) {
  const double u = wire_unit_roundoff(c.wire);
  WireError& e = wire_error();
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto [exact, mag] = exact_of(i);
    const double units = std::fabs(got[i] - exact) / (u * mag);
    if (!(units <= limit)) ++wrong;
    e.max = std::max(e.max, units);
    e.sum += units;
    ++e.n;
  }
  return wrong;
}
// The sum over the ranks of element `index`, postscaled as op asks, and its magnitude.
std::pair<double, double> wire_sum(const Case& c, size_t index) {
  const double post = c.op == KOLO_AVG ? 1.0 / c.nranks : 1.0;
  double exact = 0, mag = 0;
  for (int r = 0; r < c.nranks; ++r) {
    const double v = wire_input_value(r, index);
    exact += v;
    mag += std::fabs(v);
  }
  return {exact * post, mag * post};
}
// allreduce: one rounding per contribution plus one of the result.
size_t check_compressed(const std::vector<char>& out, size_t n, const Case& c) {
  return check_wire_units(reinterpret_cast<const float*>(out.data()), n, c, 2.05,
                          [&](size_t i) { return wire_sum(c, i); });
}
size_t check_reduce_result(const std::vector<char>& out, size_t n, const Case& c) {
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!matches(load_value(out.data(), i, c.dtype), expected_reduction(c.op, c.dtype, c.nranks, i), c.op, c.dtype)) ++wrong;
  }
  return wrong;
}
kolo_result_t call_allreduce(Buffers& b, size_t n, const Case& c, bool in_place, kolo_comm_t comm) {
  if (c.wire == KOLO_DTYPE_COUNT) {
    return kolo_allreduce(in_place ? b.recv_ptr() : b.send_ptr(), b.recv_ptr(), n, c.dtype, c.op, comm, b.stream);
  }
  kolo_coll_options options = KOLO_COLL_OPTIONS_INIT;
  options.wire_dtype = c.wire;
  return kolo_allreduce_ex(in_place ? b.recv_ptr() : b.send_ptr(), b.recv_ptr(), n, c.dtype, c.op, &options, comm,
                           b.stream);
}
size_t check_allreduce(const Buffers& b, size_t n, const Case& c, bool) {
  return c.wire != KOLO_DTYPE_COUNT ? check_compressed(b.recv, n, c) : check_reduce_result(b.recv, n, c);
}
kolo_result_t call_reduce(Buffers& b, size_t n, const Case& c, bool in_place, kolo_comm_t comm) {
  return kolo_reduce(in_place ? b.recv_ptr() : b.send_ptr(), b.recv_ptr(), n, c.dtype, c.op, c.root, comm, b.stream);
}
size_t check_reduce(const Buffers& b, size_t n, const Case& c, bool) {
  return c.rank == c.root ? check_reduce_result(b.recv, n, c) : 0;
}

// ---- broadcast
void prepare_broadcast(Buffers& b, size_t n, const Case& c, bool in_place) {
  b.send.assign(n * es(c), 0);
  b.recv.assign(n * es(c), 0x7f);
  if (c.rank == c.root) fill(in_place ? b.recv : b.send, 0, n, c, c.root, 0, KOLO_SUM);
}
kolo_result_t call_broadcast(Buffers& b, size_t n, const Case& c, bool in_place, kolo_comm_t comm) {
  return kolo_broadcast(in_place ? b.recv_ptr() : b.send_ptr(), b.recv_ptr(), n, c.dtype, c.root, comm, b.stream);
}
size_t check_broadcast(const Buffers& b, size_t n, const Case& c, bool) {
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    if (load_value(b.recv.data(), i, c.dtype) != as_dtype(input_value(KOLO_SUM, c.dtype, c.root, i), c.dtype)) ++wrong;
  }
  return wrong;
}

// ---- allgather (count = per rank)
void prepare_allgather(Buffers& b, size_t n, const Case& c, bool in_place) {
  b.send.assign(n * es(c), 0);
  b.recv.assign(n * es(c) * c.nranks, 0x7f);
  if (c.wire != KOLO_DTYPE_COUNT) {
    float* in = reinterpret_cast<float*>(in_place ? b.recv.data() + c.rank * n * es(c) : b.send.data());
    for (size_t i = 0; i < n; ++i) in[i] = wire_input_value(c.rank, i);
    return;
  }
  if (in_place) fill(b.recv, c.rank * n, n, c, c.rank, 0, KOLO_SUM);
  else fill(b.send, 0, n, c, c.rank, 0, KOLO_SUM);
}
kolo_result_t call_allgather(Buffers& b, size_t n, const Case& c, bool in_place, kolo_comm_t comm) {
  const void* send = in_place ? b.recv_ptr() + c.rank * n * es(c) : b.send_ptr();
  kolo_coll_options options = KOLO_COLL_OPTIONS_INIT;
  options.wire_dtype = c.wire;
  return kolo_allgather_ex(send, b.recv_ptr(), n, c.dtype, &options, comm, b.stream);
}
size_t check_allgather(const Buffers& b, size_t n, const Case& c, bool) {
  if (c.wire != KOLO_DTYPE_COUNT) {
    // Each value rounded once (relative to itself: the test values keep fp8 blocks narrow).
    return check_wire_units(reinterpret_cast<const float*>(b.recv.data()), n * c.nranks, c, 1.05, [&](size_t k) {
      const double v = wire_input_value(static_cast<int>(k / n), k % n);
      return std::pair<double, double>{v, std::fabs(v)};
    });
  }
  size_t wrong = 0;
  for (int q = 0; q < c.nranks; ++q) {
    for (size_t i = 0; i < n; ++i) {
      if (load_value(b.recv.data(), q * n + i, c.dtype) != as_dtype(input_value(KOLO_SUM, c.dtype, q, i), c.dtype)) ++wrong;
    }
  }
  return wrong;
}

// ---- allgatherv: rank q contributes n + q elements; blocks land in reverse rank order.
size_t v_count(size_t n, int q) { return n == 0 ? 0 : n + q; }
std::vector<size_t> v_counts(size_t n, const Case& c) {
  std::vector<size_t> counts(c.nranks);
  for (int q = 0; q < c.nranks; ++q) counts[q] = v_count(n, q);
  return counts;
}
std::vector<size_t> v_displs(size_t n, const Case& c) {
  std::vector<size_t> displs(c.nranks);
  size_t offset = 0;
  for (int q = c.nranks - 1; q >= 0; --q) {
    displs[q] = offset;
    offset += v_count(n, q);
  }
  return displs;
}
void prepare_allgatherv(Buffers& b, size_t n, const Case& c, bool) {
  std::vector<size_t> counts = v_counts(n, c);
  size_t total = 0;
  for (size_t k : counts) total += k;
  b.send.assign(counts[c.rank] * es(c), 0);
  b.recv.assign(total * es(c), 0x7f);
  fill(b.send, 0, counts[c.rank], c, c.rank, 0, KOLO_SUM);
}
kolo_result_t call_allgatherv(Buffers& b, size_t n, const Case& c, bool, kolo_comm_t comm) {
  std::vector<size_t> counts = v_counts(n, c);
  std::vector<size_t> displs = v_displs(n, c);
  return kolo_allgatherv(b.send_ptr(), counts[c.rank], b.recv_ptr(), counts.data(), displs.data(), c.dtype, comm,
                         b.stream);
}
size_t check_allgatherv(const Buffers& b, size_t n, const Case& c, bool) {
  std::vector<size_t> counts = v_counts(n, c);
  std::vector<size_t> displs = v_displs(n, c);
  size_t wrong = 0;
  for (int q = 0; q < c.nranks; ++q) {
    for (size_t i = 0; i < counts[q]; ++i) {
      if (load_value(b.recv.data(), displs[q] + i, c.dtype) != as_dtype(input_value(KOLO_SUM, c.dtype, q, i), c.dtype)) ++wrong;
    }
  }
  return wrong;
}

// ---- reduce_scatter (count = per rank)
void prepare_reduce_scatter(Buffers& b, size_t n, const Case& c, bool in_place) {
  b.send.assign(n * es(c) * c.nranks, 0);
  b.recv.assign(n * es(c), 0x7f);
  if (c.wire != KOLO_DTYPE_COUNT) {
    float* in = reinterpret_cast<float*>(b.send.data());
    for (size_t i = 0; i < n * c.nranks; ++i) in[i] = wire_input_value(c.rank, i);
    return;
  }
  fill(b.send, 0, n * c.nranks, c, c.rank, 0, c.op);
}
kolo_result_t call_reduce_scatter(Buffers& b, size_t n, const Case& c, bool in_place, kolo_comm_t comm) {
  void* recv = in_place ? b.send_ptr() + c.rank * n * es(c) : b.recv_ptr();
  kolo_coll_options options = KOLO_COLL_OPTIONS_INIT;
  options.wire_dtype = c.wire;
  return kolo_reduce_scatter_ex(b.send_ptr(), recv, n, c.dtype, c.op, &options, comm, b.stream);
}
size_t check_reduce_scatter(const Buffers& b, size_t n, const Case& c, bool in_place) {
  const char* out = in_place ? b.send.data() + c.rank * n * es(c) : b.recv.data();
  if (c.wire != KOLO_DTYPE_COUNT) {
    // One rounding per contribution; the fp32 sum is the result.
    return check_wire_units(reinterpret_cast<const float*>(out), n, c, 1.05,
                            [&](size_t i) { return wire_sum(c, c.rank * n + i); });
  }
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    double expected = expected_reduction(c.op, c.dtype, c.nranks, c.rank * n + i);
    if (!matches(load_value(out, i, c.dtype), expected, c.op, c.dtype)) ++wrong;
  }
  return wrong;
}

// ---- alltoall (count = per peer)
void prepare_alltoall(Buffers& b, size_t n, const Case& c, bool in_place) {
  b.send.assign(n * es(c) * c.nranks, 0);
  b.recv.assign(n * es(c) * c.nranks, 0x7f);
  std::vector<char>& src = in_place ? b.recv : b.send;
  for (int q = 0; q < c.nranks; ++q) {
    for (size_t k = 0; k < n; ++k) store_value(src.data(), q * n + k, c.dtype, alltoall_value(c, c.rank, q, k));
  }
}
kolo_result_t call_alltoall(Buffers& b, size_t n, const Case& c, bool in_place, kolo_comm_t comm) {
  return kolo_alltoall(in_place ? b.recv_ptr() : b.send_ptr(), b.recv_ptr(), n, c.dtype, comm, b.stream);
}
size_t check_alltoall(const Buffers& b, size_t n, const Case& c, bool) {
  size_t wrong = 0;
  for (int q = 0; q < c.nranks; ++q) {
    for (size_t k = 0; k < n; ++k) {
      if (load_value(b.recv.data(), q * n + k, c.dtype) != alltoall_value(c, q, c.rank, k)) ++wrong;
    }
  }
  return wrong;
}

// ---- sendrecv: each rank sends to the next and receives from the previous, in a group.
void prepare_sendrecv(Buffers& b, size_t n, const Case& c, bool) {
  b.send.assign(n * es(c), 0);
  b.recv.assign(n * es(c), 0x7f);
  fill(b.send, 0, n, c, c.rank, 0, KOLO_SUM);
}
kolo_result_t call_sendrecv(Buffers& b, size_t n, const Case& c, bool, kolo_comm_t comm) {
  if (c.nranks == 1) {
    if (!b.device) {
      std::memcpy(b.recv_ptr(), b.send_ptr(), n * es(c));
    } else if (!kolo::device::runtime().memcpy_async(b.recv_ptr(), b.send_ptr(), n * es(c), b.stream).ok()) {
      return KOLO_ERR_SYSTEM;
    }
    return KOLO_SUCCESS;
  }
  kolo_group_start();
  kolo_result_t sent = kolo_send(b.send_ptr(), n, c.dtype, (c.rank + 1) % c.nranks, comm, b.stream);
  kolo_result_t got = kolo_recv(b.recv_ptr(), n, c.dtype, (c.rank + c.nranks - 1) % c.nranks, comm, b.stream);
  kolo_result_t ended = kolo_group_end();
  return sent != KOLO_SUCCESS ? sent : got != KOLO_SUCCESS ? got : ended;
}
size_t check_sendrecv(const Buffers& b, size_t n, const Case& c, bool) {
  int from = (c.rank + c.nranks - 1) % c.nranks;
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    if (load_value(b.recv.data(), i, c.dtype) != as_dtype(input_value(KOLO_SUM, c.dtype, from, i), c.dtype)) ++wrong;
  }
  return wrong;
}

const Collective kCollectives[] = {
    {"allreduce", true, false, count_whole, size_whole, prepare_reduce, call_allreduce, check_allreduce},
    {"allgather", false, false, count_per_rank, size_all_ranks, prepare_allgather, call_allgather, check_allgather},
    {"allgatherv", false, false, count_per_rank, size_all_ranks, prepare_allgatherv, call_allgatherv,
     check_allgatherv},
    {"broadcast", false, true, count_whole, size_whole, prepare_broadcast, call_broadcast, check_broadcast},
    {"reduce", true, true, count_whole, size_whole, prepare_reduce, call_reduce, check_reduce},
    {"reduce_scatter", true, false, count_per_rank, size_all_ranks, prepare_reduce_scatter, call_reduce_scatter,
     check_reduce_scatter},
    {"alltoall", false, false, count_per_rank, size_all_ranks, prepare_alltoall, call_alltoall, check_alltoall},
    {"sendrecv", false, false, count_whole, size_whole, prepare_sendrecv, call_sendrecv, check_sendrecv},
};

}  // namespace

double Collective::busbw_factor(int p) const {
  std::string n = name;
  if (n == "allreduce") return p > 1 ? 2.0 * (p - 1) / p : 1.0;
  if (n == "allgather" || n == "allgatherv" || n == "reduce_scatter" || n == "alltoall") return p > 1 ? double(p - 1) / p : 1.0;
  return 1.0;
}

WireError& wire_error() {
  thread_local WireError e;  // per rank (kolo-perf -t runs ranks as threads)
  return e;
}

const Collective* find_collective(const std::string& name) {
  for (const Collective& c : kCollectives) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

std::vector<std::string> collective_names() {
  std::vector<std::string> names;
  for (const Collective& c : kCollectives) names.push_back(c.name);
  return names;
}

// ---- device mode
namespace {

bool report(const char* what, const kolo::Status& s) {
  if (!s.ok()) std::fprintf(stderr, "kolo-perf: device %s failed: %s\n", what, s.message().c_str());
  return s.ok();
}

// A rank's device buffers and stream, taken once at the largest size before any device
// call (reserve_device_buffers) and freed once after the last (release_device_buffers):
// with ranks as threads of one process (-t), an allocation or a cudaFree while a peer's
// collective waits for this rank on the device may wait for the whole device, which waits
// out KOLO_TIMEOUT (NCCL documents the same hazard).
struct Mirrors {
  char* send = nullptr;
  char* recv = nullptr;
  size_t bytes = 0;  // each
  void* stream = nullptr;
  ~Mirrors() { release(); }
  void release() {
    const kolo::device::DeviceOps& d = kolo::device::runtime();
    if (stream != nullptr) (void)d.stream_synchronize(stream, kolo::Deadline(60));
    for (char* p : {send, recv}) {
      if (p != nullptr) (void)d.free(p);
    }
    if (stream != nullptr) (void)d.stream_destroy(stream);
    send = recv = nullptr;
    bytes = 0;
    stream = nullptr;
  }
};

Mirrors& mirrors() {
  thread_local Mirrors m;
  return m;
}

}  // namespace

bool reserve_device_buffers(size_t bytes) {
  Mirrors& m = mirrors();
  m.release();
  const kolo::device::DeviceOps& d = kolo::device::runtime();
  if (!report("stream_create", d.stream_create(&m.stream))) return false;
  if (bytes == 0) return true;
  void* send = nullptr;
  void* recv = nullptr;
  const bool ok = report("malloc", d.malloc(&send, bytes)) && report("malloc", d.malloc(&recv, bytes));
  m.send = static_cast<char*>(send);
  m.recv = static_cast<char*>(recv);
  m.bytes = ok ? bytes : 0;
  return ok;
}

void release_device_buffers() { mirrors().release(); }

bool register_buffers(Registered& r, kolo_comm_t comm, size_t bytes) {
  r.comm = comm;
  r.bytes = std::max<size_t>(bytes, 64);
  void* send = nullptr;
  void* recv = nullptr;
  auto failed = [](const char* what) {
    std::fprintf(stderr, "kolo-perf: %s failed: %s\n", what, kolo_last_error());
    return false;
  };
  if (kolo_mem_alloc(&send, r.bytes) != KOLO_SUCCESS || kolo_mem_alloc(&recv, r.bytes) != KOLO_SUCCESS) {
    return failed("kolo_mem_alloc");
  }
  r.send = static_cast<char*>(send);
  r.recv = static_cast<char*>(recv);
  if (kolo_mem_register(comm, send, r.bytes, &r.send_handle) != KOLO_SUCCESS ||
      kolo_mem_register(comm, recv, r.bytes, &r.recv_handle) != KOLO_SUCCESS) {
    return failed("kolo_mem_register");
  }
  return true;
}

void deregister_buffers(Registered& r) {
  for (void* h : {r.send_handle, r.recv_handle}) {
    if (h != nullptr && kolo_mem_deregister(r.comm, h) != KOLO_SUCCESS) {
      std::fprintf(stderr, "kolo-perf: kolo_mem_deregister failed: %s\n", kolo_last_error());
    }
  }
  (void)kolo_mem_free(r.send);
  (void)kolo_mem_free(r.recv);
  r = Registered{};
}

// The device memory and stream are the thread's (Mirrors), kept for the next size.
Buffers::~Buffers() {
  if (device && stream != nullptr) (void)kolo::device::runtime().stream_synchronize(stream, kolo::Deadline(60));
}

bool device_select(int local_rank) {
  const kolo::device::DeviceOps& d = kolo::device::runtime();
  const int count = d.device_count();
  if (count <= 0) {
    return report("selection", kolo::error(kolo::Code::kUnsupported, "-G needs a device and the device runtime '",
                                           d.name, "' has none (KOLO_DEVICE=auto finds a GPU with its driver; "
                                           "KOLO_DEVICE=emulated runs the device path on the CPU)"));
  }
  return report("set_device", d.set_device(local_rank % count));
}

int device_current() {
  kolo::Result<int> d = kolo::device::runtime().current_device();
  return d.ok() ? d.value() : -1;
}

bool device_upload(Buffers& b) {
  const kolo::device::DeviceOps& d = kolo::device::runtime();
  b.device = true;
  // Programs that did not reserve (the test worker's scenarios) get buffers as they need
  // them; kolo-perf reserved the largest first, so it never allocates here.
  const Mirrors& m = mirrors();
  const size_t need = b.registered != nullptr ? 0 : std::max(b.send.size(), b.recv.size());
  if ((m.stream == nullptr || need > m.bytes) && !reserve_device_buffers(need)) return false;
  b.stream = m.stream;
  // Registered buffers (--registered) or the rank's own, taken at the largest size.
  const size_t have = b.registered != nullptr ? b.registered->bytes : m.bytes;
  if (b.send.size() > have || b.recv.size() > have) {
    return report("device buffers", kolo::error(kolo::Code::kInternal, "too small for ", b.send.size(), " and ",
                                                b.recv.size(), " bytes"));
  }
  b.dsend = b.registered != nullptr ? b.registered->send : m.send;
  b.drecv = b.registered != nullptr ? b.registered->recv : m.recv;
  if (!report("memcpy", d.memcpy_async(b.dsend, b.send.data(), b.send.size(), b.stream))) return false;
  if (!report("memcpy", d.memcpy_async(b.drecv, b.recv.data(), b.recv.size(), b.stream))) return false;
  return device_sync(b);
}

bool device_sync(Buffers& b) {
  return !b.device || report("stream_synchronize", kolo::device::runtime().stream_synchronize(b.stream, kolo::Deadline(kolo::env_timeout_seconds())));
}

bool device_download(Buffers& b) {
  const kolo::device::DeviceOps& d = kolo::device::runtime();
  if (!report("memcpy", d.memcpy_async(b.send.data(), b.dsend, b.send.size(), b.stream))) return false;
  if (!report("memcpy", d.memcpy_async(b.recv.data(), b.drecv, b.recv.size(), b.stream))) return false;
  return device_sync(b);
}

bool device_capture_begin(Buffers& b) {
  return report("stream_begin_capture", kolo::device::runtime().stream_begin_capture(b.stream));
}

void* device_capture_end(Buffers& b) {
  void* graph = nullptr;
  return report("stream_end_capture", kolo::device::runtime().stream_end_capture(b.stream, &graph)) ? graph : nullptr;
}

bool device_graph_launch(Buffers& b, void* graph) {
  return report("graph_launch", kolo::device::runtime().graph_launch(graph, b.stream));
}

void device_graph_destroy(void* graph) { (void)kolo::device::runtime().graph_destroy(graph); }

const char* device_runtime_name() { return kolo::device::runtime().name; }

}  // namespace kolo_perf
