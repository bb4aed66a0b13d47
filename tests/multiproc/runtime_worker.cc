// kolo_runtime_worker: one rank of a multi-process test of the Horovod-style runtime
// (kolo_enqueue_*), started by kolorun. Each scenario checks results on every rank and
// exits non-zero on any failure, printing what was wrong.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/api_support.h"
#include "engine/runtime/runtime.h"
#include "kolo/kolo.h"
#include "runtime_worker.h"
#include "worker_checks.h"
#include "perf_data.h"

using kolo_perf::as_dtype;
using kolo_perf::dtype_bytes;
using kolo_perf::load_value;
using kolo_perf::store_value;

namespace runtime_worker {

using worker_checks::expect;
using worker_checks::g_checks;
using worker_checks::g_failures;
using worker_checks::g_rank;
using worker_checks::must;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

kolo::runtime::RuntimeStats stats(kolo_comm_t comm) { return comm->runtime->stats(); }

// The allocator for allgather and alltoall outputs: a std::vector<char> per request.
void* alloc_vector(void* data, size_t total, const size_t*, int) {
  auto* out = static_cast<std::vector<char>*>(data);
  out->resize(std::max<size_t>(total, 1) * 8);  // the largest element, so any dtype fits
  return out->data();
}


double value_of(int rank, size_t i, int t) { return double((i * 7 + static_cast<size_t>(rank) * 3 + t) % 11); }

void prepare(Tensor& x, int t, int step, int rank, int p) {
  // The same names every step (so steps after the first hit the cache) except allgather
  // and alltoall, whose sizes change with the step.
  x.name = "grad." + std::to_string(t);
  x.kind = t % 10;
  const kolo_dtype_t dtypes[] = {KOLO_FLOAT32, KOLO_FLOAT32, KOLO_INT32, KOLO_FLOAT64, KOLO_FLOAT32, KOLO_INT64};
  const kolo_op_t ops[] = {KOLO_SUM, KOLO_AVG, KOLO_SUM, KOLO_MAX, KOLO_SUM, KOLO_MIN};
  x.dtype = x.kind < 6 ? dtypes[x.kind] : KOLO_FLOAT32;
  x.op = x.kind < 6 ? ops[x.kind] : (x.kind == 9 ? KOLO_SUM : KOLO_SUM);
  x.count = 1 + (static_cast<size_t>(t) * 7919) % 5000;
  if (t % 50 == 3) x.count = 300000;  // a few larger than the small fusion threshold
  size_t n = x.count;
  if (x.kind == 7) n = x.count * static_cast<size_t>(rank + step + 1);  // rows differ by rank
  if (x.kind == 8) n = x.count * static_cast<size_t>(p);
  if (x.kind == 9) n = x.count * static_cast<size_t>(p);
  x.send.assign(n * dtype_bytes(x.dtype), 0);
  x.recv.assign(x.count * dtype_bytes(x.dtype), 0);
  for (size_t i = 0; i < n; ++i) store_value(x.send.data(), i, x.dtype, value_of(rank, i, t + step));
  if (x.kind == 6) x.recv = x.send;  // broadcast is in place
}

void check(Tensor& x, int t, int step, int rank, int p) {
  size_t wrong = 0;
  if (x.kind < 6) {
    for (size_t i = 0; i < x.count; ++i) {
      double expected = x.op == KOLO_MAX ? -1e300 : x.op == KOLO_MIN ? 1e300 : 0;
      for (int q = 0; q < p; ++q) {
        double v = value_of(q, i, t + step);
        expected = x.op == KOLO_MAX ? std::max(expected, v) : x.op == KOLO_MIN ? std::min(expected, v) : expected + v;
      }
      if (x.op == KOLO_AVG) expected /= p;
      // AVG of float data divides in float: one rounding away from the double reference.
      const double got = load_value(x.recv.data(), i, x.dtype), want = as_dtype(expected, x.dtype);
      wrong += x.op == KOLO_AVG ? std::fabs(got - want) > 1e-6 * std::fabs(want) : got != want;
    }
  } else if (x.kind == 6) {
    const int root = t % p;
    for (size_t i = 0; i < x.count; ++i) wrong += load_value(x.recv.data(), i, x.dtype) != value_of(root, i, t + step);
  } else if (x.kind == 7) {
    size_t at = 0;
    for (int q = 0; q < p; ++q) {
      for (size_t i = 0; i < x.count * static_cast<size_t>(q + step + 1); ++i, ++at) {
        wrong += load_value(x.out.data(), at, x.dtype) != value_of(q, i, t + step);
      }
    }
  } else if (x.kind == 8) {
    for (int q = 0; q < p; ++q) {
      for (size_t i = 0; i < x.count; ++i) {
        wrong += load_value(x.out.data(), q * x.count + i, x.dtype) != value_of(q, rank * x.count + i, t + step);
      }
    }
  } else {
    for (size_t i = 0; i < x.count; ++i) {
      double sum = 0;
      for (int q = 0; q < p; ++q) sum += value_of(q, rank * x.count + i, t + step);
      wrong += load_value(x.recv.data(), i, x.dtype) != sum;
    }
  }
  expect(wrong == 0, x.name + " (kind " + std::to_string(x.kind) + ", step " + std::to_string(step) + "): " +
                         std::to_string(wrong) + " wrong");
}

kolo_result_t enqueue(Tensor& x, int t, int p, kolo_comm_t comm) {
  kolo_enqueue_options options = KOLO_ENQUEUE_OPTIONS_INIT;
  options.alloc = alloc_vector;
  options.alloc_data = &x.out;
  switch (x.kind) {
    case 6: return kolo_enqueue_broadcast(x.name.c_str(), x.recv.data(), x.count, x.dtype, t % p, &options, comm, &x.request);
    case 7:
      return kolo_enqueue_allgather(x.name.c_str(), x.send.data(), x.send.size() / dtype_bytes(x.dtype) / x.count,
                                    x.count, x.dtype, &options, comm, &x.request);
    case 8: {
      std::vector<size_t> splits(p, x.count);
      return kolo_enqueue_alltoall(x.name.c_str(), x.send.data(), splits.data(), x.dtype, &options, comm, &x.request);
    }
    case 9:
      return kolo_enqueue_reduce_scatter(x.name.c_str(), x.send.data(), x.recv.data(), x.count, x.dtype, x.op,
                                         &options, comm, &x.request);
    default:
      return kolo_enqueue_allreduce(x.name.c_str(), x.send.data(), x.recv.data(), x.count, x.dtype, x.op, &options,
                                    comm, &x.request);
  }
}

// 200 named tensors of every kind, submitted in a different random order on every rank,
// for three steps; steps after the first are answered from the response cache.
void scenario_random_order(kolo_comm_t comm) {
  const int p = kolo_comm_size(comm), r = kolo_comm_rank(comm);
  constexpr int kTensors = 200, kSteps = 3;
  std::mt19937 rng(1234 + r);
  for (int step = 0; step < kSteps; ++step) {
    std::vector<Tensor> tensors(kTensors);
    std::vector<int> order(kTensors);
    for (int t = 0; t < kTensors; ++t) {
      order[t] = t;
      prepare(tensors[t], t, step, r, p);
    }
    std::shuffle(order.begin(), order.end(), rng);
    for (int t : order) {
      must(enqueue(tensors[t], t, p, comm), "enqueue " + tensors[t].name);
      // Some submissions trickle in, as a framework's backward pass does.
      if (t % 37 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300 * (r + 1)));
    }
    for (int t : order) {
      must(kolo_wait(tensors[t].request), "wait " + tensors[t].name);
      must(kolo_request_free(tensors[t].request), "free");
    }
    for (int t = 0; t < kTensors; ++t) check(tensors[t], t, step, r, p);
  }
  auto s = stats(comm);
  if (r == 0) {
    std::printf("rank 0: %llu cycles (%llu slow), %llu cached hits, %llu allreduces for %llu tensors\n",
                (unsigned long long)s.cycles, (unsigned long long)s.slow_cycles, (unsigned long long)s.cached_hits,
                (unsigned long long)s.collectives, (unsigned long long)s.fused_tensors);
  }
  // Allreduce, broadcast and reduce_scatter are cacheable: 140 of the 200 names, twice.
  expect(s.cached_hits >= 2 * 140, "steps 2 and 3 answered from the cache (" + std::to_string(s.cached_hits) + " hits)");
  expect(s.collectives < s.fused_tensors, "fusion packed several tensors into one allreduce");
}

