// kolo-runtime-bench: allreduces the 161 gradient tensors of ResNet-50 (shapes in
// data/resnet50_gradients.tsv) through the runtime, as a training step hands them over
// (reverse registration order, as autograd produces them), and compares in one run:
//   fused      the runtime with KOLO_FUSION_THRESHOLD (default 128 MB)
//   unfused    the runtime with KOLO_FUSION_THRESHOLD=0 (one allreduce per tensor)
//   single     one kolo_allreduce of the same total bytes (the bound fusion aims at)
//   cached     161 one-element tensors: a step whose cost is the runtime's own
//   cycle      one cached one-element tensor per step against one direct allreduce of it:
//              the difference is the runtime's per-cycle overhead (wake the background
//              thread, negotiate, complete, wake the waiter)
// Each mode runs on its own communicator (kolo_comm_split), so each gets a fresh runtime
// with its own settings. Usage: kolorun -np N kolo-runtime-bench [steps] [timeline.json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "api/api_support.h"
#include "engine/runtime/runtime.h"
#include "kolo/kolo.h"
#include "support/env.h"

namespace {

struct Grad {
  std::string name;
  size_t count;
};

std::vector<Grad> read_shapes(const char* path) {
  std::ifstream in(path);
  std::vector<Grad> grads;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name, shape;
    size_t count = 0;
    if (fields >> name >> shape >> count) grads.push_back({name, count});
  }
  return grads;
}

