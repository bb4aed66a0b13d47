// The runtime's pieces that need no peers: fusion planning, the response cache, the
// coordinator's readiness and mismatch reports, message decoding of malformed input, and
// the C API on a one-rank world (in flight names, test/wait/free).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "engine/runtime/coordinator.h"
#include "engine/runtime/fusion.h"
#include "engine/runtime/response_cache.h"
#include "kolo/kolo.h"
#include "one_rank_comm.h"

namespace kolo::runtime {
namespace {

Signature allreduce(size_t count, DType dtype = DType::kFloat32) {
  Signature sig;
  sig.dtype = dtype;
  sig.counts = {count};
  return sig;
}

Response ready(const std::string& name, const Signature& sig) { return Response{name, sig, {}, Code::kOk, ""}; }

TEST(RuntimeFusion, GroupsBySignatureUpToThreshold) {
  std::vector<Response> list = {ready("a", allreduce(100)), ready("b", allreduce(100, DType::kFloat64)),
                                ready("c", allreduce(100)), ready("d", allreduce(100))};
  auto groups = plan_fusion(list, 800);  // two float32 tensors of 400 bytes fit
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0], (std::vector<size_t>{0, 2}));
  EXPECT_EQ(groups[1], (std::vector<size_t>{1}));
  EXPECT_EQ(groups[2], (std::vector<size_t>{3}));
  EXPECT_EQ(plan_fusion(list, 0).size(), 4u);  // KOLO_FUSION_THRESHOLD=0: no fusion
}

TEST(RuntimeCache, SlotsAreReusedLowestFirstAndCapacityHolds) {
  ResponseCache cache(2);
  EXPECT_EQ(cache.insert("a", allreduce(1)), 0);
  EXPECT_EQ(cache.insert("b", allreduce(1)), 1);
  EXPECT_EQ(cache.insert("c", allreduce(1)), -1);  // full
  cache.erase(0);
  EXPECT_EQ(cache.find("a"), -1);
  EXPECT_EQ(cache.insert("c", allreduce(1)), 0);
  cache.erase(1);
  cache.erase(0);
  EXPECT_EQ(cache.slots(), 0u);
}

TEST(RuntimeCoordinator, ReadyOnlyWhenEveryRankReportedAndMismatchNamesValues) {
  Coordinator coordinator(3);
  std::vector<RankMessage> messages(3);
  messages[0].requests = {{"x", allreduce(10), {}}, {"y", allreduce(10), {}}};
  messages[1].requests = {{"x", allreduce(10), {}}};
  ResponseList first = coordinator.handle(messages, StallSettings{});
  EXPECT_TRUE(first.responses.empty());
  std::vector<RankMessage> more(3);
  more[2].requests = {{"x", allreduce(12), {}}};
  more[1].requests = {{"y", allreduce(10), {}}};
  ResponseList second = coordinator.handle(more, StallSettings{});
  ASSERT_EQ(second.responses.size(), 1u);
  const Response& x = second.responses[0];
  EXPECT_EQ(x.code, Code::kMismatch);
  EXPECT_NE(x.message.find("tensor 'x'"), std::string::npos) << x.message;
  EXPECT_NE(x.message.find("rank 0 has 10, rank 2 has 12"), std::string::npos) << x.message;
  EXPECT_EQ(coordinator.waiting(), 1u);  // y waits for rank 2
  std::vector<RankMessage> joined(3);
  joined[2].joined = true;  // a joined rank counts as having every allreduce
  ResponseList third = coordinator.handle(joined, StallSettings{});
  ASSERT_EQ(third.responses.size(), 1u);
  EXPECT_EQ(third.responses[0].code, Code::kOk);
}

// While a rank has joined, only allreduce can run: any other operation is answered with
// its error as soon as one rank reports it, whatever the other ranks submitted (Horovod's
// join tests have the non-joined ranks name theirs differently; waiting hung at 3 ranks).
TEST(RuntimeCoordinator, WhileARankIsJoinedOtherOperationsFailAtOnce) {
  Coordinator coordinator(3);
  Signature gather = allreduce(10);
  gather.kind = OpKind::kAllgather;
  std::vector<RankMessage> before(3);
  before[0].requests = {{"g.early", gather, {}}};  // reported before any rank joined: waits
  ResponseList none = coordinator.handle(before, StallSettings{});
  EXPECT_TRUE(none.responses.empty());
  std::vector<RankMessage> messages(3);
  messages[2].joined = true;
  messages[0].requests = {{"g.0", gather, {}}, {"sum", allreduce(10), {}}};
  messages[1].requests = {{"g.1", gather, {}}};
  ResponseList list = coordinator.handle(messages, StallSettings{});
  ASSERT_EQ(list.responses.size(), 3u);
  EXPECT_EQ(list.responses[0].name, "g.early");  // in the order first reported
  EXPECT_EQ(list.responses[1].name, "g.0");
  EXPECT_EQ(list.responses[2].name, "g.1");
  for (const Response& r : list.responses) {
    EXPECT_EQ(r.code, Code::kInvalidUsage);
    EXPECT_NE(r.message.find("rank 2 has joined"), std::string::npos) << r.message;
  }
  EXPECT_EQ(coordinator.waiting(), 1u);  // the allreduce waits for rank 1
  std::vector<RankMessage> rest(3);
  rest[2].joined = true;
  rest[1].requests = {{"sum", allreduce(10), {}}};
  ResponseList sum = coordinator.handle(rest, StallSettings{});
  ASSERT_EQ(sum.responses.size(), 1u);
  EXPECT_EQ(sum.responses[0].code, Code::kOk);
}