// Ranks disagree on a tensor: KOLO_ERR_MISMATCH on every rank, naming it and the values;
// the runtime goes on working afterwards.
void scenario_mismatch(kolo_comm_t comm) {
  const int p = kolo_comm_size(comm), r = kolo_comm_rank(comm);
  const bool odd_one = r == p - 1;
  std::vector<float> a(100, 1.0f), b(100);
  kolo_request_t req = nullptr;
  // The count differs on the last rank (a new name: found by the coordinator).
  must(kolo_enqueue_allreduce("weights.bad", a.data(), b.data(), odd_one ? 99 : 100, KOLO_FLOAT32, KOLO_SUM, nullptr,
                              comm, &req), "enqueue");
  kolo_result_t rc = kolo_wait(req);
  std::string message = kolo_last_error();
  expect(rc == KOLO_ERR_MISMATCH, std::string("count mismatch gives KOLO_ERR_MISMATCH, got ") + kolo_result_string(rc));
  expect(contains(message, "weights.bad") && contains(message, "count") && contains(message, "100") &&
             contains(message, "99") && contains(message, "rank " + std::to_string(p - 1)),
         "the message names the tensor, the field, the values and the rank: " + message);
  must(kolo_request_free(req), "free");
  // The same name cached first, then submitted with another dtype: the cache entry is
  // invalidated everywhere and the coordinator reports the mismatch.
  for (int step = 0; step < 2; ++step) {
    const bool differ = step == 1 && odd_one;
    must(kolo_enqueue_allreduce("weights.cached", a.data(), b.data(), 100, differ ? KOLO_INT32 : KOLO_FLOAT32,
                                KOLO_SUM, nullptr, comm, &req), "enqueue cached");
    rc = kolo_wait(req);
    message = kolo_last_error();
    must(kolo_request_free(req), "free");
    if (step == 0) {
      expect(rc == KOLO_SUCCESS && b[0] == float(p), "first step of weights.cached succeeds");
    } else {
      expect(rc == KOLO_ERR_MISMATCH && contains(message, "weights.cached") && contains(message, "dtype") &&
                 contains(message, "int32") && contains(message, "float"),
             std::string("dtype mismatch after caching: ") + kolo_result_string(rc) + ": " + message);
    }
  }
  // Scales and roots are checked too.
  kolo_enqueue_options options = KOLO_ENQUEUE_OPTIONS_INIT;
  options.prescale = odd_one ? 0.5 : 1.0;
  must(kolo_enqueue_allreduce("weights.scaled", a.data(), b.data(), 100, KOLO_FLOAT32, KOLO_SUM, &options, comm, &req),
       "enqueue scaled");
  rc = kolo_wait(req);
  message = kolo_last_error();
  must(kolo_request_free(req), "free");
  expect(p == 1 || (rc == KOLO_ERR_MISMATCH && contains(message, "prescale")), "prescale mismatch: " + message);
  must(kolo_enqueue_broadcast("weights.root", b.data(), 100, KOLO_FLOAT32, odd_one ? 0 : p - 1, nullptr, comm, &req),
       "enqueue broadcast");
  rc = kolo_wait(req);
  message = kolo_last_error();
  must(kolo_request_free(req), "free");
  expect(p <= 1 || (rc == KOLO_ERR_MISMATCH && contains(message, "root")), "root mismatch: " + message);
  // Still usable.
  must(kolo_enqueue_allreduce("weights.good", a.data(), b.data(), 100, KOLO_FLOAT32, KOLO_SUM, nullptr, comm, &req),
       "enqueue good");
  must(kolo_wait(req), "wait good");
  must(kolo_request_free(req), "free");
  expect(b[0] == float(p), "the runtime works after a mismatch");
}