void must(kolo_result_t rc, const char* what) {
  if (rc == KOLO_SUCCESS) return;
  std::fprintf(stderr, "%s: %s: %s\n", what, kolo_result_string(rc), kolo_last_error());
  std::exit(1);
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One training step's allreduces through the runtime: enqueue in backward order, wait all.
struct StepTime {
  double seconds = 0;
  double enqueue_seconds = 0;  // of it, in the enqueue calls (the caller's own cost)
};

StepTime runtime_step(kolo_comm_t comm, const std::vector<Grad>& grads, std::vector<std::vector<float>>& data) {
  const double t0 = now();
  std::vector<kolo_request_t> reqs(grads.size());
  for (size_t i = grads.size(); i-- > 0;) {
    must(kolo_enqueue_allreduce(grads[i].name.c_str(), data[i].data(), data[i].data(), grads[i].count, KOLO_FLOAT32,
                                KOLO_AVG, nullptr, comm, &reqs[i]), "enqueue");
  }
  const double t1 = now();
  for (kolo_request_t r : reqs) {
    must(kolo_wait(r), "wait");
    must(kolo_request_free(r), "free");
  }
  return {now() - t0, t1 - t0};
}

struct ModeResult {
  StepTime median;  // of the step times, and of the enqueue times
  kolo::runtime::RuntimeStats stats;
  int steps = 0;  // including the warm-up steps, as the stats count them
};

// Median step time over `steps` after two warm-up steps (which fill the response cache).
ModeResult run_mode(kolo_comm_t world, const char* threshold, const std::vector<Grad>& grads, int steps,
                    const char* timeline) {
  setenv("KOLO_FUSION_THRESHOLD", threshold, 1);
  kolo_comm_t comm = nullptr;
  must(kolo_comm_split(world, 0, kolo_comm_rank(world), &comm), "split");
  std::vector<std::vector<float>> data;
  for (const Grad& g : grads) data.emplace_back(g.count, 1.0f);
  std::vector<double> times, enqueue_times;
  for (int s = 0; s < steps + 2; ++s) {
    // Rank 0 writes the timeline (one file: the ranks run the same cycles).
    if (s == steps + 1 && timeline != nullptr && kolo_comm_rank(comm) == 0) {
      must(kolo_timeline_start(comm, timeline), "timeline");
    }
    StepTime t = runtime_step(comm, grads, data);
    if (s < 2) continue;
    times.push_back(t.seconds);
    enqueue_times.push_back(t.enqueue_seconds);
  }
  if (timeline != nullptr) must(kolo_timeline_stop(comm), "timeline stop");
  ModeResult result{{median(times), median(enqueue_times)}, comm->runtime->stats(), steps + 2};
  must(kolo_comm_destroy(comm), "destroy");
  return result;
}

// Median latency of `steps` one-element steps after ten warm-up steps: through the runtime
// (one cached name per step: one cycle each) when runtime is set, else direct allreduces.
double one_element_step(kolo_comm_t comm, bool runtime, int steps) {
  const float in = 1.0f;  // out of place: the values stay finite however many steps run
  float out = 0.0f;
  std::vector<double> times;
  for (int s = 0; s < steps + 10; ++s) {
    const double t0 = now();
    if (runtime) {
      kolo_request_t req = nullptr;
      must(kolo_enqueue_allreduce("cycle", &in, &out, 1, KOLO_FLOAT32, KOLO_SUM, nullptr, comm, &req), "enqueue");
      must(kolo_wait(req), "wait");
      must(kolo_request_free(req), "free");
    } else {
      must(kolo_allreduce(&in, &out, 1, KOLO_FLOAT32, KOLO_SUM, comm, nullptr), "allreduce");
    }
    if (s >= 10) times.push_back(now() - t0);
  }
  return median(times);
}

// The per-cycle overhead with every name cached, on a fresh runtime of its own.
void cycle_overhead(kolo_comm_t world, int steps, double* through_runtime, double* direct) {
  kolo_comm_t comm = nullptr;
  must(kolo_comm_split(world, 0, kolo_comm_rank(world), &comm), "split");
  *through_runtime = one_element_step(comm, true, steps);
  *direct = one_element_step(world, false, steps);
  must(kolo_comm_destroy(comm), "destroy");
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 10;
  const char* timeline = argc > 2 ? argv[2] : nullptr;
  std::vector<Grad> grads = read_shapes(KOLO_RESNET50_TSV);
  kolo_comm_t world = nullptr;
  must(kolo_init(&world), "kolo_init");
  const int rank = kolo_comm_rank(world), size = kolo_comm_size(world);
  size_t total = 0;
  for (const Grad& g : grads) total += g.count;

  const std::string fused_threshold = kolo::env_string("KOLO_FUSION_THRESHOLD");
  const ModeResult fused = run_mode(world, fused_threshold.c_str(), grads, steps, timeline);
  const ModeResult unfused = run_mode(world, "0", grads, steps, nullptr);
  std::vector<float> all(total, 1.0f);
  std::vector<double> times;
  for (int s = 0; s < steps + 2; ++s) {
    const double t0 = now();
    must(kolo_allreduce(all.data(), all.data(), total, KOLO_FLOAT32, KOLO_AVG, world, nullptr), "allreduce");
    if (s >= 2) times.push_back(now() - t0);
  }
  const double single = median(times);
  // The runtime's own cost: the same 161 names with one element each, all from the cache.
  std::vector<Grad> tiny = grads;
  for (Grad& g : tiny) g.count = 1;
  const ModeResult tiny_run = run_mode(world, fused_threshold.c_str(), tiny, steps * 5, nullptr);
  std::vector<float> small(tiny.size(), 1.0f);
  times.clear();
  for (int s = 0; s < steps * 5; ++s) {
    const double t0 = now();
    must(kolo_allreduce(small.data(), small.data(), small.size(), KOLO_FLOAT32, KOLO_SUM, world, nullptr),
         "small allreduce");
    times.push_back(now() - t0);
  }
  const double tiny_single = median(times);
  double cycle_step = 0, cycle_direct = 0;
  cycle_overhead(world, steps * 50, &cycle_step, &cycle_direct);

  if (rank == 0) {
    std::printf("# ResNet-50 gradients: %zu tensors, %zu float32 elements (%.1f MB), %d ranks, median of %d steps\n",
                grads.size(), total, total * 4 / 1e6, size, steps);
    std::printf("%-34s %10s %8s\n", "mode", "ms/step", "ratio");
    std::printf("%-34s %10.2f %8.2f\n", "single allreduce (same bytes)", single * 1e3, 1.0);
    std::printf("%-34s %10.2f %8.2f   (threshold %s B)\n", "runtime, fused", fused.median.seconds * 1e3,
                fused.median.seconds / single, fused_threshold.c_str());
    std::printf("%-34s %10.2f %8.2f\n", "runtime, unfused (threshold 0)", unfused.median.seconds * 1e3,
                unfused.median.seconds / single);
    const kolo::runtime::RuntimeStats& fs = fused.stats;
    std::printf("# fused run: %llu cycles (%llu entered at once), %llu slow, %llu cache hits, %llu allreduces for "
                "%llu tensors\n", (unsigned long long)fs.cycles, (unsigned long long)fs.early_cycles,
                (unsigned long long)fs.slow_cycles, (unsigned long long)fs.cached_hits,
                (unsigned long long)fs.collectives, (unsigned long long)fs.fused_tensors);
    const kolo::runtime::RuntimeStats& ts = tiny_run.stats;
    std::printf("# all names cached, 161 one-element tensors: %.1f us/step through the runtime (%.1f us of it in the "
                "enqueue calls, %.1f cycles/step) vs %.1f us for one 161-element allreduce\n",
                tiny_run.median.seconds * 1e6, tiny_run.median.enqueue_seconds * 1e6,
                double(ts.cached_cycles) / tiny_run.steps, tiny_single * 1e6);
    if (ts.cached_cycles > 0) {
      // From this rank's entry to agreement: it includes waiting for peers still submitting.
      std::printf("# negotiation of a cycle answered by the cache alone: %.1f us (mean of %llu cycles; from entering "
                  "the cycle, so with any wait for the peers' requests)\n",
                  ts.cached_cycle_seconds / ts.cached_cycles * 1e6, (unsigned long long)ts.cached_cycles);
    }
    std::printf("# per-cycle overhead, every name cached: %.1f us (one cached one-element tensor per step: %.1f us "
                "through the runtime vs %.1f us for one direct allreduce, median of %d steps)\n",
                (cycle_step - cycle_direct) * 1e6, cycle_step * 1e6, cycle_direct * 1e6, steps * 50);
  }
  must(kolo_comm_destroy(world), "destroy");
  return 0;
}
