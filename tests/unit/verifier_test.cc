// The symbolic verifier over every algorithm's schedules, and over broken schedules that
// it must reject with a message naming what is wrong.
#include "engine/planner/plan.h"
#include "engine/verifier/verifier.h"
#include "program_test_util.h"

#include <gtest/gtest.h>

#include "engine/schedules/algorithms.h"
#include "engine/schedules/schedule_builder.h"

namespace kolo {
namespace {

bool has_ring(CollKind kind) {
  return kind == CollKind::kAllreduce || kind == CollKind::kReduce || kind == CollKind::kReduceScatter ||
         kind == CollKind::kAllgather || kind == CollKind::kAllgatherv || kind == CollKind::kBroadcast;
}
using program_test::reduction;
using program_test::rooted;

// Uneven blocks with gaps between them, some empty.
void set_allgatherv_layout(CollSpec& spec, int p) {
  spec.counts.assign(p, 0);
  spec.displs.assign(p, 0);
  size_t at = 0;
  for (int q = 0; q < p; ++q) {
    spec.counts[q] = q % 3 == 0 ? spec.count : (spec.count + q) % 5;
    spec.displs[q] = at;
    at += spec.counts[q] + q % 2;
  }
}

std::string describe(const CollSpec& s, int p, size_t chunk) {
  return str_cat(coll_name(s.kind), " ", algorithm_name(s.algorithm), " p=", p, " count=", s.count,
                 " in_place=", s.in_place, " prescaled=", s.prescaled, " root=", s.root, " chunk=", chunk);
}

TEST(Verifier, EveryCollectiveAlgorithmAndShape) {
  const CollKind kinds[] = {CollKind::kAllreduce, CollKind::kReduce,    CollKind::kReduceScatter,
                            CollKind::kAllgather, CollKind::kAllgatherv, CollKind::kBroadcast,
                            CollKind::kAlltoall,  CollKind::kBarrier};
  std::vector<int> ranks;
  for (int p = 1; p <= 17; ++p) ranks.push_back(p);
  for (int p : {24, 32, 64}) ranks.push_back(p);
  int verified = 0;
  for (CollKind kind : kinds) {
    for (Algorithm algo : {Algorithm::kRing, Algorithm::kDirect}) {
      if (algo == Algorithm::kRing && !has_ring(kind)) continue;  // ring falls back to direct
      for (int p : ranks) {
        std::vector<size_t> counts = {0, 1, 7, size_t(3 * p + 1)};
        if (kind == CollKind::kBarrier) counts = {0};
        for (size_t count : counts) {
          for (bool in_place : {false, true}) {
            for (bool prescaled : {false, true}) {
              if (prescaled && !reduction(kind)) continue;
              for (size_t chunk : {size_t{64}, size_t{1} << 20}) {
                if (chunk != 64 && algo != Algorithm::kRing) continue;  // only the ring pipelines
                for (int root : {0, p - 1}) {
                  if (root != 0 && (!rooted(kind) || p == 1)) continue;
                  CollSpec spec;
                  spec.kind = kind;
                  spec.count = count;
                  spec.algorithm = algo;
                  spec.in_place = in_place;
                  spec.prescaled = prescaled;
                  spec.postscaled = true;
                  spec.root = root;
                  if (kind == CollKind::kAllgatherv) set_allgatherv_layout(spec, p);
                  Status st = verify_collective(spec, p, chunk);
                  ASSERT_TRUE(st.ok()) << describe(spec, p, chunk) << ": " << st.message();
                  ++verified;
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(verified, 2000);
}

TEST(Verifier, RingAtManyRanks) {
  for (int p : {256, 1024}) {
    for (CollKind kind : {CollKind::kAllreduce, CollKind::kAllgather, CollKind::kReduceScatter}) {
      CollSpec spec;
      spec.kind = kind;
      spec.count = kind == CollKind::kAllreduce ? p + 3 : 2;  // allgather/reduce_scatter: per rank
      spec.algorithm = Algorithm::kRing;
      spec.prescaled = kind != CollKind::kAllgather;
      Status st = verify_collective(spec, p, 64);
      ASSERT_TRUE(st.ok()) << coll_name(kind) << " p=" << p << ": " << st.message();
    }
  }
}

std::vector<Schedule> build_all(const CollSpec& spec, int p, size_t chunk = 64) {
  std::vector<Schedule> out;
  for (int r = 0; r < p; ++r) out.push_back(build_schedule(spec_for_rank(spec, r), PlanContext{r, p, chunk}));
  return out;
}

CollSpec make_spec(CollKind kind, Algorithm algo, size_t count) {
  CollSpec spec;
  spec.kind = kind;
  spec.algorithm = algo;
  spec.count = count;
  return spec;
}

int first_step(const Schedule& s, StepKind kind) {
  for (size_t i = 0; i < s.steps.size(); ++i) {
    if (s.steps[i].kind == kind) return static_cast<int>(i);
  }
  return -1;
}

void expect_failure(const Status& st, std::initializer_list<const char*> parts) {
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kInternal);
  for (const char* part : parts) EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
}

TEST(VerifierRejects, MissingDependencyAsARace) {
  CollSpec spec = make_spec(CollKind::kAllreduce, Algorithm::kRing, 7);
  std::vector<Schedule> s = build_all(spec, 3);
  int reduce = first_step(s[1], StepKind::kReduce);
  ASSERT_GE(reduce, 0);
  s[1].steps[reduce].deps.clear();  // reduce no longer waits for the recv into its scratch slot
  expect_failure(verify_schedules(spec, s),
                 {"allreduce (ring), p=3", "rank 1", str_cat("step ", reduce).c_str(), "race", "(recv) writes scratch"});
}

TEST(VerifierRejects, RecvWithWrongTagDeadlocks) {
  CollSpec spec = make_spec(CollKind::kAllreduce, Algorithm::kDirect, 5);
  std::vector<Schedule> s = build_all(spec, 3);
  int recv = first_step(s[1], StepKind::kRecv);
  s[1].steps[recv].tag = 99;
  expect_failure(verify_schedules(spec, s), {"allreduce (direct), p=3", "deadlock", "rank 1 at", "tag 99"});
}

TEST(VerifierRejects, UnmatchedSend) {
  CollSpec spec = make_spec(CollKind::kBroadcast, Algorithm::kDirect, 5);
  std::vector<Schedule> s = build_all(spec, 3);
  ScheduleBuilder(s[2], spec.dtype, spec.op).send(0, 42, {kBufInput, 0, 4});
  expect_failure(verify_schedules(spec, s), {"rank 2", "unmatched send", "tag 42"});
}

TEST(VerifierRejects, RecvSizeMismatch) {
  CollSpec spec = make_spec(CollKind::kBroadcast, Algorithm::kDirect, 5);
  std::vector<Schedule> s = build_all(spec, 3);
  s[1].steps[first_step(s[1], StepKind::kRecv)].dst.bytes = 8;
  expect_failure(verify_schedules(spec, s), {"rank 1", "receives 8 bytes but rank 0"});
}

TEST(VerifierRejects, ReduceReadingOneSourceTwice) {
  CollSpec spec = make_spec(CollKind::kAllreduce, Algorithm::kDirect, 5);
  std::vector<Schedule> s = build_all(spec, 3);
  int reduce = first_step(s[0], StepKind::kReduce);
  ASSERT_EQ(s[0].steps[reduce].srcs.size(), 3u);
  s[0].steps[reduce].srcs[2] = s[0].steps[reduce].srcs[1];
  expect_failure(verify_schedules(spec, s), {"rank 0", str_cat("step ", reduce).c_str(), "double counts rank 1"});
}

TEST(VerifierRejects, MissingPostscale) {
  CollSpec spec = make_spec(CollKind::kAllreduce, Algorithm::kRing, 9);
  std::vector<Schedule> s = build_all(spec, 4);
  for (Step& step : s[2].steps) {
    if (step.scale == ScaleUse::kPost) step.scale = ScaleUse::kNone;
  }
  // Rank 2's own block goes unscaled to every rank; rank 0 is checked first.
  expect_failure(verify_schedules(spec, s), {"allreduce (ring), p=4", "output element", "expected element",
                                             "post-scaled once"});
}

TEST(VerifierRejects, MissingPrescale) {
  CollSpec spec = make_spec(CollKind::kReduceScatter, Algorithm::kDirect, 3);
  spec.prescaled = true;
  std::vector<Schedule> s = build_all(spec, 2);
  int copy = first_step(s[0], StepKind::kCopy);
  s[0].steps[copy].scale = ScaleUse::kNone;  // rank 0's contributions are never pre-scaled
  // Rank 1 is the first to combine rank 0's unscaled block with its own scaled one.
  expect_failure(verify_schedules(spec, s), {"reduce_scatter (direct), p=2", "rank 1", "pre-scaled with not pre-scaled"});
}

TEST(VerifierRejects, SliceOutOfRange) {
  CollSpec spec = make_spec(CollKind::kAllgather, Algorithm::kDirect, 4);
  std::vector<Schedule> s = build_all(spec, 2);
  int recv = first_step(s[1], StepKind::kRecv);
  s[1].steps[recv].dst.offset = 24;  // 16 bytes from byte 24 of a 32-byte output
  expect_failure(verify_schedules(spec, s),
                 {"allgather (direct), p=2", "rank 1", str_cat("step ", recv).c_str(), "outside the output of 32 bytes"});
}

TEST(VerifierRejects, ReadOfOutputNeverWritten) {
  CollSpec spec = make_spec(CollKind::kAllreduce, Algorithm::kDirect, 5);
  std::vector<Schedule> s = build_all(spec, 2);
  int reduce = first_step(s[0], StepKind::kReduce);
  s[0].steps[reduce].srcs[0] = {kBufOutput, 0, 20};  // not in place: the output holds nothing yet
  expect_failure(verify_schedules(spec, s), {"rank 0", "reads output [0,20)", "never written"});
}

TEST(VerifierRejects, WrongElementOrBlock) {
  CollSpec spec = make_spec(CollKind::kAlltoall, Algorithm::kDirect, 2);
  std::vector<Schedule> s = build_all(spec, 3);
  for (Step& step : s[0].steps) {
    if (step.kind == StepKind::kSend && step.peer == 1) step.srcs[0].offset = 2 * 8;  // block 2 to rank 1
  }
  expect_failure(verify_schedules(spec, s), {"rank 1", "output element 0 holds element 4 of ranks {0}",
                                             "expected element 2 of rank 0"});
}

TEST(VerifierRejects, BadStructure) {
  CollSpec spec = make_spec(CollKind::kAllreduce, Algorithm::kDirect, 5);
  std::vector<Schedule> s = build_all(spec, 2);
  int reduce = first_step(s[0], StepKind::kReduce);
  s[0].steps[reduce].deps.push_back(reduce);
  expect_failure(verify_schedules(spec, s), {"depends on step", "not an earlier step"});
  s = build_all(spec, 2);
  s[0].steps[reduce].srcs.assign(9, s[0].steps[reduce].srcs[0]);
  expect_failure(verify_schedules(spec, s), {"reduce has 9 sources"});
}

}  // namespace
}  // namespace kolo