// The shape the caller gives (kolo_enqueue_options.shape) is part of what ranks must agree
// on: the same element count in another shape is a mismatch, named with both shapes.
TEST(RuntimeCoordinator, SameCountInAnotherShapeIsAMismatch) {
  Coordinator coordinator(2);
  std::vector<RankMessage> messages(2);
  Signature a = allreduce(24), b = allreduce(24);
  a.shape = {4, 6};
  b.shape = {6, 4};
  messages[0].requests = {{"s", a, {}}};
  messages[1].requests = {{"s", b, {}}};
  ResponseList list = coordinator.handle(messages, StallSettings{});
  ASSERT_EQ(list.responses.size(), 1u);
  EXPECT_EQ(list.responses[0].code, Code::kMismatch);
  EXPECT_NE(list.responses[0].message.find("shape"), std::string::npos) << list.responses[0].message;
  EXPECT_NE(list.responses[0].message.find("(4, 6)"), std::string::npos) << list.responses[0].message;
  EXPECT_NE(list.responses[0].message.find("(6, 4)"), std::string::npos) << list.responses[0].message;
  // Alike shapes (or none given) are ready.
  std::vector<RankMessage> same(2);
  same[0].requests = {{"t", a, {}}};
  same[1].requests = {{"t", a, {}}};
  ResponseList ok = coordinator.handle(same, StallSettings{});
  ASSERT_EQ(ok.responses.size(), 1u);
  EXPECT_EQ(ok.responses[0].code, Code::kOk);
}

TEST(RuntimeCoordinator, StallReportNamesMissingRanksAndShutsDown) {
  Coordinator coordinator(3);
  std::vector<RankMessage> messages(3);
  messages[0].pending = {{"lost", 5.0}};
  messages[1].pending = {{"lost", 5.0}};
  ResponseList list = coordinator.handle(messages, StallSettings{1, 2});
  EXPECT_EQ(list.shutdown_code, Code::kTimeout);
  EXPECT_NE(list.shutdown_message.find("tensor 'lost'"), std::string::npos) << list.shutdown_message;
  EXPECT_NE(list.shutdown_message.find("not by rank 2"), std::string::npos) << list.shutdown_message;
}

TEST(RuntimeMessages, RoundTripAndMalformedInput) {
  RankMessage m;
  m.joined = true;
  m.requests = {{"t", allreduce(7), {1, 2}}};
  std::vector<uint8_t> bytes = encode(m);
  RankMessage back;
  ASSERT_TRUE(decode(bytes.data(), bytes.size(), 1, back).ok());
  EXPECT_TRUE(back.joined);
  EXPECT_EQ(back.requests[0].name, "t");
  EXPECT_EQ(back.requests[0].sig, allreduce(7));
  // The shape travels too.
  RankMessage shaped;
  Signature sig = allreduce(6);
  sig.shape = {2, 3};
  shaped.requests = {{"u", sig, {}}};
  std::vector<uint8_t> shaped_bytes = encode(shaped);
  RankMessage shaped_back;
  ASSERT_TRUE(decode(shaped_bytes.data(), shaped_bytes.size(), 1, shaped_back).ok());
  EXPECT_EQ(shaped_back.requests[0].sig.shape, (std::vector<int64_t>{2, 3}));
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    RankMessage partial;
    Status s = decode(bytes.data(), cut, 1, partial);
    EXPECT_EQ(s.code(), Code::kRemote) << "cut at " << cut;
  }
  std::vector<uint8_t> bad = encode(m);
  bad[1 + 8 + 8 + 1] = 99;
  RankMessage junk;
  EXPECT_FALSE(decode(bad.data(), bad.size(), 1, junk).ok());
}

class RuntimeApi : public OneRankComm {};

