// Schedules of every algorithm for many rank counts: every send has a receive with the
// same tag and size on its peer, dependencies point backwards, slices stay inside their
// buffers. (The planner's verifier will prove results; this checks the plumbing.)
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "engine/planner/plan.h"
#include "engine/schedules/algorithms.h"

namespace kolo {
namespace {

struct Shape {
  CollKind kind;
  size_t count;
};

size_t buffer_bytes(const CollSpec& spec, int p, int buffer) {
  const size_t es = dtype_size(spec.dtype);
  switch (spec.kind) {
    case CollKind::kAllreduce: case CollKind::kBroadcast: case CollKind::kReduce:
    case CollKind::kSend: case CollKind::kRecv: return spec.count * es;
    case CollKind::kAllgather: return (buffer == kBufInput ? 1 : p) * spec.count * es;
    case CollKind::kReduceScatter: return (buffer == kBufInput ? p : 1) * spec.count * es;
    case CollKind::kAlltoall: return p * spec.count * es;
    default: return 0;
  }
}

void check_schedules(const CollSpec& base, int p, size_t chunk_bytes) {
  // (from, to, tag) -> bytes, for sends and receives.
  std::map<std::tuple<int, int, uint32_t>, size_t> sends, recvs;
  for (int r = 0; r < p; ++r) {
    CollSpec spec = base;
    Schedule s = build_schedule(spec, PlanContext{r, p, chunk_bytes});
    for (size_t i = 0; i < s.steps.size(); ++i) {
      const Step& step = s.steps[i];
      for (int d : step.deps) ASSERT_LT(d, static_cast<int>(i)) << "dependency must point backwards";
      auto inside = [&](const Slice& sl) {
        size_t limit = sl.buffer == kBufScratch ? s.scratch_bytes : buffer_bytes(spec, p, sl.buffer);
        EXPECT_LE(sl.offset + sl.bytes, limit) << coll_name(spec.kind) << " rank " << r << " step " << i;
      };
      inside(step.dst);
      for (const Slice& src : step.srcs) inside(src);
      if (step.kind == StepKind::kSend) {
        ASSERT_TRUE(sends.emplace(std::make_tuple(r, step.peer, step.tag), step.srcs[0].bytes).second) << "duplicate tag";
      } else if (step.kind == StepKind::kRecv) {
        ASSERT_TRUE(recvs.emplace(std::make_tuple(step.peer, r, step.tag), step.dst.bytes).second) << "duplicate tag";
      } else if (step.kind == StepKind::kReduce) {
        EXPECT_GE(step.srcs.size(), 1u);
        EXPECT_LE(step.srcs.size(), 8u);
      }
    }
  }
  EXPECT_EQ(sends, recvs) << coll_name(base.kind) << " on " << p << " ranks, count " << base.count;
}

TEST(Schedules, SendsMatchReceivesForEveryAlgorithm) {
  const Shape shapes[] = {{CollKind::kAllreduce, 1}, {CollKind::kAllreduce, 1000003}, {CollKind::kAllreduce, 5},
                          {CollKind::kReduce, 777},   {CollKind::kReduceScatter, 333},   {CollKind::kAllgather, 4097},
                          {CollKind::kBroadcast, 300000}, {CollKind::kAlltoall, 9}, {CollKind::kBarrier, 0}};
  for (Algorithm algo : {Algorithm::kRing, Algorithm::kDirect}) {
    for (const Shape& shape : shapes) {
      for (int p : {1, 2, 3, 4, 5, 7, 8, 9, 16, 17}) {
        for (bool in_place : {false, true}) {
          CollSpec spec;
          spec.kind = shape.kind;
          spec.count = shape.count;
          spec.root = p - 1;
          spec.in_place = in_place;
          spec.prescaled = in_place;
          spec.algorithm = algo;
          check_schedules(spec, p, 4096);
          if (HasFailure()) return;
        }
      }
    }
  }
}

TEST(Schedules, RingAllreduceMovesTwiceTheDataOverPMinusOneSteps) {
  CollSpec spec;
  spec.count = 1 << 20;
  spec.algorithm = Algorithm::kRing;
  const int p = 4;
  Schedule s = build_schedule(spec, PlanContext{0, p, size_t{1} << 30});
  size_t sent = 0;
  int sends = 0;
  for (const Step& step : s.steps) {
    if (step.kind == StepKind::kSend) {
      sent += step.srcs[0].bytes;
      ++sends;
    }
  }
  EXPECT_EQ(sends, 2 * (p - 1));
  EXPECT_EQ(sent, 2 * (p - 1) * spec.bytes() / p);
}

TEST(Schedules, SizeTableChoosesDirectForSmallAndRingForLarge) {
  CollSpec spec;
  spec.count = 4;
  EXPECT_EQ(choose_algorithm(spec, PlanContext{0, 4, 1 << 20}), Algorithm::kDirect);
  spec.count = 1 << 24;
  EXPECT_EQ(choose_algorithm(spec, PlanContext{0, 4, 1 << 20}), Algorithm::kRing);
  spec.kind = CollKind::kAlltoall;
  EXPECT_EQ(choose_algorithm(spec, PlanContext{0, 4, 1 << 20}), Algorithm::kDirect);
}

}  // namespace
}  // namespace kolo