// The last rank never submits 'lost'; the stall inspector names it, and with a shutdown
// time every rank's pending requests fail with that report.
void scenario_stall(kolo_comm_t comm) {
  const int p = kolo_comm_size(comm), r = kolo_comm_rank(comm);
  std::vector<float> a(10, 1.0f), b(10), c(10);
  kolo_request_t ok = nullptr, pending = nullptr;
  must(kolo_enqueue_allreduce("ok", a.data(), b.data(), 10, KOLO_FLOAT32, KOLO_SUM, nullptr, comm, &ok), "ok");
  must(kolo_wait(ok), "wait ok");
  must(kolo_request_free(ok), "free");
  const char* name = r == p - 1 ? "probe" : "lost";
  must(kolo_enqueue_allreduce(name, a.data(), c.data(), 10, KOLO_FLOAT32, KOLO_SUM, nullptr, comm, &pending), name);
  auto start = std::chrono::steady_clock::now();
  kolo_result_t rc = kolo_wait(pending);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string message = kolo_last_error();
  std::printf("rank %d: '%s' returned %s after %.1f s: %s\n", r, name, kolo_result_string(rc), seconds, message.c_str());
  expect(rc == KOLO_ERR_TIMEOUT, std::string("the stalled request fails with KOLO_ERR_TIMEOUT, got ") + kolo_result_string(rc));
  const std::string missing = "not by rank " + std::to_string(p - 1);
  expect(contains(message, "tensor 'lost'") && contains(message, missing), "the report names 'lost' and " + missing);
  expect(seconds < 20, "the stall shutdown came within 20 s");
  must(kolo_request_free(pending), "free");
}

