// The flight recorder (engine/flight_recorder.h) and kolo-trace's report
// (tools/kolo_trace/trace_report.h): the ring keeps the last calls, a dump reads back, and
// the report finds where ranks part, a mismatch and a straggler.
#include "engine/flight_recorder.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tools/kolo_trace/trace_report.h"

namespace kolo {
namespace {

CollSpec allreduce(size_t count) {
  CollSpec spec;
  spec.kind = CollKind::kAllreduce;
  spec.count = count;
  spec.dtype = DType::kFloat32;
  return spec;
}

trace::RankDump read_back(const FlightRecorder& recorder, const std::string& reason = "request") {
  trace::RankDump dump;
  std::string why;
  EXPECT_TRUE(trace::parse_dump(recorder.to_json(DumpRequest{"", reason, ""}), &dump, &why)) << why;
  return dump;
}

TEST(FlightRecorder, KeepsTheLastCallsInOrder) {
  FlightRecorder recorder(4, "c/1", 1, 3);
  Plan plan;
  plan.executor = ExecutorKind::kLocal;
  plan.algorithm = Algorithm::kOneShot;
  for (uint64_t seq = 1; seq <= 10; ++seq) {
    const size_t slot = recorder.entered(allreduce(seq), seq, 0, 1, trace_ticks());
    recorder.started(slot, trace_ticks());
    recorder.ended(slot, &plan, seq != 10, false, trace_ticks());
  }
  const trace::RankDump dump = read_back(recorder);
  EXPECT_EQ(dump.comm, "c/1");
  EXPECT_EQ(dump.rank, 1);
  EXPECT_EQ(dump.size, 3);
  EXPECT_EQ(dump.calls_recorded, 10);
  ASSERT_EQ(dump.calls.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(dump.calls[i].seq, static_cast<long long>(7 + i));
    EXPECT_EQ(dump.calls[i].count, static_cast<long long>(7 + i));
    EXPECT_EQ(dump.calls[i].kind, "allreduce");
    EXPECT_LE(dump.calls[i].entered_ms, dump.calls[i].ended_ms);
  }
  EXPECT_EQ(dump.calls[2].state, "done");
  EXPECT_EQ(dump.calls[3].state, "failed");
  const std::string text = recorder.to_json(DumpRequest{});
  EXPECT_NE(text.find("\"executor\": \"local\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"algorithm\": \"one_shot\""), std::string::npos) << text;
}

// A ring of any size keeps that many calls (it is a power of two inside); a call that ended
// untimed (the small-call lane's, kLaneTimedEvery) is done, with its entry and no end.
TEST(FlightRecorder, AnyCapacityAndUntimedEnds) {
  FlightRecorder recorder(5, "c/1", 0, 2);
  for (uint64_t seq = 1; seq <= 12; ++seq) {
    const size_t slot = recorder.entered(allreduce(seq), seq, 0, 1, trace_ticks());
    recorder.ended(slot, nullptr, true, false, seq % 2 == 0 ? trace_ticks() : 0);
  }
  const trace::RankDump dump = read_back(recorder);
  EXPECT_EQ(dump.calls_recorded, 12);
  ASSERT_EQ(dump.calls.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    const trace::CallEntry& c = dump.calls[i];
    EXPECT_EQ(c.seq, static_cast<long long>(8 + i));
    EXPECT_EQ(c.state, "done");
    EXPECT_GT(c.entered_ms, 0);
    if (c.seq % 2 == 0) {
      EXPECT_LE(c.entered_ms, c.ended_ms);
    } else {
      EXPECT_EQ(c.ended_ms, 0) << c.seq;
    }
  }
  EXPECT_NE(recorder.to_json(DumpRequest{}).find("\"capacity\": 5"), std::string::npos);
}

TEST(FlightRecorder, CallsInFlightAndPointToPoint) {
  FlightRecorder recorder(8, "c", 0, 2);
  CollSpec send;
  send.kind = CollKind::kSend;
  send.peer = 1;
  send.count = 3;
  recorder.ended(recorder.entered(send, 0, 0, 1, trace_ticks()), nullptr, true, false, trace_ticks());
  recorder.ended(recorder.entered(send, 0, 0, 1, trace_ticks()), nullptr, true, false, trace_ticks());
  (void)recorder.entered(allreduce(5), 1, 0, 1, trace_ticks());  // never started: waiting for the call lock
  const std::string text = recorder.to_json(DumpRequest{});
  EXPECT_NE(text.find("\"p2p_seq\": 2"), std::string::npos) << text;
  const trace::RankDump dump = read_back(recorder);
  ASSERT_EQ(dump.calls.size(), 3u);
  EXPECT_EQ(dump.calls[2].state, "entered");
  EXPECT_EQ(dump.calls[2].started_ms, 0);
}

// A dump while the call thread records: every dump reads back whole, no slot half-written.
TEST(FlightRecorder, DumpWhileRecording) {
  FlightRecorder recorder(16, "c", 0, 1);
  std::atomic<bool> stop{false};
  std::thread caller([&] {
    for (uint64_t seq = 1; !stop.load(); ++seq) {
      const size_t slot = recorder.entered(allreduce(seq), seq, 0, 1, trace_ticks());
      recorder.ended(slot, nullptr, true, false, trace_ticks());
    }
  });
  for (int i = 0; i < 200; ++i) {
    const trace::RankDump dump = read_back(recorder);
    for (const trace::CallEntry& c : dump.calls) EXPECT_EQ(c.count, c.seq);  // fields of one call, never two
  }
  stop = true;
  caller.join();
}

// timed_every: as the small-call lane (kLaneTimedEvery), only every so many calls has an end.
trace::RankDump made_dump(int rank, int size, int completed, const std::string& last_kind = "", double wait_ms = 1,
                          double lag_ms = 0, int timed_every = 1) {
  trace::RankDump d;
  d.comm = "world";
  d.rank = rank;
  d.size = size;
  d.reason = "failure";
  for (int seq = 1; seq <= completed; ++seq) {
    trace::CallEntry c;
    c.seq = seq;
    c.kind = "allreduce";
    c.dtype = "float";
    c.count = 16;
    c.state = "done";
    c.entered_ms = c.started_ms = 1000.0 * seq + lag_ms;
    c.ended_ms = seq % timed_every == 0 ? c.started_ms + wait_ms : 0;
    d.calls.push_back(c);
  }
  if (!last_kind.empty()) {
    trace::CallEntry c;
    c.seq = completed + 1;
    c.kind = last_kind;
    c.dtype = "float";
    c.count = 16;
    c.state = "failed";
    c.started_ms = c.entered_ms = 1000.0 * (completed + 1);
    c.ended_ms = c.started_ms + 5000;
    d.calls.push_back(c);
    d.error = "rank " + std::to_string(rank) + " failed";
  }
  return d;
}

TEST(TraceReport, NamesTheRankThatNeverEntered) {
  trace::Dumps dumps;
  dumps.ranks = {made_dump(0, 4, 5, "allreduce"), made_dump(1, 4, 5, "allreduce"), made_dump(2, 4, 5),
                 made_dump(3, 4, 5, "allreduce")};
  const std::string text = trace::report(dumps, "dir");
  EXPECT_NE(text.find("the ranks part at call 6 (allreduce of 16 x float): rank 2 never entered it; ranks 0,1,3 "
                      "failed in it after 5.00 s"),
            std::string::npos)
      << text;
}

TEST(TraceReport, NamesAMismatchAndMissingDumps) {
  trace::Dumps dumps;
  dumps.ranks = {made_dump(0, 3, 2, "allreduce"), made_dump(1, 3, 2, "allgather")};
  const std::string text = trace::report(dumps, "dir");
  EXPECT_NE(text.find("mismatch: rank 0 called allreduce of 16 x float; rank 1 called allgather of 16 x float"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("no dump from rank 2"), std::string::npos) << text;
}

TEST(TraceReport, FindsAStraggler) {
  trace::Dumps dumps;
  // Rank 2 comes 20 ms late to every call: it waits 0.1 ms, the others 20.1 ms.
  dumps.ranks = {made_dump(0, 3, 30, "", 20.1), made_dump(1, 3, 30, "", 20.1), made_dump(2, 3, 30, "", 0.1, 20)};
  for (trace::RankDump& d : dumps.ranks) d.reason = "request";
  const std::string text = trace::report(dumps, "dir");
  EXPECT_NE(text.find("straggler: rank 2 enters calls 20.00 ms after the others (median of the last 30 calls"),
            std::string::npos)
      << text;
  // Alike ranks: none.
  dumps.ranks = {made_dump(0, 2, 30), made_dump(1, 2, 30)};
  EXPECT_NE(trace::report(dumps, "dir").find("no straggler"), std::string::npos);
  // Small-call lane calls: the late rank's untimed (one in 16 timed), the others' timed as
  // they waited; an untimed call counts as no wait.
  dumps.ranks = {made_dump(0, 2, 80, "", 20.1), made_dump(1, 2, 80, "", 0.1, 20, 16)};
  for (trace::RankDump& d : dumps.ranks) d.reason = "request";
  const std::string lane = trace::report(dumps, "dir");
  EXPECT_NE(lane.find("straggler: rank 1 enters calls 20.10 ms after the others (median of the last 80 calls"),
            std::string::npos)
      << lane;
  // Nobody timed but every 16th call: those tell.
  dumps.ranks = {made_dump(0, 2, 80, "", 20.1, 0, 16), made_dump(1, 2, 80, "", 0.1, 20, 16)};
  for (trace::RankDump& d : dumps.ranks) d.reason = "request";
  const std::string sampled = trace::report(dumps, "dir");
  EXPECT_NE(sampled.find("straggler: rank 1 enters calls 20.00 ms after the others (median of the last 5 calls"),
            std::string::npos)
      << sampled;
}

// The ranks of a message and of kolo-trace's report (support/status.h): runs of three or
// more as a range, the rest one by one, a long list cut.
TEST(TraceReport, RankListsShowRuns) {
  EXPECT_EQ(rank_list({}), "none");
  EXPECT_EQ(rank_list({2}), "2");
  EXPECT_EQ(rank_list({0, 1, 3}), "0,1,3");
  EXPECT_EQ(rank_list({0, 1, 3, 4, 5, 6, 9}), "0,1,3-6,9");
  EXPECT_EQ(rank_list({7, 3, 4, 5}), "7,3-5");
  EXPECT_EQ(rank_list({0, 2, 4, 6, 7, 8}, 2), "0,2,...(4 more)");
  EXPECT_EQ(fixed_decimals(5.004, 2), "5.00");
}

TEST(TraceReport, RefusesWhatIsNotADump) {
  trace::RankDump d;
  std::string why;
  EXPECT_FALSE(trace::parse_dump("{\"format\": \"kolo-flight-recorder\", \"version\": 1, \"comm\": \"c\"", &d, &why));
  EXPECT_NE(why.find("cut short"), std::string::npos);
  EXPECT_FALSE(trace::parse_dump("[1, 2]", &d, &why));
  EXPECT_NE(why.find("not a kolo flight-recorder dump"), std::string::npos);
  EXPECT_FALSE(trace::parse_dump("{\"format\": \"kolo-flight-recorder\", \"version\": 7}", &d, &why));
  EXPECT_NE(why.find("another version"), std::string::npos);
}

}  // namespace
}  // namespace kolo
