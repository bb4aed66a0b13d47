// kolo_test_worker: one rank of a multi-process test, started by kolorun exactly as users
// start their programs. Each scenario checks results on every rank and exits non-zero on
// any failure, printing what was wrong.
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "adasum_scenarios.h"
#include "device_scenarios.h"
#include "one_host_scenarios.h"
#include "kolo/kolo.h"
#include "worker_checks.h"
#include "perf_collectives.h"
#include "perf_data.h"
#include "support/device/device.h"

using namespace kolo_perf;

namespace {

using worker_checks::expect;
using worker_checks::g_checks;
using worker_checks::g_failures;
using worker_checks::g_rank;
using worker_checks::must;

std::string describe(const char* coll, const Case& c, size_t count, bool in_place) {
  return std::string(coll) + " " + dtype_label(c.dtype) + " " + op_label(c.op) + " count " + std::to_string(count) +
         (in_place ? " in-place" : " out-of-place") + " root " + std::to_string(c.root);
}

// Every collective x dtype x op x in-place x count (x two roots for rooted ones). With
// `device`, the buffers are device memory (KOLO_DEVICE=emulated in CI) and the calls are
// enqueued on a stream; the results are read back after the stream is done.
// Each collective once or twice, float sums, small and odd counts, in place and not, the
// first and last roots: the scale tests' check at many ranks, where the whole cross
// product of "quick" would take minutes.
void scenario_every_collective(kolo_comm_t comm) {
  const int p = kolo_comm_size(comm);
  for (const std::string& name : collective_names()) {
    const Collective& coll = *find_collective(name);
    std::vector<int> roots{0};
    if (coll.rooted && p > 1) roots.push_back(p - 1);
    for (int root : roots) {
      for (size_t count : {size_t{1}, size_t{1007}}) {
        for (bool in_place : {false, true}) {
          Case c{KOLO_FLOAT32, KOLO_SUM, root, kolo_comm_rank(comm), p};
          Buffers b;
          coll.prepare(b, count, c, in_place);
          must(coll.call(b, count, c, in_place, comm), describe(coll.name, c, count, in_place));
          size_t wrong = coll.check(b, count, c, in_place);
          expect(wrong == 0, describe(coll.name, c, count, in_place) + ": " + std::to_string(wrong) + " wrong");
        }
      }
    }
  }
}

void scenario_collectives(kolo_comm_t comm, bool quick, bool device = false) {
  const int p = kolo_comm_size(comm);
  std::vector<size_t> counts{0, 1, 7, 1000};
  if (!quick) counts.push_back((size_t{1} << 20) + 3);
  for (const std::string& name : collective_names()) {
    const Collective& coll = *find_collective(name);
    std::vector<int> roots{0};
    if (coll.rooted && p > 1) roots.push_back(p - 1);
    for (int d = 0; d < KOLO_DTYPE_COUNT; ++d) {
      std::vector<kolo_op_t> ops{KOLO_SUM};
      if (coll.reduces) ops = {KOLO_SUM, KOLO_PROD, KOLO_MIN, KOLO_MAX, KOLO_AVG};
      for (kolo_op_t op : ops) {
        for (int root : roots) {
          for (size_t count : counts) {
            // The large count runs every dtype with sum and every op with float: the
            // rest of the cross product adds time, not coverage.
            if (count > 1000 && op != KOLO_SUM && d != KOLO_FLOAT32) continue;
            for (bool in_place : {false, true}) {
              Case c{static_cast<kolo_dtype_t>(d), op, root, kolo_comm_rank(comm), p};
              Buffers b;
              coll.prepare(b, count, c, in_place);
              if (device) expect(device_upload(b), "device upload");
              must(coll.call(b, count, c, in_place, comm), describe(coll.name, c, count, in_place));
              if (device) expect(device_download(b), "device download");
              size_t wrong = coll.check(b, count, c, in_place);
              expect(wrong == 0, describe(coll.name, c, count, in_place) + ": " + std::to_string(wrong) + " wrong");
            }
          }
        }
      }
    }
  }
  if (device) return;
  // Repeated calls on the same buffers (plans come from the cache).
  std::vector<float> data(4099);
  for (int iter = 0; iter < 50; ++iter) {
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>((i + iter) % 3);
    must(kolo_allreduce(data.data(), data.data(), data.size(), KOLO_FLOAT32, KOLO_SUM, comm, nullptr), "repeat");
    bool ok = true;
    for (size_t i = 0; i < data.size(); ++i) ok &= data[i] == static_cast<float>(((i + iter) % 3) * p);
    expect(ok, "repeated allreduce iteration " + std::to_string(iter));
  }
}

void scenario_options(kolo_comm_t comm) {
  const int p = kolo_comm_size(comm);
  const int r = kolo_comm_rank(comm);
  for (kolo_dtype_t dtype : {KOLO_FLOAT32, KOLO_FLOAT64, KOLO_FLOAT16, KOLO_BFLOAT16}) {
    for (size_t count : {size_t{1}, size_t{13}, size_t{100000}}) {
      for (bool in_place : {false, true}) {
        std::vector<char> send(count * dtype_bytes(dtype)), recv(send.size());
        for (size_t i = 0; i < count; ++i) store_value(send.data(), i, dtype, double((i + r) % 4));
        if (in_place) recv = send;
        kolo_coll_options options = KOLO_COLL_OPTIONS_INIT;
        options.prescale = 0.5;
        options.postscale = 4.0;
        must(kolo_allreduce_ex(in_place ? recv.data() : send.data(), recv.data(), count, dtype, KOLO_SUM, &options,
                               comm, nullptr), "allreduce_ex");
        size_t wrong = 0;
        for (size_t i = 0; i < count; ++i) {
          double sum = 0;
          for (int q = 0; q < p; ++q) sum += double((i + q) % 4);
          if (load_value(recv.data(), i, dtype) != as_dtype(sum * 2.0, dtype)) ++wrong;
        }
        expect(wrong == 0, std::string("allreduce_ex prescale 0.5 postscale 4 ") + dtype_label(dtype) + " count " +
                               std::to_string(count) + ": " + std::to_string(wrong) + " wrong");
      }
    }
  }
  // Compression on the wire runs where every rank is on one host (the shared-memory path
  // for host buffers); elsewhere (tcp, several hosts) it is refused on every rank alike, and
  // the communicator stays usable.
  if (p > 1) {
    std::vector<float> a(64, 1.0f), b(64);
    kolo_coll_options options = KOLO_COLL_OPTIONS_INIT;
    options.wire_dtype = KOLO_FLOAT16;
    const kolo_result_t rc = kolo_allreduce_ex(a.data(), b.data(), 64, KOLO_FLOAT32, KOLO_SUM, &options, comm, nullptr);
    if (rc == KOLO_SUCCESS) {
      expect(b[0] == static_cast<float>(p) && b[63] == static_cast<float>(p), "compressed host allreduce");
    } else {
      expect(rc == KOLO_ERR_UNSUPPORTED && std::strstr(kolo_last_error(), "one host") != nullptr,
             std::string("compressed host allreduce refused: ") + kolo_last_error());
    }
    must(kolo_allreduce(a.data(), b.data(), 64, KOLO_FLOAT32, KOLO_SUM, comm, nullptr), "allreduce after refusal");
    expect(b[63] == static_cast<float>(p), "allreduce after a refused compressed one");
  }
  // Integer AVG truncates toward zero, for negative sums too.
  std::vector<int32_t> mine(64), out(64);
  for (int i = 0; i < 64; ++i) mine[i] = (i % 2 ? -1 : 1) * (i + r);
  must(kolo_allreduce(mine.data(), out.data(), 64, KOLO_INT32, KOLO_AVG, comm, nullptr), "int avg");
  bool ok = true;
  for (int i = 0; i < 64; ++i) {
    long long sum = 0;
    for (int q = 0; q < p; ++q) sum += (i % 2 ? -1 : 1) * (i + q);
    ok &= out[i] == static_cast<int32_t>(sum / p);
  }
  expect(ok, "int32 AVG truncates toward zero");
  // Forcing each algorithm gives the same answer.
  for (int algo : {KOLO_ALGO_RING, KOLO_ALGO_DIRECT}) {
    std::vector<float> a(777), b(777);
    for (int i = 0; i < 777; ++i) a[i] = float((i * 7 + r) % 9);
    kolo_coll_options options = KOLO_COLL_OPTIONS_INIT;
    options.algorithm = algo;
    must(kolo_allreduce_ex(a.data(), b.data(), 777, KOLO_FLOAT32, KOLO_MAX, &options, comm, nullptr), "forced algo");
    bool same = true;
    for (int i = 0; i < 777; ++i) {
      float m = 0;
      for (int q = 0; q < p; ++q) m = std::fmax(m, float((i * 7 + q) % 9));
      same &= b[i] == m;
    }
    expect(same, "forced algorithm " + std::to_string(algo));
  }
}

void allreduce_check(kolo_comm_t comm, const std::string& what) {
  const int p = kolo_comm_size(comm);
  const int r = kolo_comm_rank(comm);
  std::vector<int64_t> v(1001, r), out(1001);
  must(kolo_allreduce(v.data(), out.data(), v.size(), KOLO_INT64, KOLO_SUM, comm, nullptr), what);
  expect(out[0] == int64_t(p) * (p - 1) / 2 && out[1000] == out[0], what + ": wrong sum");
}

void scenario_split(kolo_comm_t world) {
  const int p = kolo_comm_size(world);
  const int r = kolo_comm_rank(world);
  kolo_comm_t half = nullptr;
  must(kolo_comm_split(world, r % 2, -r, &half), "split by parity");
  const int members = (p - r % 2 + 1) / 2;
  expect(kolo_comm_size(half) == members, "split size");
  // key = -rank: ranks come in reverse order.
  int position = 0;
  for (int q = r + 2; q < p; q += 2) ++position;
  expect(kolo_comm_rank(half) == position, "split rank order by key");
  kolo_comm_t none = reinterpret_cast<kolo_comm_t>(1);
  must(kolo_comm_split(world, r == 0 ? -1 : 0, 0, &none), "split with color -1");
  expect((r == 0) == (none == nullptr), "color -1 gives NULL");
  // Communicators used alternately, repeatedly.
  for (int i = 0; i < 5; ++i) {
    allreduce_check(half, "half allreduce");
    allreduce_check(world, "world allreduce");
    if (none != nullptr) allreduce_check(none, "rest allreduce");
  }
  // Concurrent communicators: each thread drives its own communicator.
  kolo_comm_t dup = nullptr;
  must(kolo_comm_split(world, 0, r, &dup), "dup");
  std::thread other([&] {
    for (int i = 0; i < 20; ++i) allreduce_check(dup, "concurrent dup allreduce");
  });
  for (int i = 0; i < 20; ++i) allreduce_check(half, "concurrent half allreduce");
  other.join();
  must(kolo_comm_destroy(dup), "destroy dup");
  if (none != nullptr) must(kolo_comm_destroy(none), "destroy rest");
  must(kolo_comm_destroy(half), "destroy half");
  expect(kolo_allreduce(nullptr, nullptr, 0, KOLO_FLOAT32, KOLO_SUM, half, nullptr) == KOLO_ERR_INVALID_USAGE,
         "destroyed communicator is refused");
}

void scenario_p2p(kolo_comm_t comm) {
  const int p = kolo_comm_size(comm);
  const int r = kolo_comm_rank(comm);
  if (p < 2) {  // no peer to talk to: a send to one that does not exist is refused
    double x = 0;
    expect(kolo_send(&x, 1, KOLO_FLOAT64, 1, comm, nullptr) == KOLO_ERR_INVALID_ARGUMENT,
           "a send to rank 1 of 1 refused");
    return;
  }
  // Blocking pairs: rank 2k sends to 2k+1, which answers.
  std::vector<double> buf(70001);
  int partner = r % 2 == 0 ? r + 1 : r - 1;
  if (partner < p) {
    for (int round = 0; round < 3; ++round) {
      if (r % 2 == 0) {
        for (size_t i = 0; i < buf.size(); ++i) buf[i] = r * 1000.0 + i + round;
        must(kolo_send(buf.data(), buf.size(), KOLO_FLOAT64, partner, comm, nullptr), "send");
        must(kolo_recv(buf.data(), buf.size(), KOLO_FLOAT64, partner, comm, nullptr), "recv answer");
        expect(buf[5] == partner * 1000.0 + 5 + round, "answer from partner");
      } else {
        must(kolo_recv(buf.data(), buf.size(), KOLO_FLOAT64, partner, comm, nullptr), "recv");
        expect(buf[7] == partner * 1000.0 + 7 + round, "data from partner");
        for (size_t i = 0; i < buf.size(); ++i) buf[i] = r * 1000.0 + i + round;
        must(kolo_send(buf.data(), buf.size(), KOLO_FLOAT64, partner, comm, nullptr), "send answer");
      }
    }
  }
  // A group: everyone exchanges with everyone at once.
  std::vector<std::vector<int32_t>> out(p), in(p);
  kolo_group_start();
  for (int q = 0; q < p; ++q) {
    if (q == r) continue;
    out[q].assign(1000 + q, r * 100 + q);
    in[q].assign(1000 + r, -1);
    must(kolo_send(out[q].data(), out[q].size(), KOLO_INT32, q, comm, nullptr), "group send");
    must(kolo_recv(in[q].data(), in[q].size(), KOLO_INT32, q, comm, nullptr), "group recv");
  }
  must(kolo_group_end(), "group end");
  for (int q = 0; q < p; ++q) {
    if (q != r) expect(in[q].back() == q * 100 + r, "group exchange from " + std::to_string(q));
  }
  for (int i = 0; i < 20; ++i) must(kolo_barrier(comm), "barrier");
}

void scenario_arguments(kolo_comm_t comm) {
  const int p = kolo_comm_size(comm);
  float x = 0;
  auto says = [](kolo_result_t rc, kolo_result_t want, const char* text) {
    return rc == want && std::strstr(kolo_last_error(), text) != nullptr;
  };
  expect(says(kolo_broadcast(&x, &x, 1, KOLO_FLOAT32, p + 2, comm, nullptr), KOLO_ERR_INVALID_ARGUMENT, "root"),
         "root out of range");
  expect(says(kolo_send(&x, 1, KOLO_FLOAT32, -1, comm, nullptr), KOLO_ERR_INVALID_ARGUMENT, "peer = -1"),
         "peer out of range");
  expect(says(kolo_allreduce(&x, &x, 1, static_cast<kolo_dtype_t>(99), KOLO_SUM, comm, nullptr),
              KOLO_ERR_INVALID_ARGUMENT, "dtype = 99"), "dtype out of range");
  expect(says(kolo_allreduce(nullptr, &x, 1, KOLO_FLOAT32, KOLO_SUM, comm, nullptr), KOLO_ERR_INVALID_ARGUMENT, "send"),
         "null send");
  // The communicator still works after refused calls.
  allreduce_check(comm, "after argument errors");
}

// kolo_get_unique_id on rank 0 (it hosts a second store), the id broadcast over the world,
// then kolo_comm_init_rank on every rank: the NCCL-style way to make a communicator.
void scenario_unique_id(kolo_comm_t world) {
  const int p = kolo_comm_size(world);
  const int r = kolo_comm_rank(world);
  kolo_unique_id id{};
  if (r == 0) must(kolo_get_unique_id(&id), "get unique id");
  must(kolo_broadcast(&id, &id, sizeof(id), KOLO_UINT8, 0, world, nullptr), "broadcast id");
  for (int round = 0; round < 2; ++round) {
    kolo_comm_t comm = nullptr;
    // Reversed ranks: the communicator's rank 0 is not the process that made the id.
    must(kolo_comm_init_rank(&comm, p, &id, p - 1 - r), "comm_init_rank");
    expect(kolo_comm_rank(comm) == p - 1 - r, "rank from comm_init_rank");
    allreduce_check(comm, "allreduce on a unique-id communicator");
    must(kolo_comm_destroy(comm), "destroy");
    if (r == 0) must(kolo_get_unique_id(&id), "second unique id");
    must(kolo_broadcast(&id, &id, sizeof(id), KOLO_UINT8, 0, world, nullptr), "broadcast second id");
  }
  kolo_unique_id bad{};
  kolo_comm_t comm = nullptr;
  expect(kolo_comm_init_rank(&comm, p, &bad, r) == KOLO_ERR_INVALID_ARGUMENT, "a zeroed id is refused");
}

// kolo_comm_abort from another thread while a large allreduce runs: this rank's call
// returns KOLO_ERR_ABORTED, and the others see the failure instead of hanging.
int scenario_abort(kolo_comm_t comm) {
  const int r = kolo_comm_rank(comm);
  const size_t count = size_t{16} << 20;
  std::vector<float> a(count, 1.0f), b(count);
  std::thread aborter;
  if (r == 0) {
    aborter = std::thread([comm] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      kolo_comm_abort(comm);
    });
  }
  kolo_result_t rc = KOLO_SUCCESS;
  for (int i = 0; i < 10000 && rc == KOLO_SUCCESS; ++i) {
    rc = kolo_allreduce(a.data(), b.data(), count, KOLO_FLOAT32, KOLO_SUM, comm, nullptr);
  }
  if (aborter.joinable()) aborter.join();
  std::printf("rank %d: allreduce returned %s: %s\n", r, kolo_result_string(rc), kolo_last_error());
  expect(rc != KOLO_SUCCESS, "an error after the abort");
  if (r == 0) expect(rc == KOLO_ERR_ABORTED, "the aborting rank sees KOLO_ERR_ABORTED");
  return 0;
}