TEST_F(RuntimeApi, OneRankEnqueueWaitAndNameInFlight) {
  float a[4] = {1, 2, 3, 4}, b[4] = {};
  kolo_request_t req = nullptr, dup = nullptr;
  ASSERT_EQ(kolo_enqueue_allreduce("g", a, b, 4, KOLO_FLOAT32, KOLO_SUM, nullptr, comm_, &req), KOLO_SUCCESS)
      << kolo_last_error();
  kolo_result_t again = kolo_enqueue_allreduce("g", a, b, 4, KOLO_FLOAT32, KOLO_SUM, nullptr, comm_, &dup);
  if (again == KOLO_SUCCESS) {
    // The first had already completed: the name was free again.
    ASSERT_EQ(kolo_wait(dup), KOLO_SUCCESS);
    ASSERT_EQ(kolo_request_free(dup), KOLO_SUCCESS);
  } else {
    EXPECT_EQ(again, KOLO_ERR_INVALID_USAGE);
    EXPECT_NE(std::string(kolo_last_error()).find("'g' is already in flight"), std::string::npos) << kolo_last_error();
  }
  ASSERT_EQ(kolo_wait(req), KOLO_SUCCESS) << kolo_last_error();
  EXPECT_EQ(kolo_test(req), KOLO_SUCCESS);
  EXPECT_EQ(b[3], 4.0f);
  EXPECT_EQ(kolo_request_free(req), KOLO_SUCCESS);
  EXPECT_EQ(kolo_request_free(req), KOLO_ERR_INVALID_USAGE);  // already freed
}

// A name stays taken until its request is freed, completed or not: the refusal of a
// second enqueue does not depend on how fast the operation ran.
TEST_F(RuntimeApi, NameTakenUntilTheRequestIsFreed) {
  float a[2] = {1, 2}, b[2] = {};
  kolo_request_t req = nullptr, again = nullptr;
  ASSERT_EQ(kolo_enqueue_allreduce("held", a, b, 2, KOLO_FLOAT32, KOLO_SUM, nullptr, comm_, &req), KOLO_SUCCESS)
      << kolo_last_error();
  ASSERT_EQ(kolo_wait(req), KOLO_SUCCESS) << kolo_last_error();
  EXPECT_EQ(kolo_enqueue_allreduce("held", a, b, 2, KOLO_FLOAT32, KOLO_SUM, nullptr, comm_, &again),
            KOLO_ERR_INVALID_USAGE);
  EXPECT_NE(std::string(kolo_last_error()).find("'held' is already in flight"), std::string::npos)
      << kolo_last_error();
  ASSERT_EQ(kolo_request_free(req), KOLO_SUCCESS);
  ASSERT_EQ(kolo_enqueue_allreduce("held", a, b, 2, KOLO_FLOAT32, KOLO_SUM, nullptr, comm_, &again), KOLO_SUCCESS)
      << kolo_last_error();
  ASSERT_EQ(kolo_wait(again), KOLO_SUCCESS) << kolo_last_error();
  EXPECT_EQ(b[1], 2.0f);
  EXPECT_EQ(kolo_request_free(again), KOLO_SUCCESS);
}

TEST_F(RuntimeApi, ArgumentErrorsNameTheArgument) {
  float a[4] = {};
  kolo_request_t req = nullptr;
  EXPECT_EQ(kolo_enqueue_allreduce(nullptr, a, a, 4, KOLO_FLOAT32, KOLO_SUM, nullptr, comm_, &req),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("name"), std::string::npos);
  EXPECT_EQ(kolo_enqueue_allgather("ag", a, 1, 4, KOLO_FLOAT32, nullptr, comm_, &req), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("alloc"), std::string::npos);
  EXPECT_EQ(kolo_enqueue_broadcast("bc", a, 4, KOLO_FLOAT32, 3, nullptr, comm_, &req), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kolo_test(nullptr), KOLO_ERR_INVALID_ARGUMENT);
  kolo_enqueue_options options = KOLO_ENQUEUE_OPTIONS_INIT;
  options.ndim = 2;  // shape NULL
  EXPECT_EQ(kolo_enqueue_allreduce("sh", a, a, 4, KOLO_FLOAT32, KOLO_SUM, &options, comm_, &req),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("shape"), std::string::npos) << kolo_last_error();
  options.ndim = -1;
  EXPECT_EQ(kolo_enqueue_allreduce("sh", a, a, 4, KOLO_FLOAT32, KOLO_SUM, &options, comm_, &req),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("ndim"), std::string::npos) << kolo_last_error();
  const int64_t shape[2] = {2, 2};
  options.ndim = 2;
  options.shape = shape;
  ASSERT_EQ(kolo_enqueue_allreduce("sh", a, a, 4, KOLO_FLOAT32, KOLO_SUM, &options, comm_, &req), KOLO_SUCCESS)
      << kolo_last_error();
  EXPECT_EQ(kolo_wait(req), KOLO_SUCCESS) << kolo_last_error();
  EXPECT_EQ(kolo_request_free(req), KOLO_SUCCESS);
  int last = -1;
  EXPECT_EQ(kolo_join(comm_, &last), KOLO_SUCCESS) << kolo_last_error();
  EXPECT_EQ(last, 0);
}

}  // namespace
}  // namespace kolo::runtime
