// The soak: random collectives on every rank alike (one seed, broadcast from rank 0), each
// checked bit for bit against what it must give (kolo-perf's fill and check functions,
// whose values make every sum exact): random collective, dtype, op, count (1 element to
// 1 MB, odd ones too), root, in place or not, host or (under KOLO_DEVICE) device buffers,
// on the world or on a communicator split from it for a while, and named operations of the
// runtime in between. Any wrong result or error prints the seed and the iteration that
// reproduce it:  kolorun -np 4 kolo_soak <iterations> <seed>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kolo/kolo.h"
#include "perf_collectives.h"
#include "perf_data.h"

namespace {

using kolo_perf::Buffers;
using kolo_perf::Case;
using kolo_perf::Collective;

[[noreturn]] void fail(uint64_t seed, long iteration, int rank, const std::string& what) {
  std::printf("soak: FAIL rank %d, iteration %ld (reproduce: kolo_soak %ld %llu): %s\n", rank, iteration, iteration + 1,
              static_cast<unsigned long long>(seed), what.c_str());
  std::fflush(stdout);
  std::exit(1);
}

// A named allreduce through the runtime, checked: every rank contributes rank + i.
void runtime_allreduce(kolo_comm_t comm, long it, uint64_t seed, size_t n) {
  const int rank = kolo_comm_rank(comm), size = kolo_comm_size(comm);
  std::vector<double> in(n), out(n, -1);
  for (size_t i = 0; i < n; ++i) in[i] = static_cast<double>(rank + i % 7);
  kolo_request_t req = nullptr;
  const std::string name = "soak." + std::to_string(it);
  if (kolo_enqueue_allreduce(name.c_str(), in.data(), out.data(), n, KOLO_FLOAT64, KOLO_SUM, nullptr, comm, &req) !=
          KOLO_SUCCESS ||
      kolo_wait(req) != KOLO_SUCCESS) {
    fail(seed, it, rank, std::string("runtime allreduce: ") + kolo_last_error());
  }
  kolo_request_free(req);
  for (size_t i = 0; i < n; ++i) {
    const double want = static_cast<double>(size) * (size - 1) / 2 + static_cast<double>(size) * (i % 7);
    if (out[i] != want) fail(seed, it, rank, "runtime allreduce: element " + std::to_string(i) + " wrong");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const long iterations = argc > 1 ? std::atol(argv[1]) : 1000;
  kolo_comm_t world = nullptr;
  if (kolo_init(&world) != KOLO_SUCCESS) {
    std::fprintf(stderr, "soak: kolo_init: %s\n", kolo_last_error());
    return 2;
  }
  const int wrank = kolo_comm_rank(world);
  uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : std::random_device{}();
  if (kolo_broadcast(&seed, &seed, 1, KOLO_UINT64, 0, world, nullptr) != KOLO_SUCCESS) return 2;
  const bool device = std::getenv("KOLO_DEVICE") != nullptr && std::string(std::getenv("KOLO_DEVICE")) != "none";
  if (device && !kolo_perf::device_select(kolo_comm_local_rank(world))) return 2;
  std::mt19937_64 rng(seed);  // the same stream on every rank: every rank picks the same call
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  const std::vector<std::string> names = kolo_perf::collective_names();
  kolo_comm_t split = nullptr;
  long split_until = -1;
  long calls = 0, splits = 0, runtime_calls = 0;
  for (long it = 0; it < iterations; ++it) {
    // Now and then a communicator split from the world (ranks by parity, or a random
    // half) serves the next calls; then it is destroyed.
    if (split == nullptr && pick(100) == 0) {
      const int salt = static_cast<int>(pick(1000));
      const int color = (wrank + salt) % 2;
      if (kolo_comm_split(world, color, wrank, &split) != KOLO_SUCCESS) fail(seed, it, wrank, kolo_last_error());
      split_until = it + 20 + static_cast<long>(pick(40));
      ++splits;
    }
    kolo_comm_t comm = split != nullptr ? split : world;
    if (pick(20) == 0) {
      runtime_allreduce(comm, it, seed, 1 + pick(5000));
      ++runtime_calls;
    } else {
      const Collective& coll = *kolo_perf::find_collective(names[pick(names.size())]);
      Case c;
      c.dtype = static_cast<kolo_dtype_t>(pick(KOLO_DTYPE_COUNT));
      c.op = coll.reduces ? static_cast<kolo_op_t>(pick(kolo_perf::kElementwiseOps)) : KOLO_SUM;
      c.rank = kolo_comm_rank(comm);
      c.nranks = kolo_comm_size(comm);
      c.root = static_cast<int>(pick(static_cast<size_t>(c.nranks)));
      const bool in_place = pick(2) == 0;
      // Sizes spread over 1 byte .. 1 MB, odd ones included.
      const size_t bytes = size_t{1} << pick(21);
      size_t count = std::max<size_t>(1, coll.count_for(bytes + pick(bytes), c));
      Buffers b;
      coll.prepare(b, count, c, in_place);
      if (device && !kolo_perf::device_upload(b)) fail(seed, it, wrank, "device upload");
      const kolo_result_t rc = coll.call(b, count, c, in_place, comm);
      const std::string what = std::string(coll.name) + " of " + std::to_string(count) + " " +
                               kolo_perf::dtype_label(c.dtype) + " " + kolo_perf::op_label(c.op) + " root " +
                               std::to_string(c.root) + (in_place ? " in place" : "") + " on " +
                               std::to_string(c.nranks) + " ranks" + (device ? ", device" : "");
      if (rc != KOLO_SUCCESS) fail(seed, it, wrank, what + ": " + kolo_last_error());
      if (device && !kolo_perf::device_download(b)) fail(seed, it, wrank, what + ": device download");
      const size_t wrong = coll.check(b, count, c, in_place);
      if (wrong != 0) fail(seed, it, wrank, what + ": " + std::to_string(wrong) + " wrong elements");
      ++calls;
    }
    if (split != nullptr && it >= split_until) {
      if (kolo_comm_destroy(split) != KOLO_SUCCESS) fail(seed, it, wrank, kolo_last_error());
      split = nullptr;
    }
  }
  if (split != nullptr) kolo_comm_destroy(split);
  if (wrank == 0) {
    std::printf("soak: %ld iterations passed (seed %llu): %ld collectives, %ld runtime allreduces, %ld splits%s\n",
                iterations, static_cast<unsigned long long>(seed), calls, runtime_calls, splits,
                device ? ", device buffers" : "");
  }
  kolo_comm_destroy(world);
  return 0;
}