// One rank exits in the middle of a large allreduce; the others must get an error, fast.
// Rank 1 dies `after_ms` into a loop of allreduces of `count` floats (die() must not
// return); the others must get an error, and a later call must fail too.
int allreduce_until_a_peer_dies(kolo_comm_t comm, size_t count, int after_ms, void (*die)()) {
  const int r = kolo_comm_rank(comm);
  std::vector<float> a(count, 1.0f), b(count);
  if (r == 1) {
    std::thread killer([after_ms, die] {
      std::this_thread::sleep_for(std::chrono::milliseconds(after_ms));
      die();
    });
    killer.detach();
  }
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) {
    kolo_result_t rc = kolo_allreduce(a.data(), b.data(), count, KOLO_FLOAT32, KOLO_SUM, comm, nullptr);
    if (rc != KOLO_SUCCESS) {
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("rank %d: allreduce failed as expected after %.2f s with %s: %s\n", r, seconds,
                  kolo_result_string(rc), kolo_last_error());
      kolo_result_t again = kolo_allreduce(a.data(), b.data(), 1, KOLO_FLOAT32, KOLO_SUM, comm, nullptr);
      std::printf("rank %d: a later call returns %s\n", r, kolo_result_string(again));
      return again != KOLO_SUCCESS ? 0 : 1;
    }
  }
  std::printf("rank %d: no error seen\n", r);
  return 1;
}