// Rank r runs r+2 steps, then joins: the others' allreduces get zeros from joined ranks.
void scenario_join(kolo_comm_t comm) {
  const int p = kolo_comm_size(comm), r = kolo_comm_rank(comm);
  constexpr int kNames = 5;
  // Tensor 2 is large (128 KB): reduced in place as its own call of the fused group, which
  // a joined rank must make too (from zeros), or the ranks' calls would differ.
  auto size_of = [](int t) { return t == 2 ? 16384 : 64; };
  for (int step = 0; step < r + 2; ++step) {
    std::vector<std::vector<double>> in(kNames), out(kNames);
    std::vector<kolo_request_t> reqs(kNames);
    for (int t = 0; t < kNames; ++t) {
      in[t].resize(size_of(t));
      out[t].resize(size_of(t));
      for (int i = 0; i < size_of(t); ++i) in[t][i] = (r + 1) * 100 + i + t;
      must(kolo_enqueue_allreduce(("join." + std::to_string(t)).c_str(), in[t].data(), out[t].data(), size_of(t),
                                  KOLO_FLOAT64, KOLO_SUM, nullptr, comm, &reqs[t]), "enqueue");
    }
    // Ranks that still take part in this step: those with r' + 2 > step.
    bool ok = true;
    for (int t = 0; t < kNames; ++t) {
      must(kolo_wait(reqs[t]), "wait");
      must(kolo_request_free(reqs[t]), "free");
      for (int i = 0; i < size_of(t); ++i) {
        double expected = 0;
        for (int q = 0; q < p; ++q) expected += q + 2 > step ? (q + 1) * 100 + i + t : 0;
        ok &= out[t][i] == expected;
      }
    }
    expect(ok, "step " + std::to_string(step) + " with joined ranks contributing zeros");
  }
  int last = -1;
  must(kolo_join(comm, &last), "join");
  expect(last == p - 1, "the last rank to join is " + std::to_string(p - 1) + ", got " + std::to_string(last));
  // The runtime goes on after a join.
  double x = 1, y = 0;
  kolo_request_t req = nullptr;
  must(kolo_enqueue_allreduce("after.join", &x, &y, 1, KOLO_FLOAT64, KOLO_SUM, nullptr, comm, &req), "after join");
  must(kolo_wait(req), "wait after join");
  must(kolo_request_free(req), "free");
  expect(y == p, "allreduce after join");
}

// Communicators from kolo_comm_split have their own runtimes: the same names on both halves
// and on the world at once, each with its own members' sum.
void scenario_split(kolo_comm_t comm) {
  const int r = kolo_comm_rank(comm), p = kolo_comm_size(comm);
  kolo_comm_t half = nullptr;
  must(kolo_comm_split(comm, r % 2, r, &half), "split");
  float mine = float(r + 1), in_half = 0, in_world = 0;
  kolo_request_t a = nullptr, b = nullptr;
  must(kolo_enqueue_allreduce("shared.name", &mine, &in_half, 1, KOLO_FLOAT32, KOLO_SUM, nullptr, half, &a), "half");
  must(kolo_enqueue_allreduce("shared.name", &mine, &in_world, 1, KOLO_FLOAT32, KOLO_SUM, nullptr, comm, &b), "world");
  must(kolo_wait(a), "wait half");
  must(kolo_wait(b), "wait world");
  must(kolo_request_free(a), "free");
  must(kolo_request_free(b), "free");
  float half_sum = 0;
  for (int q = r % 2; q < p; q += 2) half_sum += float(q + 1);
  expect(in_half == half_sum, "sum over the half communicator");
  expect(in_world == float(p * (p + 1) / 2), "sum over the world");
  must(kolo_comm_destroy(half), "destroy half");
}

