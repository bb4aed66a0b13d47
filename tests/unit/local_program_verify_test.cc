// One-host programs (engine/local/: staging slots in shared memory, counters instead of
// messages) through the verifier and the simulator: hand-built programs that follow
// ChunkPipeline (engine/local/chunk_pipeline.h), broken ones the verifier must reject by
// name, the simulation against the closed-form one-host model, and (once the recording
// ops policy is in the tree) every recorded one-host collective.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "engine/planner/cost_model.h"
#include "engine/planner/local_model.h"
#include "engine/planner/simulate.h"
#include "engine/schedules/schedule.h"
#include "engine/planner/plan.h"
#include "engine/verifier/verifier.h"
#include "program_test_util.h"

#if __has_include("engine/local/local_program.h")
#include "engine/local/local_program.h"
#define KOLO_TEST_RECORDED_PROGRAMS 1
#endif

namespace kolo {
namespace {

constexpr int kPosted = 0, kReduced = 1, kConsumed = 2;

// One rank's program, step after step (each depends on the one before, as recorded ones do).
struct Program {
  Schedule s;
  Program(uint32_t slots, size_t slot_bytes) {
    s.algorithms = {Algorithm::kOneShot};  // hand-built
    s.slots = slots;
    s.slot_bytes = slot_bytes;
  }
  void add(Step st) {
    if (!s.steps.empty()) st.deps = {static_cast<int>(s.steps.size()) - 1};
    s.steps.push_back(std::move(st));
  }
  void copy(Slice src, Slice dst, DType dtype, ScaleUse scale = ScaleUse::kNone) {
    Step st;
    st.kind = StepKind::kCopy;
    st.srcs = {src};
    st.dst = dst;
    st.dtype = dtype;
    st.count = dst.bytes / dtype_size(dtype);
    st.scale = scale;
    add(st);
  }
  void reduce(std::vector<Slice> srcs, Slice dst, DType dtype, ScaleUse scale) {
    Step st;
    st.kind = StepKind::kReduce;
    st.srcs = std::move(srcs);
    st.dst = dst;
    st.dtype = dtype;
    st.count = dst.bytes / dtype_size(dtype);
    st.scale = scale;
    add(st);
  }
  void signal(int counter, uint64_t value) {
    Step st;
    st.kind = StepKind::kSignal;
    st.counter = counter;
    st.value = value;
    add(st);
  }
  void wait(int peer, int counter, uint64_t value) {
    Step st;
    st.kind = StepKind::kWait;
    st.peer = peer;
    st.counter = counter;
    st.value = value;
    add(st);
  }
};

// What to leave out of a hand-built allreduce.
struct Faults {
  bool no_posted_wait = false;    // reduce the peers' slots without waiting for their posts
  bool no_consumed_wait = false;  // refill a slot without waiting until every rank read it
};

// Slice `index` of `elems` split `parts` ways on 64-byte units (as the executor's two-shot).
std::pair<size_t, size_t> slice_of(size_t elems, int parts, int index, size_t es) {
  const size_t unit = std::max<size_t>(1, 64 / es);
  const size_t units = (elems + unit - 1) / unit;
  const size_t base = units / parts, extra = units % parts;
  const size_t first = index * base + std::min<size_t>(index, extra);
  const size_t offset = std::min(elems, first * unit);
  const size_t end = std::min(elems, (first + base + (static_cast<size_t>(index) < extra ? 1 : 0)) * unit);
  return {offset, end - offset};
}

// Every rank's one-shot or two-shot allreduce of `count` elements, as ChunkPipeline runs it:
// fill chunk i+1 before reducing chunk i, a slot reused only once every rank consumed it.
std::vector<Schedule> hand_allreduce(int p, size_t count, DType dtype, bool two_shot, uint32_t slots,
                                     size_t slot_bytes, Faults faults = {}) {
  const size_t es = dtype_size(dtype), chunk_elems = slot_bytes / es;
  const size_t chunks = (count + chunk_elems - 1) / chunk_elems;
  auto elems = [&](size_t i) { return std::min(chunk_elems, count - i * chunk_elems); };
  auto slot = [&](int owner, size_t i, size_t elem, size_t n) {
    return Slice{kBufStaging, ((owner * slots + i % slots) * slot_bytes) + elem * es, n * es};
  };
  auto buf = [&](int buffer, size_t i, size_t elem, size_t n) {
    return Slice{buffer, (i * chunk_elems + elem) * es, n * es};
  };
  std::vector<Schedule> out;
  for (int me = 0; me < p; ++me) {
    Program g(slots, slot_bytes);
    auto fill = [&](size_t i) {
      if (i >= slots && !faults.no_consumed_wait) g.wait(-1, kConsumed, i - slots + 1);
      g.copy(buf(kBufInput, i, 0, elems(i)), slot(me, i, 0, elems(i)), dtype, ScaleUse::kPre);
      g.signal(kPosted, i + 1);
    };
    auto finish = [&](size_t i) {
      g.wait(-1, kReduced, i + 1);
      for (int q = 0; q < p; ++q) {
        auto [off, n] = slice_of(elems(i), p, q, es);
        if (n > 0) g.copy(slot(q, i, off, n), buf(kBufOutput, i, off, n), dtype);
      }
      g.signal(kConsumed, i + 1);
    };
    fill(0);
    for (size_t i = 0; i < chunks; ++i) {
      if (i + 1 < chunks) fill(i + 1);
      if (!faults.no_posted_wait) g.wait(-1, kPosted, i + 1);
      if (!two_shot) {
        std::vector<Slice> srcs;
        for (int q = 0; q < p; ++q) srcs.push_back(slot(q, i, 0, elems(i)));
        g.reduce(srcs, buf(kBufOutput, i, 0, elems(i)), dtype, ScaleUse::kPost);
        g.signal(kConsumed, i + 1);
        continue;
      }
      auto [off, n] = slice_of(elems(i), p, me, es);
      std::vector<Slice> srcs;
      for (int q = 0; q < p; ++q) srcs.push_back(slot(q, i, off, n));
      if (n > 0) g.reduce(srcs, slot(me, i, off, n), dtype, ScaleUse::kPost);
      g.signal(kReduced, i + 1);
      if (i >= 1) finish(i - 1);
    }
    if (two_shot) finish(chunks - 1);
    out.push_back(g.s);
  }
  return out;
}

CollSpec allreduce_spec(size_t count, DType dtype = DType::kFloat32) {
  CollSpec spec;
  spec.kind = CollKind::kAllreduce;
  spec.count = count;
  spec.dtype = dtype;
  spec.prescaled = true;
  spec.postscaled = true;
  return spec;
}

// 8 B .. 64 MB: one chunk, a few, and many more chunks than slots.
constexpr size_t kSizes[] = {8,        64,        1 << 10,   8 << 10,   64 << 10,  256 << 10, 1 << 20,
                             2 << 20,  4 << 20,   8 << 20,   16 << 20,  32 << 20,  64 << 20};

bool contains(const Status& st, const std::string& what) { return st.message().find(what) != std::string::npos; }

TEST(LocalProgramVerify, OneShotTwoRanksPasses) {
  // fill my slot, post, wait for the peer's post, reduce both slots into the output, consumed.
  Status st = verify_schedules(allreduce_spec(16), hand_allreduce(2, 16, DType::kFloat32, false, 4, 64));
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST(LocalProgramVerify, HandBuiltAllreducesPass) {
  for (bool two_shot : {false, true}) {
    for (int p = 1; p <= 5; ++p) {
      for (size_t count : {size_t{1}, size_t{7}, size_t{16}, size_t{33}, size_t{200}}) {
        for (uint32_t slots : {2u, 3u, 4u}) {
          if (two_shot && slots < 3) continue;  // PipelineNeedsEnoughSlots
          for (bool in_place : {false, true}) {
            CollSpec spec = allreduce_spec(count, DType::kFloat64);
            spec.in_place = in_place;
            Status st = verify_schedules(spec, hand_allreduce(p, count, DType::kFloat64, two_shot, slots, 64));
            EXPECT_TRUE(st.ok()) << "two_shot=" << two_shot << " p=" << p << " count=" << count << " slots=" << slots
                                 << " in_place=" << in_place << ": " << st.message();
          }
        }
      }
    }
  }
}

// ChunkPipeline fills chunk i+1 before it finishes chunk i: one-shot needs two slots and
// two-shot three (its chunk i is consumed only after chunk i+1 is reduced), which is why
// the shm domain refuses fewer than three. The verifier proves it.
TEST(LocalProgramVerify, PipelineNeedsEnoughSlots) {
  CollSpec spec = allreduce_spec(64);  // 4 chunks of 64 bytes
  Status st = verify_schedules(spec, hand_allreduce(2, 64, DType::kFloat32, false, 1, 64));
  EXPECT_TRUE(contains(st, "deadlock") && contains(st, "consumed >= 1")) << st.message();
  // Alone, nothing holds the rank back: chunk 1 overwrites chunk 0 before it is reduced.
  st = verify_schedules(spec, hand_allreduce(1, 64, DType::kFloat32, false, 1, 64));
  EXPECT_TRUE(contains(st, "output element 0 holds element 16")) << st.message();
  st = verify_schedules(spec, hand_allreduce(2, 64, DType::kFloat32, true, 2, 64));
  EXPECT_TRUE(contains(st, "deadlock") && contains(st, "consumed >= 1")) << st.message();
  EXPECT_TRUE(verify_schedules(spec, hand_allreduce(2, 64, DType::kFloat32, false, 2, 64)).ok());
  EXPECT_TRUE(verify_schedules(spec, hand_allreduce(2, 64, DType::kFloat32, true, 3, 64)).ok());
}

TEST(LocalProgramVerify, MissingPostedWaitFails) {
  for (bool two_shot : {false, true}) {
    Faults f;
    f.no_posted_wait = true;
    Status st = verify_schedules(allreduce_spec(16), hand_allreduce(2, 16, DType::kFloat32, two_shot, 4, 64, f));
    ASSERT_FALSE(st.ok());
    EXPECT_TRUE(contains(st, "race") || contains(st, "nothing wrote")) << st.message();
    EXPECT_TRUE(contains(st, "staging")) << st.message();
  }
}

TEST(LocalProgramVerify, SlotReusedBeforeConsumedIsARace) {
  for (bool two_shot : {false, true}) {
    Faults f;
    f.no_consumed_wait = true;
    // 64 elements of 4 bytes in 64-byte slots: 4 chunks through 3 slots.
    Status st = verify_schedules(allreduce_spec(64), hand_allreduce(2, 64, DType::kFloat32, two_shot, 3, 64, f));
    ASSERT_FALSE(st.ok());
    EXPECT_TRUE(contains(st, "race on byte")) << st.message();
    EXPECT_TRUE(contains(st, "no wait orders them")) << st.message();
    // Enough slots for every chunk: nothing is reused, so nothing needs the wait.
    st = verify_schedules(allreduce_spec(64), hand_allreduce(2, 64, DType::kFloat32, two_shot, 4, 64, f));
    EXPECT_TRUE(st.ok()) << st.message();
  }
}

TEST(LocalProgramVerify, DeadlockNamesRanksStepsAndCounters) {
  std::vector<Schedule> s = hand_allreduce(2, 4, DType::kFloat32, false, 4, 64);
  for (Schedule& sch : s) {
    // Before the reduce: wait for a counter nobody signals.
    Program g(sch.slots, sch.slot_bytes);
    for (const Step& st : sch.steps) {
      if (st.kind == StepKind::kReduce) g.wait(-1, kReduced, 1);
      g.add(st);
    }
    sch = g.s;
  }
  Status st = verify_schedules(allreduce_spec(4), s);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(contains(st, "deadlock")) << st.message();
  EXPECT_TRUE(contains(st, "rank 0 step 3 (wait for every rank's reduced >= 1: rank 1's reduced stays at 0)")) << st.message();
  EXPECT_TRUE(contains(st, "rank 1 step 3")) << st.message();
}

TEST(LocalProgramVerify, StructureErrorsAreNamed) {
  auto broken = [](auto edit) {
    std::vector<Schedule> s = hand_allreduce(2, 16, DType::kFloat32, false, 4, 64);
    edit(s);
    return verify_schedules(allreduce_spec(16), s);
  };
  auto step_of = [](Schedule& s, StepKind kind) -> Step& {
    for (Step& st : s.steps) {
      if (st.kind == kind) return st;
    }
    return s.steps[0];
  };
  Status st = broken([&](auto& s) { step_of(s[1], StepKind::kWait).peer = 1; });
  EXPECT_TRUE(contains(st, "rank 1, step 2") && contains(st, "waits for rank 1")) << st.message();
  st = broken([&](auto& s) { step_of(s[0], StepKind::kSignal).counter = kProgramCounters; });
  EXPECT_TRUE(contains(st, str_cat("names counter ", kProgramCounters))) << st.message();
  st = broken([&](auto& s) { s[0].steps[2].deps.clear(); });
  EXPECT_TRUE(contains(st, "run in order")) << st.message();
  st = broken([&](auto& s) { s[0].steps[0].dst.offset = 2 * 4 * 64 - 32; });  // past the last slot
  EXPECT_TRUE(contains(st, "outside the staging of 512 bytes")) << st.message();
  st = broken([&](auto& s) { s[0].steps[0].dst.offset = 40; });  // across a slot's end
  EXPECT_TRUE(contains(st, "runs past the end of its slot")) << st.message();
  st = broken([&](auto& s) { s[0].steps[0].dst.offset = 2; });
  EXPECT_TRUE(contains(st, "not aligned to 4-byte elements")) << st.message();
  st = broken([&](auto& s) { s[1].slots = 2; });
  EXPECT_TRUE(contains(st, "rank 1 has 2 staging slots")) << st.message();
  st = broken([&](auto& s) {
    Step back = step_of(s[0], StepKind::kSignal);
    back.value = 0;
    back.deps = {static_cast<int>(s[0].steps.size()) - 1};
    s[0].steps.push_back(back);
  });
  EXPECT_TRUE(contains(st, "sets posted back from 1 to 0")) << st.message();
  // An ordinary schedule (no staging, no counters) is unaffected by the one-host rules.
  CollSpec spec = allreduce_spec(16);
  spec.algorithm = Algorithm::kRing;
  EXPECT_TRUE(verify_collective(spec, 3, 64).ok());
}

TEST(LocalProgramVerify, WrongResultIsNamed) {
  // Two-shot where rank 1 copies rank 0's slice out of its own slot instead of rank 0's.
  std::vector<Schedule> s = hand_allreduce(2, 32, DType::kFloat32, true, 4, 64);
  for (Step& st : s[1].steps) {
    if (st.kind == StepKind::kCopy && st.srcs[0].buffer == kBufStaging && st.srcs[0].offset == 0) {
      st.srcs[0].offset = 4 * 64;
    }
  }
  Status st = verify_schedules(allreduce_spec(32), s);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(contains(st, "output element 0 holds")) << st.message();
}

// The simulation of a hand-built program against the closed-form model (local_model.h),
// with a core per rank and the default slot.
TEST(LocalProgramVerify, SimulationAgreesWithTheOneHostModel) {
  const PlannerParams& params = planner_params();
  const size_t slot = static_cast<size_t>(params.shm_chunk_bytes);
  double worst = 0;
  for (bool two_shot : {false, true}) {
    for (int p = 2; p <= 4; ++p) {
      PlanContext ctx;
      ctx.size = p;
      CostModel model(ctx);
      for (size_t bytes : kSizes) {
        const size_t count = bytes / 4;
        Result<double> sim = simulate_us(hand_allreduce(p, count, DType::kFloat32, two_shot, 4, slot), model);
        ASSERT_TRUE(sim.ok()) << sim.status().message();
        const double formula = predict_local_us(CollKind::kAllreduce,
                                                two_shot ? LocalAlgorithm::kTwoShot : LocalAlgorithm::kOneShot, bytes,
                                                p, slot, p, params);
        const double ratio = sim.value() / formula;
        worst = std::max(worst, std::abs(ratio - 1));
        EXPECT_NEAR(ratio, 1.0, 0.25) << (two_shot ? "two-shot" : "one-shot") << " p=" << p << " bytes=" << bytes;
      }
    }
  }
  std::printf("hand-built allreduce, 2-4 ranks, 8 B - 64 MB: simulation within %.1f %% of the model\n", worst * 100);
}

TEST(LocalProgramVerify, SimulationFindsDeadlock) {
  std::vector<Schedule> s = hand_allreduce(2, 4, DType::kFloat32, false, 4, 64);
  Program g(4, 64);
  g.wait(1, kReduced, 1);
  s[0] = g.s;
  PlanContext ctx;
  ctx.size = 2;
  Result<double> sim = simulate_us(s, CostModel(ctx));
  ASSERT_FALSE(sim.ok());
  EXPECT_TRUE(sim.status().message().find("deadlock") != std::string::npos) << sim.status().message();
}

#ifdef KOLO_TEST_RECORDED_PROGRAMS

using program_test::reduction;
using program_test::rooted;
using program_test::uneven_counts;

// Every one-host collective, recorded by running the executor's own program code, for 1..5
// ranks, chunks that span several slots, every root, in place and not.
TEST(LocalProgramVerify, EveryRecordedCollectiveVerifies) {
  const CollKind kinds[] = {CollKind::kAllreduce, CollKind::kReduce,        CollKind::kBroadcast,
                            CollKind::kAllgather, CollKind::kAllgatherv,    CollKind::kReduceScatter,
                            CollKind::kAlltoall,  CollKind::kBarrier};
  int verified = 0;
  for (CollKind kind : kinds) {
    std::vector<Algorithm> algorithms = {Algorithm::kOneShot};
    if (kind == CollKind::kAllreduce || kind == CollKind::kReduce) algorithms.push_back(Algorithm::kTwoShot);
    for (Algorithm algorithm : algorithms) {
      for (int p = 1; p <= 5; ++p) {
        std::vector<size_t> counts = {1, 3, 16, 37, 129};
        if (kind == CollKind::kBarrier) counts = {1};
        for (size_t count : counts) {
          for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kUint8}) {
            if (reduction(kind) && dtype == DType::kUint8) continue;
            for (auto [slot_bytes, slots] : {std::pair<size_t, uint32_t>{64, 2}, {64, 3}, {128, 4}, {1 << 20, 4}}) {
              if (slots < 3 && algorithm == Algorithm::kTwoShot) continue;  // PipelineNeedsEnoughSlots
              for (bool in_place : {false, true}) {
                for (bool prescaled : {false, true}) {
                  if (prescaled && !reduction(kind)) continue;
                  for (int root = 0; root < (rooted(kind) ? p : 1); ++root) {
                    CollSpec spec;
                    spec.kind = kind;
                    spec.count = count;
                    spec.dtype = dtype;
                    spec.root = root;
                    spec.in_place = in_place;
                    spec.prescaled = prescaled;
                    spec.postscaled = true;
                    spec.algorithm = algorithm;
                    if (kind == CollKind::kAllgatherv) uneven_counts(spec, p, count);
                    const std::string what =
                        str_cat(coll_name(kind), " ", algorithm_name(algorithm), " p=", p, " count=", count, " ",
                                dtype_name(dtype), " slot=", slot_bytes, "x", slots, " in_place=", in_place,
                                " prescaled=", prescaled, " root=", root);
                    std::vector<Schedule> programs = record_local_programs(spec, p, algorithm, slot_bytes, slots);
                    ASSERT_EQ(programs.size(), static_cast<size_t>(p)) << what;
                    Status st = verify_schedules(spec, programs);
                    ASSERT_TRUE(st.ok()) << what << ": " << st.message();
                    PlanContext ctx;
                    ctx.size = p;
                    Result<double> sim = simulate_us(programs, CostModel(ctx));
                    ASSERT_TRUE(sim.ok()) << what << ": " << sim.status().message();
                    ASSERT_TRUE(std::isfinite(sim.value()) && sim.value() > 0) << what << ": " << sim.value();
                    ++verified;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(verified, 1000);
}

// Every wait for the peers' posted data or reduced slices is needed: without any one of
// them the verifier finds a race or a read of a slot not yet written. (A wait for consumed
// slots may be implied by the posted waits before it, so those are not asked.)
TEST(LocalProgramVerify, RecordedProgramsNeedEveryDataWait) {
  const CollKind kinds[] = {CollKind::kAllreduce, CollKind::kReduce, CollKind::kBroadcast,
                            CollKind::kAllgather, CollKind::kReduceScatter, CollKind::kAlltoall};
  int mutants = 0;
  for (CollKind kind : kinds) {
    for (Algorithm algorithm : {Algorithm::kOneShot, Algorithm::kTwoShot}) {
      if (algorithm == Algorithm::kTwoShot && kind != CollKind::kAllreduce && kind != CollKind::kReduce) continue;
      for (int p : {2, 3}) {
        for (int root : {0, p - 1}) {
          CollSpec spec;
          spec.kind = kind;
          spec.count = 240;  // 256-byte slots: 4 chunks of float32, every rank with a two-shot slice of each
          spec.root = root;
          spec.postscaled = true;
          spec.algorithm = algorithm;
          const std::vector<Schedule> programs = record_local_programs(spec, p, algorithm, 256, 4);
          ASSERT_TRUE(verify_schedules(spec, programs).ok());
          for (int r = 0; r < p; ++r) {
            for (size_t i = 0; i < programs[r].steps.size(); ++i) {
              const Step& st = programs[r].steps[i];
              if (st.kind != StepKind::kWait || st.counter == kConsumed) continue;
              std::vector<Schedule> mutant = programs;
              auto& steps = mutant[r].steps;
              steps.erase(steps.begin() + static_cast<ptrdiff_t>(i));
              for (size_t j = i; j < steps.size(); ++j) steps[j].deps = {static_cast<int>(j) - 1};
              if (i == 0 && !steps.empty()) steps[0].deps.clear();
              Status v = verify_schedules(spec, mutant);
              EXPECT_FALSE(v.ok()) << coll_name(kind) << " " << algorithm_name(algorithm) << " p=" << p << " root=" << root
                                   << ": rank " << r << " runs without step " << i;
              EXPECT_TRUE(!v.ok() && (contains(v, "race on") || contains(v, "nothing wrote"))) << v.message();
              ++mutants;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(mutants, 100);
}

// The device_ipc executor's slot programs (engine/executors/device_ipc/device_slot_programs.h), recorded
// as the executor runs them: every collective and allreduce algorithm on 1-5 ranks, slots
// small enough for many chunks (slot reuse two chunks later is what the barriers guard).
TEST(LocalProgramVerify, EveryRecordedDeviceProgramVerifies) {
  const CollKind kinds[] = {CollKind::kAllreduce, CollKind::kReduce,     CollKind::kBroadcast, CollKind::kAllgather,
                            CollKind::kAllgatherv, CollKind::kReduceScatter, CollKind::kAlltoall};
  int verified = 0;
  for (CollKind kind : kinds) {
    std::vector<Algorithm> algorithms = {Algorithm::kOneShot};
    if (kind == CollKind::kAllreduce) algorithms = {Algorithm::kOneShot, Algorithm::kTwoShot, Algorithm::kRing};
    for (Algorithm algorithm : algorithms) {
      for (int p = 1; p <= 5; ++p) {
        for (size_t count : {1, 7, 40, 129}) {
          for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
            for (size_t slot_bytes : {size_t{256}, size_t{1} << 16}) {
              for (bool in_place : {false, true}) {
                for (bool prescaled : {false, true}) {
                  if (prescaled && !reduction(kind)) continue;
                  for (int root = 0; root < (rooted(kind) ? p : 1); ++root) {
                    CollSpec spec;
                    spec.kind = kind;
                    spec.count = count;
                    spec.dtype = dtype;
                    spec.root = root;
                    spec.in_place = in_place;
                    spec.prescaled = prescaled;
                    spec.postscaled = true;
                    spec.device = true;
                    if (kind == CollKind::kAllgatherv) uneven_counts(spec, p, count);
                    const std::string what =
                        str_cat("device ", coll_name(kind), " ", algorithm_name(algorithm), " p=", p, " count=", count,
                                " ", dtype_name(dtype), " slot=", slot_bytes, " in_place=", in_place,
                                " prescaled=", prescaled, " root=", root);
                    std::vector<Schedule> programs = record_device_programs(spec, p, algorithm, slot_bytes);
                    ASSERT_EQ(programs.size(), static_cast<size_t>(p)) << what;
                    Status st = verify_schedules(spec, programs);
                    ASSERT_TRUE(st.ok()) << what << ": " << st.message();
                    ++verified;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(verified, 1000);
}

// Every barrier of a device program is needed: the program without any one of them (on
// every rank) has a race or a read of a slot not yet written, which the verifier finds.
TEST(LocalProgramVerify, DeviceProgramsNeedEveryBarrier) {
  int mutants = 0;
  for (CollKind kind : {CollKind::kAllreduce, CollKind::kBroadcast, CollKind::kAllgather, CollKind::kReduceScatter,
                        CollKind::kAlltoall}) {
    std::vector<Algorithm> algorithms = {Algorithm::kOneShot};
    if (kind == CollKind::kAllreduce) algorithms = {Algorithm::kOneShot, Algorithm::kTwoShot, Algorithm::kRing};
    for (Algorithm algorithm : algorithms) {
      for (int p : {2, 3}) {
        CollSpec spec;
        spec.kind = kind;
        spec.count = 120;  // 256-byte slots: several chunks
        spec.postscaled = true;
        spec.device = true;
        const std::vector<Schedule> programs = record_device_programs(spec, p, algorithm, 256);
        ASSERT_TRUE(verify_schedules(spec, programs).ok());
        int barriers = 0;
        for (const Step& st : programs[0].steps) barriers += st.kind == StepKind::kSignal ? 1 : 0;
        ASSERT_GT(barriers, 1);
        for (int b = 1; b <= barriers; ++b) {
          Status v = verify_schedules(spec, record_device_programs(spec, p, algorithm, 256, b));
          EXPECT_FALSE(v.ok()) << "device " << coll_name(kind) << " " << algorithm_name(algorithm) << " p=" << p
                               << ": runs without barrier " << b;
          ++mutants;
        }
      }
    }
  }
  EXPECT_GT(mutants, 50);
}

// The recorded allreduce programs simulate close to the closed-form model.
TEST(LocalProgramVerify, RecordedAllreduceSimulationAgreesWithTheModel) {
  const PlannerParams& params = planner_params();
  const size_t slot = static_cast<size_t>(params.shm_chunk_bytes);
  for (Algorithm algorithm : {Algorithm::kOneShot, Algorithm::kTwoShot}) {
    for (int p = 2; p <= 4; ++p) {
      PlanContext ctx;
      ctx.size = p;
      CostModel model(ctx);
      double lo = 1e9, hi = 0;
      for (size_t bytes : kSizes) {
        CollSpec spec = allreduce_spec(bytes / 4);
        spec.algorithm = algorithm;
        Result<double> sim = simulate_us(record_local_programs(spec, p, algorithm, slot, 4), model);
        ASSERT_TRUE(sim.ok()) << sim.status().message();
        const double formula =
            predict_local_us(CollKind::kAllreduce,
                             algorithm == Algorithm::kTwoShot ? LocalAlgorithm::kTwoShot : LocalAlgorithm::kOneShot,
                             bytes, p, slot, p, params);
        lo = std::min(lo, sim.value() / formula);
        hi = std::max(hi, sim.value() / formula);
        EXPECT_NEAR(sim.value() / formula, 1.0, 0.25) << algorithm_name(algorithm) << " p=" << p << " bytes=" << bytes;
      }
      std::printf("recorded %s allreduce, %d ranks, 8 B - 64 MB: simulated / model %.3f .. %.3f\n",
                  algorithm_name(algorithm), p, lo, hi);
    }
  }
}

#endif  // KOLO_TEST_RECORDED_PROGRAMS

}  // namespace
}  // namespace kolo