// Rank 1 exits in the middle of a 128 MB allreduce.
int scenario_fault(kolo_comm_t comm) {
  return allreduce_until_a_peer_dies(comm, size_t{32} << 20, 150, [] {
    std::fprintf(stderr, "rank 1: exiting in the middle of an allreduce\n");
    std::fflush(stderr);
    _exit(7);
  });
}

// A rank killed with SIGKILL (no chance to clean up) in the middle of a 256 MB allreduce.
int scenario_kill(kolo_comm_t comm) {
  return allreduce_until_a_peer_dies(comm, size_t{64} << 20, 300, [] {
    std::fprintf(stderr, "rank 1: killing itself in the middle of an allreduce\n");
    std::fflush(stderr);
    ::kill(::getpid(), SIGKILL);
    std::this_thread::sleep_for(std::chrono::seconds(60));
  });
}

// The ranks disagree on the count: every rank must get KOLO_ERR_MISMATCH (or, where the
// disagreeing rank failed first, an error naming a failed peer), never a hang or wrong data.
// A broadcast root runs ahead (a broadcast waits for no one) while the last rank sleeps:
// 1000 broadcasts of 1 MB queue up for it. Its memory must stay bounded (flow control:
// the links leave what it cannot take yet in the socket), and every value must arrive.
void scenario_runs_ahead(kolo_comm_t comm) {
  const int r = kolo_comm_rank(comm), p = kolo_comm_size(comm);
  const size_t count = size_t{1} << 18, calls = 1000;
  std::vector<float> buf(count);
  if (r == p - 1) std::this_thread::sleep_for(std::chrono::seconds(3));
  size_t wrong = 0;
  for (size_t i = 0; i < calls; ++i) {
    if (r == 0) std::fill(buf.begin(), buf.end(), static_cast<float>(i));
    must(kolo_broadcast(buf.data(), buf.data(), count, KOLO_FLOAT32, 0, comm, nullptr), "broadcast");
    wrong += buf[0] != static_cast<float>(i) || buf[count - 1] != static_cast<float>(i);
  }
  expect(wrong == 0, "every broadcast delivered its own values");
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const long peak_mb = usage.ru_maxrss / 1024;
  std::printf("rank %d: peak resident memory %ld MB after %zu broadcasts of %zu MB\n", r, peak_mb, calls,
              count * 4 >> 20);
  expect(peak_mb < 400, "memory bounded while the root ran ahead: " + std::to_string(peak_mb) + " MB");
}