// Every event has the fields of the trace-event format; the phases of a fused allreduce
// and the cycle marks are there.
// With `wire`, some allreduces ran compressed: their codec spans (WIRE_ENCODE,
// WIRE_DECODE) lie inside an ALLREDUCE span of the same row, which names the wire type.
void validate_timeline(const std::string& path, bool wire = false) {
  std::ifstream in(path);
  expect(in.good(), "timeline file " + path + " exists");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    expect(false, "timeline " + path + " is valid JSON: " + e.what());
    return;
  }
  expect(doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array(), "traceEvents array");
  std::vector<std::string> seen;
  bool fields = true;
  for (const auto& e : doc["traceEvents"]) {
    const std::string ph = e.value("ph", "");
    fields &= e.contains("name") && e["name"].is_string() && e.contains("pid") && e["pid"].is_number_integer() &&
              e.contains("tid") && e["tid"].is_number_integer() && (ph == "X" || ph == "i" || ph == "M");
    if (ph == "X") fields &= e.contains("ts") && e["ts"].is_number() && e.contains("dur") && e["dur"].get<double>() >= 0;
    if (ph == "i") fields &= e.contains("ts") && e["ts"].is_number();
    if (ph == "M") fields &= e.contains("args") && e["args"].is_object();
    seen.push_back(e["name"].get<std::string>());
  }
  expect(fields, "every event of " + path + " has the trace-event fields");
  // Each collective span carries its number in the flight recorder, never falling.
  int64_t last_seq = 0;
  bool rising = true, numbered = false;
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("name", "") != "ALLREDUCE" || !e.contains("args")) continue;
    const int64_t seq = e["args"].value("seq", int64_t{0});
    numbered = true;
    rising &= seq > 0 && seq >= last_seq;  // the tensors of one fused call share its number
    last_seq = seq;
  }
  expect(numbered && rising, "the ALLREDUCE spans of " + path + " carry rising flight-recorder numbers (seq)");
  for (const char* phase : {"NEGOTIATE_ALLREDUCE", "QUEUE", "MEMCPY_IN_FUSION_BUFFER", "ALLREDUCE", "MEMCPY_OUT_FUSION_BUFFER",
                            "CYCLE_START"}) {
    expect(std::find(seen.begin(), seen.end(), phase) != seen.end(), std::string("timeline has ") + phase);
  }
  if (!wire) return;
  int codec_spans = 0, nested = 0, named = 0;
  for (const auto& e : doc["traceEvents"]) {
    const std::string name = e.value("name", "");
    if (name == "ALLREDUCE" && e.contains("args") && e["args"].value("wire", "") == "half") ++named;
    if (name != "WIRE_ENCODE" && name != "WIRE_DECODE") continue;
    ++codec_spans;
    const double ts = e["ts"].get<double>(), end = ts + e["dur"].get<double>();
    for (const auto& a : doc["traceEvents"]) {
      if (a.value("name", "") != "ALLREDUCE" || a["tid"] != e["tid"]) continue;
      const double a_ts = a["ts"].get<double>(), a_end = a_ts + a["dur"].get<double>();
      if (a_ts <= ts + 0.01 && end <= a_end + 0.01) {
        ++nested;
        break;
      }
    }
  }
  expect(codec_spans > 0 && std::find(seen.begin(), seen.end(), "WIRE_ENCODE") != seen.end() &&
             std::find(seen.begin(), seen.end(), "WIRE_DECODE") != seen.end(),
         "timeline has WIRE_ENCODE and WIRE_DECODE");
  expect(nested == codec_spans, "every codec span lies inside an ALLREDUCE span (" + std::to_string(nested) + " of " +
                                    std::to_string(codec_spans) + ")");
  expect(named > 0, "the compressed ALLREDUCE spans name their wire type");
}

