// plan(): the one decision. On one host with shared memory a single call goes to the
// one-host executor unless a schedule algorithm is forced or the call is in a group;
// elsewhere the schedule executor runs the cost model's choice.
#include <gtest/gtest.h>

#include "engine/planner/plan.h"
#include "engine/planner/staged_chunking.h"

namespace kolo {
namespace {

CollSpec spec_of(CollKind kind, size_t count) {
  CollSpec spec;
  spec.kind = kind;
  spec.count = count;
  return spec;
}

PlanContext one_host(int ranks) {
  PlanContext ctx{0, ranks, size_t{1} << 20};
  ctx.shared_memory = true;
  ctx.slot_bytes = size_t{1} << 20;
  ctx.agreed_cores = ranks;
  return ctx;
}

TEST(Plan, OneHostSingleCallsRunLocally) {
  for (CollKind kind : {CollKind::kAllreduce, CollKind::kReduce, CollKind::kBroadcast, CollKind::kAllgather,
                        CollKind::kReduceScatter, CollKind::kAlltoall, CollKind::kBarrier}) {
    const Plan p = plan(spec_of(kind, 1000), one_host(3));
    EXPECT_EQ(p.executor, ExecutorKind::kLocal) << coll_name(kind);
    EXPECT_TRUE(p.schedule.steps.empty()) << coll_name(kind);
    EXPECT_TRUE(p.algorithm == Algorithm::kOneShot || p.algorithm == Algorithm::kTwoShot) << coll_name(kind);
  }
}

// A staged device call's Plan records its chunking and the host Plan of a chunk, which is
// what the host runner runs (engine/call_runner.h): the same as planning the chunk alone.
TEST(Plan, StagedDeviceCallsRecordTheirChunksAndTheHostPlanOfAChunk) {
  for (int ranks : {2, 3}) {
    for (bool grouped : {false, true}) {
      for (CollKind kind : {CollKind::kAllreduce, CollKind::kAllgather, CollKind::kBroadcast}) {
        for (size_t count : {size_t{1000}, size_t{3} << 20}) {
          PlanContext ctx = one_host(ranks);  // without device_ipc: device calls are staged
          CollSpec spec = spec_of(kind, count);
          spec.device = true;
          const Plan p = plan(spec, ctx, grouped);
          SCOPED_TRACE(str_cat(coll_name(kind), " of ", count, " on ", ranks, grouped ? ", grouped" : ""));
          EXPECT_EQ(p.executor, ExecutorKind::kDeviceStaged);
          EXPECT_EQ(p.protocol, Protocol::kStagedChunks);
          ASSERT_NE(p.chunk_plan, nullptr);
          EXPECT_EQ(p.chunk_elems, grouped ? 0 : staged_chunk_elems(spec, ranks));
          EXPECT_EQ(p.chunk_elems != 0, !grouped && count > 1000);  // 12 MB: cut
          CollSpec host = spec;
          host.device = false;
          if (p.chunk_elems != 0) host.count = p.chunk_elems;
          const Plan alone = plan(host, ctx, grouped);
          EXPECT_EQ(p.chunk_plan->executor, alone.executor);
          EXPECT_EQ(p.chunk_plan->algorithm, alone.algorithm);
          EXPECT_EQ(p.chunk_plan->protocol, alone.protocol);
          EXPECT_EQ(p.chunk_plan->schedule.steps.size(), alone.schedule.steps.size());
          EXPECT_EQ(p.algorithm, alone.algorithm);
          EXPECT_NE(plan_label(p).find("run as: " + plan_label(alone)), std::string::npos) << plan_label(p);
        }
      }
    }
  }
}

TEST(Plan, GroupsForcedSchedulesAndPointToPointUseTheScheduleExecutor) {
  EXPECT_EQ(plan(spec_of(CollKind::kAllreduce, 1000), one_host(3), /*grouped=*/true).executor, ExecutorKind::kSchedule);
  CollSpec ring = spec_of(CollKind::kAllreduce, 1000);
  ring.algorithm = Algorithm::kRing;
  const Plan p = plan(ring, one_host(3));
  EXPECT_EQ(p.executor, ExecutorKind::kSchedule);
  EXPECT_EQ(p.algorithm, Algorithm::kRing);
  EXPECT_FALSE(p.schedule.steps.empty());
  CollSpec send = spec_of(CollKind::kSend, 10);
  send.peer = 1;
  EXPECT_EQ(plan(send, one_host(3)).executor, ExecutorKind::kSchedule);
}

TEST(Plan, ForcedOneHostAlgorithmIsKept) {
  CollSpec spec = spec_of(CollKind::kAllreduce, 8);
  spec.algorithm = Algorithm::kTwoShot;
  const Plan p = plan(spec, one_host(4));
  EXPECT_EQ(p.executor, ExecutorKind::kLocal);
  EXPECT_EQ(p.algorithm, Algorithm::kTwoShot);
}

TEST(Plan, WithoutSharedMemoryTheScheduleMatchesBuildSchedule) {
  for (size_t count : {size_t{1}, size_t{1000}, size_t{1} << 22}) {
    PlanContext ctx{1, 4, size_t{1} << 20};
    const CollSpec spec = spec_of(CollKind::kAllreduce, count);
    const Plan p = plan(spec, ctx);
    EXPECT_EQ(p.executor, ExecutorKind::kSchedule);
    EXPECT_EQ(p.algorithm, choose_algorithm(spec, ctx));
    EXPECT_EQ(schedule_to_string(p.schedule), schedule_to_string(build_schedule(spec, ctx)));
  }
}

TEST(Plan, TableAgreesWithTheGenerators) {
  PlanContext ctx{0, 4, size_t{1} << 20};
  EXPECT_TRUE(algorithm_serves(Algorithm::kRing, ExecutorKind::kSchedule, spec_of(CollKind::kAllgather, 4), ctx));
  EXPECT_FALSE(algorithm_serves(Algorithm::kRing, ExecutorKind::kSchedule, spec_of(CollKind::kAlltoall, 4), ctx));
  EXPECT_FALSE(algorithm_serves(Algorithm::kHierarchical, ExecutorKind::kSchedule, spec_of(CollKind::kAllreduce, 4), ctx));
  EXPECT_TRUE(algorithm_serves(Algorithm::kTwoShot, ExecutorKind::kLocal, spec_of(CollKind::kReduce, 4), ctx));
  EXPECT_FALSE(algorithm_serves(Algorithm::kTwoShot, ExecutorKind::kSchedule, spec_of(CollKind::kReduce, 4), ctx));
}

}  // namespace
}  // namespace kolo