int scenario_mismatch(kolo_comm_t comm) {
  const int r = kolo_comm_rank(comm), n = kolo_comm_size(comm);
  std::vector<float> a(1000, 1.0f), b(1000);
  const size_t count = r == n - 1 ? 999 : 1000;
  kolo_result_t rc = kolo_allreduce(a.data(), b.data(), count, KOLO_FLOAT32, KOLO_SUM, comm, nullptr);
  std::printf("rank %d: mismatched allreduce returned %s: %s\n", r, kolo_result_string(rc), kolo_last_error());
  return rc == KOLO_ERR_MISMATCH || rc == KOLO_ERR_REMOTE ? 0 : 1;
}

// Allreduce and reduce of float sums over the sizes where one-shot and two-shot trade
// places (1 KB to 8 MB), in and out of place.
void scenario_reduction_sizes(kolo_comm_t comm) {
  const int p = kolo_comm_size(comm);
  for (const char* name : {"allreduce", "reduce"}) {
    const Collective& coll = *find_collective(name);
    for (size_t count = 256; count <= (size_t{2} << 20); count = count * 2 + 17) {
      for (bool in_place : {false, true}) {
        Case c{KOLO_FLOAT32, KOLO_SUM, p - 1, kolo_comm_rank(comm), p};
        Buffers b;
        coll.prepare(b, count, c, in_place);
        must(coll.call(b, count, c, in_place, comm), describe(coll.name, c, count, in_place));
        size_t wrong = coll.check(b, count, c, in_place);
        expect(wrong == 0, describe(coll.name, c, count, in_place) + ": " + std::to_string(wrong) + " wrong");
      }
    }
  }
}