void run_steps(kolo_comm_t comm, int steps, const std::string& prefix, kolo_dtype_t wire = KOLO_DTYPE_COUNT) {
  std::vector<std::vector<float>> data(20, std::vector<float>(1000, 1.0f));
  kolo_enqueue_options options = KOLO_ENQUEUE_OPTIONS_INIT;
  options.wire_dtype = wire;
  for (int step = 0; step < steps; ++step) {
    std::vector<kolo_request_t> reqs(data.size());
    for (size_t t = 0; t < data.size(); ++t) {
      must(kolo_enqueue_allreduce((prefix + std::to_string(t)).c_str(), data[t].data(), data[t].data(), 1000,
                                  KOLO_FLOAT32, KOLO_AVG, &options, comm, &reqs[t]), "enqueue");
    }
    for (kolo_request_t req : reqs) {
      must(kolo_wait(req), "wait");
      must(kolo_request_free(req), "free");
    }
  }
}

// KOLO_TIMELINE (set by the test) on rank 0, plus kolo_timeline_start/stop on every rank.
void scenario_timeline(kolo_comm_t comm) {
  const int r = kolo_comm_rank(comm);
  run_steps(comm, 3, "tl.");
  const std::string own = std::string(std::getenv("KOLO_TIMELINE")) + ".rank" + std::to_string(r);
  must(kolo_timeline_start(comm, own.c_str()), "timeline start");
  run_steps(comm, 3, "tl2.");
  run_steps(comm, 2, "tl3.", KOLO_FLOAT16);
  must(kolo_timeline_stop(comm), "timeline stop");
  validate_timeline(own, true);
}

// Completion callbacks run before kolo_wait returns, once per request.
int g_callbacks = 0;
void count_callback(kolo_request_t, kolo_result_t result, void* data) {
  if (result == KOLO_SUCCESS) ++*static_cast<int*>(data);
}

void scenario_callbacks(kolo_comm_t comm) {
  const int p = kolo_comm_size(comm);
  std::vector<float> a(32, 2.0f), b(32), c(32);
  kolo_enqueue_options options = KOLO_ENQUEUE_OPTIONS_INIT;
  options.callback = count_callback;
  options.callback_data = &g_callbacks;
  options.prescale = 0.5;
  options.postscale = 3.0;
  const void* sends[] = {a.data(), a.data()};
  void* recvs[] = {b.data(), c.data()};
  const size_t counts[] = {32, 16};
  kolo_request_t req = nullptr;
  must(kolo_enqueue_allreduce_group("grouped", 2, sends, recvs, counts, KOLO_FLOAT32, KOLO_SUM, &options, comm, &req),
       "group");
  must(kolo_wait(req), "wait group");
  expect(g_callbacks == 1, "the callback ran once before kolo_wait returned");
  expect(kolo_test(req) == KOLO_SUCCESS, "kolo_test after completion");
  expect(b[31] == 3.0f * p && c[15] == 3.0f * p && c[16] == 0.0f, "grouped allreduce with prescale and postscale");
  must(kolo_request_free(req), "free");
}

