// The device_ipc executor's zero-copy, compressed and flagged programs, recorded by running
// the program templates the executor runs (engine/executors/device_ipc/*_program.h) and
// proven by the verifier: every collective each serves on 1-5 ranks, odd counts, every
// root, in place and not; and broken recordings (a barrier or a wait left out, one parity
// of boxes) that it must reject. The slot programs: local_program_verify_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/executors/device_ipc/device_program_record.h"
#include "engine/verifier/verifier.h"
#include "program_test_util.h"

namespace kolo {
namespace {

using program_test::reduction;
using program_test::rooted;
using program_test::uneven_counts;
bool contains(const Status& s, const std::string& what) { return s.message().find(what) != std::string::npos; }

CollSpec device_spec(CollKind kind, int p, size_t count, DType dtype, int root, bool in_place, bool prescaled) {
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
  return spec;
}

std::string describe(const CollSpec& spec, int p) {
  return str_cat(coll_name(spec.kind), " p=", p, " count=", spec.count, " ", dtype_name(spec.dtype),
                 spec.compressed() ? str_cat(" wire ", dtype_name(spec.wire)) : std::string(), " root=", spec.root,
                 " in_place=", spec.in_place, " prescaled=", spec.prescaled);
}

// Every recorded program of `kinds` on 1-5 ranks (every root, in place and not, prescaled
// where it reduces and `prescale` allows) goes through `check`.
template <class Check>
int for_every_spec(const std::vector<CollKind>& kinds, bool prescale, Check check) {
  int runs = 0;
  for (CollKind kind : kinds) {
    for (int p = 1; p <= 5; ++p) {
      for (size_t count : {1, 7, 129}) {
        for (DType dtype : {DType::kFloat32, DType::kFloat16}) {
          for (bool in_place : {false, true}) {
            for (bool prescaled : {false, true}) {
              if (prescaled && (!prescale || !reduction(kind))) continue;
              for (int root = 0; root < (rooted(kind) ? p : 1); ++root) {
                check(device_spec(kind, p, count, dtype, root, in_place, prescaled), p);
                ++runs;
              }
            }
          }
        }
      }
    }
  }
  return runs;
}

const std::vector<CollKind> kZeroCopyKinds = {CollKind::kAllreduce, CollKind::kReduce, CollKind::kBroadcast,
                                              CollKind::kAllgather, CollKind::kAllgatherv, CollKind::kReduceScatter};
const std::vector<CollKind> kFlaggedKinds = {CollKind::kAllreduce,     CollKind::kReduce,   CollKind::kBroadcast,
                                             CollKind::kAllgather,     CollKind::kAllgatherv,
                                             CollKind::kReduceScatter, CollKind::kAlltoall};
const DType kWires[] = {DType::kFloat16, DType::kBFloat16, DType::kFloat8E4M3, DType::kFloat8E5M2};

// Zero-copy (never prescaled: plan.cc): the peers' buffers read in place between barriers.
TEST(DeviceProgramVerify, EveryZeroCopyProgramVerifies) {
  const int runs = for_every_spec(kZeroCopyKinds, false, [](const CollSpec& spec, int p) {
    const std::vector<Schedule> programs = record_zero_copy_programs(spec, p);
    ASSERT_EQ(programs.size(), static_cast<size_t>(p));
    Status st = verify_schedules(spec, programs);
    ASSERT_TRUE(st.ok()) << "zero-copy " << describe(spec, p) << ": " << st.message();
  });
  EXPECT_GT(runs, 500);
}

// Every barrier of a zero-copy program is needed: without the first a peer reads this
// rank's buffers before its call began (or its output before it wrote it); without the
// middle one (allreduce) a share before its owner reduced it; without the last, a peer
// reads while this rank may have returned.
TEST(DeviceProgramVerify, ZeroCopyProgramsNeedEveryBarrier) {
  int mutants = 0;
  for (CollKind kind : kZeroCopyKinds) {
    for (int p : {2, 3}) {
      for (int root : {0, p - 1}) {
        if (root != 0 && !rooted(kind)) continue;
        const CollSpec spec = device_spec(kind, p, 7, DType::kFloat32, root, false, false);
        const int barriers = kind == CollKind::kAllreduce ? 3 : 2;
        ASSERT_TRUE(verify_schedules(spec, record_zero_copy_programs(spec, p)).ok());
        for (int b = 1; b <= barriers; ++b) {
          Status v = verify_schedules(spec, record_zero_copy_programs(spec, p, b));
          EXPECT_FALSE(v.ok()) << "zero-copy " << describe(spec, p) << " runs without barrier " << b;
          if (b == barriers) EXPECT_TRUE(contains(v, "may return")) << v.message();
          if (b == 1) EXPECT_TRUE(contains(v, "call began") || contains(v, "nothing wrote")) << v.message();
          ++mutants;
        }
      }
    }
  }
  EXPECT_GT(mutants, 25);
}

// A peer's buffer is one of a rank that exists, read only once that rank's call began.
TEST(DeviceProgramVerify, PeerBuffersAreChecked) {
  const CollSpec spec = device_spec(CollKind::kAllreduce, 2, 7, DType::kFloat32, 0, false, false);
  std::vector<Schedule> programs = record_zero_copy_programs(spec, 2);
  for (Step& st : programs[0].steps) {
    for (Slice& src : st.srcs) {
      if (src.buffer == rank_buffer(1, kBufInput)) src.buffer = rank_buffer(2, kBufInput);
    }
  }
  Status v = verify_schedules(spec, programs);
  EXPECT_TRUE(contains(v, "names rank 2's input of 2 ranks")) << v.message();
  // Rank 0 reads rank 1's input with no wait before: rank 1 may not have started.
  Schedule unsynchronized;
  Step st;
  st.kind = StepKind::kCopy;
  st.dtype = DType::kFloat32;
  st.count = 1;
  st.srcs = {Slice{rank_buffer(1, kBufInput), 0, 4}};
  st.dst = Slice{kBufOutput, 0, 4};
  unsynchronized.steps = {st};
  CollSpec broadcast = device_spec(CollKind::kBroadcast, 2, 1, DType::kFloat32, 1, false, false);
  Schedule root;
  st.srcs = {Slice{kBufInput, 0, 4}};
  root.steps = {st};
  v = verify_schedules(broadcast, {unsynchronized, root});
  EXPECT_TRUE(contains(v, "before rank 1's call began")) << v.message();
}

// The compressed allreduce, one-shot and two-shot, every wire type, chunks small enough
// that both slots are reused (and every rank's two-shot share of a chunk may be empty).
TEST(DeviceProgramVerify, EveryCompressedProgramVerifies) {
  int runs = 0;
  for (Algorithm algorithm : {Algorithm::kOneShot, Algorithm::kTwoShot}) {
    for (DType wire : kWires) {
      for (int p = 1; p <= 5; ++p) {
        for (size_t count : {1, 7, 129, 301}) {
          for (size_t chunk_values : {16, 64, 512}) {
            for (bool in_place : {false, true}) {
              for (bool prescaled : {false, true}) {
                CollSpec spec = device_spec(CollKind::kAllreduce, p, count, DType::kFloat32, 0, in_place, prescaled);
                spec.wire = wire;
                Status st = verify_schedules(spec, record_compressed_programs(spec, p, algorithm, chunk_values));
                ASSERT_TRUE(st.ok()) << "compressed " << algorithm_name(algorithm) << " " << describe(spec, p)
                                     << " chunk=" << chunk_values << ": " << st.message();
                ++runs;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(runs, 900);
}

// Every barrier of the compressed programs is needed (several chunks: slot reuse too).
TEST(DeviceProgramVerify, CompressedProgramsNeedEveryBarrier) {
  int mutants = 0;
  for (Algorithm algorithm : {Algorithm::kOneShot, Algorithm::kTwoShot}) {
    for (int p : {2, 3}) {
      CollSpec spec = device_spec(CollKind::kAllreduce, p, 100, DType::kFloat32, 0, false, true);
      spec.wire = DType::kBFloat16;
      const std::vector<Schedule> programs = record_compressed_programs(spec, p, algorithm, 32);
      ASSERT_TRUE(verify_schedules(spec, programs).ok());
      int barriers = 0;
      for (const Step& st : programs[0].steps) barriers += st.kind == StepKind::kSignal ? 1 : 0;
      ASSERT_GE(barriers, 4);
      for (int b = 1; b <= barriers; ++b) {
        Status v = verify_schedules(spec, record_compressed_programs(spec, p, algorithm, 32, b));
        EXPECT_FALSE(v.ok()) << "compressed " << algorithm_name(algorithm) << " p=" << p << " runs without barrier " << b;
        ++mutants;
      }
    }
  }
  EXPECT_GT(mutants, 20);
}

// The one-kernel collectives, three calls in a row: the third reuses the first's boxes.
TEST(DeviceProgramVerify, EveryFlaggedProgramVerifies) {
  int runs = for_every_spec(kFlaggedKinds, true, [](const CollSpec& spec, int p) {
    Status st = verify_schedules(spec, record_flagged_programs(spec, p));
    ASSERT_TRUE(st.ok()) << "flagged " << describe(spec, p) << ": " << st.message();
  });
  // Compressed allreduce in boxes of codes.
  for (DType wire : kWires) {
    for (int p = 1; p <= 5; ++p) {
      for (size_t count : {1, 7, 129, 300}) {
        for (bool in_place : {false, true}) {
          for (bool prescaled : {false, true}) {
            CollSpec spec = device_spec(CollKind::kAllreduce, p, count, DType::kFloat32, 0, in_place, prescaled);
            spec.wire = wire;
            Status st = verify_schedules(spec, record_flagged_programs(spec, p));
            ASSERT_TRUE(st.ok()) << "flagged " << describe(spec, p) << ": " << st.message();
            ++runs;
          }
        }
      }
    }
  }
  EXPECT_GT(runs, 700);
}

// A broken flagged protocol is rejected: boxes of one parity only (call v + 1 overwrites
// a box a peer may still read), or any wait for a sender's data left out.
TEST(DeviceProgramVerify, FlaggedProgramsNeedBothParitiesAndEveryDataWait) {
  int mutants = 0;
  for (CollKind kind : kFlaggedKinds) {
    for (int p : {2, 3}) {
      for (int root : {0, p - 1}) {
        if (root != 0 && !rooted(kind)) continue;
        const CollSpec spec = device_spec(kind, p, 7, DType::kFloat32, root, false, false);
        const std::vector<Schedule> programs = record_flagged_programs(spec, p);
        ASSERT_TRUE(verify_schedules(spec, programs).ok());
        Status v = verify_schedules(spec, record_flagged_programs(spec, p, 3, 1));
        EXPECT_FALSE(v.ok()) << "flagged " << describe(spec, p) << " with boxes of one parity";
        EXPECT_TRUE(contains(v, "race on")) << v.message();
        ++mutants;
        for (int r = 0; r < p; ++r) {
          for (size_t i = 0; i < programs[r].steps.size(); ++i) {
            const Step& st = programs[r].steps[i];
            if (st.kind != StepKind::kWait || st.value % 2 == 0) continue;  // headers are even
            std::vector<Schedule> mutant = programs;
            auto& steps = mutant[r].steps;
            steps.erase(steps.begin() + static_cast<ptrdiff_t>(i));
            for (size_t j = i; j < steps.size(); ++j) steps[j].deps = {static_cast<int>(j) - 1};
            Status m = verify_schedules(spec, mutant);
            EXPECT_FALSE(m.ok()) << "flagged " << describe(spec, p) << ": rank " << r << " runs without step " << i;
            ++mutants;
          }
        }
      }
    }
  }
  EXPECT_GT(mutants, 60);
}

// Every rank waiting for every peer's header is what keeps the parity rule: where a pair
// exchanges no data (a reduce's non-roots, a broadcast's receivers), the middle call's
// header waits are the only thing that orders call 3's writes after call 1's reads.
TEST(DeviceProgramVerify, FlaggedProgramsNeedTheHeaderWaits) {
  for (CollKind kind : {CollKind::kReduce, CollKind::kBroadcast}) {
    for (int p : {2, 3}) {
      const CollSpec spec = device_spec(kind, p, 7, DType::kFloat32, 0, false, false);
      std::vector<Schedule> mutant = record_flagged_programs(spec, p);
      for (Schedule& s : mutant) {
        auto& steps = s.steps;
        // Call 2's header waits: value 4 (2 * call).
        steps.erase(std::remove_if(steps.begin(), steps.end(),
                                   [](const Step& st) { return st.kind == StepKind::kWait && st.value == 4; }),
                    steps.end());
        for (size_t j = 0; j < steps.size(); ++j) {
          steps[j].deps = j == 0 ? std::vector<int>{} : std::vector<int>{static_cast<int>(j) - 1};
        }
      }
      Status v = verify_schedules(spec, mutant);
      EXPECT_FALSE(v.ok()) << "flagged " << coll_name(kind) << " p=" << p << " without call 2's header waits";
      EXPECT_TRUE(contains(v, "race on")) << v.message();
    }
  }
}

}  // namespace
}  // namespace kolo