// Many in-place allreduces of mixed sizes (direct and ring) in one group run as one
// combined schedule, as a framework's gradient bucket would.
int scenario_group(kolo_comm_t comm) {
  const int r = kolo_comm_rank(comm), n = kolo_comm_size(comm);
  const size_t calls = 64;
  std::vector<std::vector<float>> data(calls);
  for (size_t c = 0; c < calls; ++c) {
    data[c].resize((size_t{1} << (c % 12 * 2)) + c);  // 1 .. 4M elements, odd counts too
    for (size_t i = 0; i < data[c].size(); ++i) data[c][i] = static_cast<float>((i + c + r) % 7);
  }
  must(kolo_group_start(), "group_start");
  for (size_t c = 0; c < calls; ++c) {
    must(kolo_allreduce(data[c].data(), data[c].data(), data[c].size(), KOLO_FLOAT32, KOLO_SUM, comm, nullptr),
         "allreduce");
  }
  must(kolo_group_end(), "group_end");
  for (size_t c = 0; c < calls; ++c) {
    size_t wrong = 0;
    for (size_t i = 0; i < data[c].size(); ++i) {
      float expected = 0;
      for (int q = 0; q < n; ++q) expected += static_cast<float>((i + c + q) % 7);
      wrong += data[c][i] != expected;
    }
    expect(wrong == 0, "group allreduce " + std::to_string(c) + ": " + std::to_string(wrong) + " wrong");
  }
  return 0;
}