// Rank 0 submits a step's names all at once, so after each cycle it holds the later ones,
// while every other rank submits one at a time, each once the previous completed (a peer
// whose backward pass runs behind). Each later name then needs rank 0's background thread:
// a thread that sleeps to its next tick (KOLO_CYCLE_TIME, long in this test) adds about
// half a tick per name; rank 0's thread waits inside the next cycle instead
// (engine/runtime/pacing.h), so a step costs a few small allreduces. The bound is a tenth
// of a tick per name: seconds, where the steps take milliseconds on an idle machine and
// would pass with cycles of 70 ms on a loaded one. The ranks agree on the time after each
// step, so a tick-bound runtime fails at the bound instead of running out its ticks.
void scenario_cycle_wake(kolo_comm_t comm) {
  const int p = kolo_comm_size(comm), r = kolo_comm_rank(comm);
  constexpr int kNames = 4, kSteps = 50;
  const char* cycle_ms = std::getenv("KOLO_CYCLE_TIME");
  const double tick = (cycle_ms != nullptr ? std::atof(cycle_ms) : 1.0) / 1e3;
  expect(tick >= 0.1, "the test runs with KOLO_CYCLE_TIME >= 100 (ms), so that a tick-bound cycle shows");
  auto step = [&](int s) {
    std::vector<float> in(kNames, float(r + 1)), out(kNames, 0.0f);
    std::vector<kolo_request_t> reqs(kNames);
    for (int t = 0; t < kNames; ++t) {
      must(kolo_enqueue_allreduce(("wake." + std::to_string(t)).c_str(), &in[t], &out[t], 1, KOLO_FLOAT32, KOLO_SUM,
                                  nullptr, comm, &reqs[t]), "enqueue");
      if (r != 0) must(kolo_wait(reqs[t]), "wait");
    }
    for (kolo_request_t req : reqs) {
      must(kolo_wait(req), "wait");
      must(kolo_request_free(req), "free");
    }
    bool ok = true;
    for (float v : out) ok &= v == float(p * (p + 1) / 2);
    expect(ok, "step " + std::to_string(s) + " sums");
  };
  step(-1);  // fills the response cache
  const double bound = 0.1 * kSteps * (kNames - 1) * tick;
  const auto start = std::chrono::steady_clock::now();
  double seconds = 0;
  int steps = 0;
  while (steps < kSteps && seconds < bound) {
    step(steps++);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    must(kolo_allreduce(&seconds, &seconds, 1, KOLO_FLOAT64, KOLO_MAX, comm, nullptr), "agree on the time");
  }
  auto st = stats(comm);
  std::printf("rank %d: %d cached steps of %d names in %.3f s (bound %.2f s, cycle time %.0f ms): %llu cycles, "
              "%llu entered at once\n", r, steps, kNames, seconds, bound, tick * 1e3, (unsigned long long)st.cycles,
              (unsigned long long)st.early_cycles);
  expect(steps == kSteps && seconds < bound, "the cached steps did not wait for the background thread's tick");
  expect(r != 0 || st.early_cycles > 0, "rank 0's thread entered cycles at once while holding requests");
}

}  // namespace runtime_worker

using namespace runtime_worker;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: kolo_runtime_worker random_order|mismatch|stall|join|split|timeline|callbacks|cycle_wake|\n"
                 "       device_random_order|wire|adasum\n");
    return 2;
  }
  std::string scenario = argv[1];
  // KOLO_TEST_HOSTS=k: the ranks as k emulated hosts (KOLO_HOSTID), before kolo_init.
  const char* hosts = std::getenv("KOLO_TEST_HOSTS");
  const char* rank = std::getenv("KOLO_RANK");
  const char* size = std::getenv("KOLO_SIZE");
  if (hosts != nullptr && rank != nullptr && size != nullptr && std::atoi(size) > 0) {
    const int host = std::atoi(rank) * std::atoi(hosts) / std::atoi(size);
    setenv("KOLO_HOSTID", ("emulated-host-" + std::to_string(host)).c_str(), 1);
  }
  kolo_comm_t comm = nullptr;
  must(kolo_init(&comm), "kolo_init");
  g_rank = kolo_comm_rank(comm);
  if (scenario == "random_order") scenario_random_order(comm);
  else if (scenario == "mismatch") scenario_mismatch(comm);
  else if (scenario == "stall") scenario_stall(comm);
  else if (scenario == "join") scenario_join(comm);
  else if (scenario == "split") scenario_split(comm);
  else if (scenario == "timeline") scenario_timeline(comm);
  else if (scenario == "callbacks") scenario_callbacks(comm);
  else if (scenario == "cycle_wake") scenario_cycle_wake(comm);
  else if (scenario == "device_random_order") scenario_device_random_order(comm);
  else if (scenario == "wire") scenario_wire(comm);
  else if (scenario == "adasum") scenario_adasum(comm);
  else {
    std::fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
    return 2;
  }
  must(kolo_comm_destroy(comm), "destroy");
  // The KOLO_TIMELINE file is complete once rank 0's runtime has stopped.
  if (scenario == "timeline" && g_rank == 0) validate_timeline(std::getenv("KOLO_TIMELINE"));
  if (g_rank == 0 || g_failures > 0) {
    std::printf("rank %d: %s: %d checks, %d failed\n", g_rank, scenario.c_str(), g_checks.load(), g_failures.load());
  }
  return g_failures > 0 ? 1 : 0;
}