// Test set-ups that need a different environment per rank (kolorun gives all ranks the
// same): KOLO_TEST_TCP_RANKS=1,3 puts those ranks on KOLO_TRANSPORTS=tcp (mixed
// transports); KOLO_TEST_HOSTS=k splits the ranks into k emulated hosts (KOLO_HOSTID);
// KOLO_TEST_ONE_CPU_RANKS=0 pins those ranks to one CPU.
void per_rank_environment() {
  const char* rank_text = std::getenv("KOLO_RANK");
  const char* size_text = std::getenv("KOLO_SIZE");
  if (rank_text == nullptr) return;
  const int rank = std::atoi(rank_text), size = size_text != nullptr ? std::atoi(size_text) : 1;
  if (const char* tcp = std::getenv("KOLO_TEST_TCP_RANKS")) {
    std::string list = std::string(",") + tcp + ",";
    if (list.find("," + std::to_string(rank) + ",") != std::string::npos) setenv("KOLO_TRANSPORTS", "tcp", 1);
  }
  // KOLO_TEST_ONE_CPU_RANKS=0: those ranks may run on one CPU only (uneven binding, as
  // some launchers do); every rank must still choose the same one-host algorithm.
  if (const char* pinned = std::getenv("KOLO_TEST_ONE_CPU_RANKS")) {
    std::string list = std::string(",") + pinned + ",";
    cpu_set_t set;
    if (list.find("," + std::to_string(rank) + ",") != std::string::npos &&
        sched_getaffinity(0, sizeof(set), &set) == 0) {
      for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (!CPU_ISSET(cpu, &set)) continue;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(0, sizeof(set), &set);
        break;
      }
    }
  }
  if (const char* hosts = std::getenv("KOLO_TEST_HOSTS")) {
    const int k = std::atoi(hosts);
    if (k > 0 && size > 0) setenv("KOLO_HOSTID", ("emulated-host-" + std::to_string(rank * k / size)).c_str(), 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: kolo_test_worker collectives|quick|options|split|p2p|arguments|unique_id|fault|abort|kill|mismatch\n");
    return 2;
  }
  std::string scenario = argv[1];
  per_rank_environment();
  // Failures of kolo_init itself name the launcher's rank, not rank 0 on every rank.
  if (const char* launched_as = std::getenv("KOLO_RANK")) g_rank = std::atoi(launched_as);
  kolo_comm_t comm = nullptr;
  must(kolo_init(&comm), "kolo_init");
  g_rank = kolo_comm_rank(comm);
  int rc = 0;
  if (scenario == "collectives") scenario_collectives(comm, false);
  else if (scenario == "device_collectives") {
    scenario_collectives(comm, true, true);
    device_scenarios::device_compressed(comm);
    device_scenarios::device_registered(comm);
    device_scenarios::device_group(comm);
  }
  else if (scenario == "device_stream") device_scenarios::device_stream(comm);
  else if (scenario == "device_kill") rc = device_scenarios::device_kill(comm);
  else if (scenario == "device_big_group") device_scenarios::device_big_group(comm);
  else if (scenario == "device_shared_buffers") device_scenarios::device_shared_buffers(comm);
  else if (scenario == "quick") scenario_collectives(comm, true);
  else if (scenario == "every_collective") scenario_every_collective(comm);
  else if (scenario == "options") scenario_options(comm);
  else if (scenario == "split") scenario_split(comm);
  else if (scenario == "p2p") scenario_p2p(comm);
  else if (scenario == "arguments") scenario_arguments(comm);
  else if (scenario == "unique_id") scenario_unique_id(comm);
  else if (scenario == "fault") rc = scenario_fault(comm);
  else if (scenario == "abort") rc = scenario_abort(comm);
  else if (scenario == "kill") rc = scenario_kill(comm);
  else if (scenario == "group") rc = scenario_group(comm);
  else if (scenario == "reduction_sizes") scenario_reduction_sizes(comm);
  else if (scenario == "mismatch") rc = scenario_mismatch(comm);
  else if (scenario == "runs_ahead") scenario_runs_ahead(comm);
  else if (scenario == "mismatch_paths") rc = one_host_scenarios::mismatch_paths(comm);
  else if (scenario == "mismatch_on_lane") rc = one_host_scenarios::mismatch_on_lane(comm);
  else if (scenario == "mismatch_wire") rc = one_host_scenarios::mismatch_wire(comm);
  else if (scenario == "mismatch_root_runs_on") rc = one_host_scenarios::mismatch_root_runs_on(comm);
  else if (scenario == "compressed") one_host_scenarios::compressed(comm);
  else if (scenario == "compressed_scatter_gather") one_host_scenarios::compressed_scatter_gather(comm);
  else if (scenario == "compressed_special_values") one_host_scenarios::compressed_special_values(comm);
  else if (scenario == "adasum") adasum_scenarios::adasum(comm);
  else if (scenario == "small_messages") one_host_scenarios::small_messages(comm);
  else if (scenario == "small_lane") one_host_scenarios::small_lane(comm);
  else {
    std::fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
    return 2;
  }
  if (scenario != "fault" && scenario != "kill" && scenario != "mismatch" && scenario != "mismatch_paths" &&
      scenario != "mismatch_on_lane" && scenario != "mismatch_wire" && scenario != "mismatch_root_runs_on" && scenario != "device_kill")
    must(kolo_comm_destroy(comm), "destroy");
  if (g_rank == 0 || g_failures > 0) {
    std::printf("rank %d: %s: %d checks, %d failed\n", g_rank, scenario.c_str(), g_checks.load(), g_failures.load());
  }
  // A scenario that passes by checking must have checked something on every rank (those
  // that judge themselves return their own code).
  const bool own_verdict = scenario == "fault" || scenario == "abort" || scenario == "kill" || scenario == "group" ||
                           scenario == "mismatch" || scenario == "mismatch_paths" || scenario == "mismatch_on_lane" ||
                           scenario == "mismatch_wire" ||
                           scenario == "mismatch_root_runs_on" || scenario == "device_kill";
  if (!own_verdict && g_checks == 0) {
    std::printf("rank %d: %s: FAIL: no check ran\n", g_rank, scenario.c_str());
    return 1;
  }
  return g_failures > 0 ? 1 : rc;
}
