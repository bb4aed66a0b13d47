// The planner's one-host model (engine/planner/local_model.h) and the executor's choice
// taken from it (choose_local_algorithm, engine/local/local_choice.cc): sensible picks,
// forced algorithms honoured, predictions that grow with size, and a cached crossover
// that agrees with evaluating the model directly.
#include <gtest/gtest.h>
#include <sched.h>

#include "engine/planner/plan.h"
#include "engine/planner/local_model.h"
#include "support/host_rates.h"

namespace kolo {
namespace {

constexpr size_t kSlot = 1 << 20;

CollSpec spec_of(CollKind kind, size_t bytes) {
  CollSpec spec;
  spec.kind = kind;
  spec.count = std::max<size_t>(1, bytes / 4);
  return spec;
}

// The cores the tests plan for (a domain passes the minimum over its ranks).
int this_process_cores() {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
}

TEST(PlannerLocal, ForcedAlgorithmIsHonoured) {
  for (int ranks : {2, 3, 4, 8}) {
    for (size_t bytes : {size_t{8}, size_t{1} << 20, size_t{256} << 20}) {
      for (CollKind kind : {CollKind::kAllreduce, CollKind::kReduce}) {
        EXPECT_EQ(choose_local_algorithm(spec_of(kind, bytes), ranks, this_process_cores(), kSlot, Algorithm::kOneShot), Algorithm::kOneShot);
        EXPECT_EQ(choose_local_algorithm(spec_of(kind, bytes), ranks, this_process_cores(), kSlot, Algorithm::kTwoShot), Algorithm::kTwoShot);
      }
    }
  }
}

TEST(PlannerLocal, SmallMessagesGoOneShot) {
  // Two-shot's second wait per chunk buys nothing when there is almost nothing to reduce.
  for (int ranks = 2; ranks <= 8; ++ranks) {
    for (int cores : {1, 2, 4, 8, 64}) {
      for (size_t bytes : {size_t{4}, size_t{64}, size_t{1024}}) {
        EXPECT_EQ(faster_local_algorithm(CollKind::kAllreduce, bytes, ranks, kSlot, cores), LocalAlgorithm::kOneShot)
            << ranks << " ranks, " << cores << " cores, " << bytes << " B";
      }
    }
    EXPECT_EQ(choose_local_algorithm(spec_of(CollKind::kAllreduce, 8), ranks, this_process_cores(), kSlot, Algorithm::kAuto),
              Algorithm::kOneShot);
  }
}

TEST(PlannerLocal, LargeMessagesOnManyCoresGoTwoShot) {
  // With a core per rank, one-shot reads all p inputs of every byte on every rank; two-shot
  // reads 1/p of them and copies the rest: for many ranks and many bytes it must win.
  for (int ranks : {4, 8}) {
    EXPECT_EQ(faster_local_algorithm(CollKind::kAllreduce, size_t{64} << 20, ranks, kSlot, 64),
              LocalAlgorithm::kTwoShot);
  }
}

TEST(PlannerLocal, OtherCollectivesHaveOnePipeline) {
  for (CollKind kind : {CollKind::kBroadcast, CollKind::kAllgather, CollKind::kReduceScatter, CollKind::kAlltoall,
                        CollKind::kBarrier}) {
    EXPECT_EQ(choose_local_algorithm(spec_of(kind, size_t{64} << 20), 4, this_process_cores(), kSlot, Algorithm::kAuto), Algorithm::kOneShot);
  }
}

TEST(PlannerLocal, PredictionsGrowWithSize) {
  for (CollKind kind : {CollKind::kAllreduce, CollKind::kReduce, CollKind::kBroadcast, CollKind::kAllgather,
                        CollKind::kReduceScatter, CollKind::kAlltoall}) {
    for (LocalAlgorithm algo : {LocalAlgorithm::kOneShot, LocalAlgorithm::kTwoShot}) {
      for (int ranks : {2, 3, 4, 8}) {
        for (int cores : {2, 8}) {
          double previous = 0;
          for (size_t bytes = 4; bytes <= (size_t{256} << 20); bytes *= 2) {
            const double us = predict_local_us(kind, algo, bytes, ranks, kSlot, cores);
            EXPECT_GT(us, 0);
            EXPECT_GE(us, previous) << coll_name(kind) << " " << ranks << " ranks " << bytes << " B";
            previous = us;
          }
          // Bandwidth-bound at 256 MB: at least 100x the 1 KB time.
          EXPECT_GT(previous, 100 * predict_local_us(kind, algo, 1024, ranks, kSlot, cores));
        }
      }
    }
  }
}

TEST(PlannerLocal, MoreRanksThanCoresCostMore) {
  for (size_t bytes : {size_t{1024}, size_t{1} << 20, size_t{64} << 20}) {
    for (LocalAlgorithm algo : {LocalAlgorithm::kOneShot, LocalAlgorithm::kTwoShot}) {
      EXPECT_GT(predict_local_us(CollKind::kAllreduce, algo, bytes, 4, kSlot, 2),
                predict_local_us(CollKind::kAllreduce, algo, bytes, 4, kSlot, 4));
    }
  }
}

TEST(PlannerLocal, ThreeRanksOnTwoCoresFlipTwice) {
  // Measured on the 2-core VM: one-shot at 1 KB, two-shot at 1 MB, one-shot at 64 MB.
  const LocalChoiceTable t = local_choice_table(CollKind::kAllreduce, 3, kSlot, 2);
  EXPECT_EQ(t.choose(1024), LocalAlgorithm::kOneShot);
  EXPECT_EQ(t.choose(1 << 20), LocalAlgorithm::kTwoShot);
  EXPECT_EQ(t.choose(size_t{64} << 20), LocalAlgorithm::kOneShot);
}

TEST(PlannerLocal, SmallerSlotsMeanMoreWaits) {
  EXPECT_GT(predict_local_us(CollKind::kAllreduce, LocalAlgorithm::kTwoShot, size_t{64} << 20, 2, 64 << 10, 2),
            predict_local_us(CollKind::kAllreduce, LocalAlgorithm::kTwoShot, size_t{64} << 20, 2, kSlot, 2));
}

TEST(PlannerLocal, ExecutorChoiceMatchesTheModel) {
  // The cached flips must give what evaluating both predictions gives, except where the
  // two are within 1 % (a flip and flip-back between two scan steps would be missed).
  const int cores = this_process_cores();
  int checked = 0;
  for (CollKind kind : {CollKind::kAllreduce, CollKind::kReduce}) {
    for (int ranks = 2; ranks <= 8; ++ranks) {
      for (size_t slot : {size_t{64} << 10, kSlot}) {
        for (size_t bytes = 4; bytes <= (size_t{256} << 20); bytes = bytes * 3 / 2 + 4) {
          const size_t rounded = bytes / 4 * 4;
          const double one = predict_local_us(kind, LocalAlgorithm::kOneShot, rounded, ranks, slot, cores);
          const double two = predict_local_us(kind, LocalAlgorithm::kTwoShot, rounded, ranks, slot, cores);
          if (std::abs(one - two) < 0.01 * std::min(one, two)) continue;
          const Algorithm want = two < one ? Algorithm::kTwoShot : Algorithm::kOneShot;
          EXPECT_EQ(choose_local_algorithm(spec_of(kind, rounded), ranks, this_process_cores(), slot, Algorithm::kAuto), want)
              << coll_name(kind) << " " << ranks << " ranks, slot " << slot << ", " << rounded << " B";
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

// The model scaled to a machine: rates follow its copy rate, the cache its own size; a
// figure of 0 keeps the table's. The choice made with scaled figures is the one the model
// predicts with the same figures.
TEST(PlannerLocal, ScaledForHostFollowsTheMeasuredRates) {
  const PlannerParams& table = planner_params();
  ASSERT_GT(table.shm_fitted_copy_gbs, 0);
  const PlannerParams twice = scaled_for_host(2 * table.shm_fitted_copy_gbs, 8 << 20);
  EXPECT_DOUBLE_EQ(twice.shm_copy_gbs, 2 * table.shm_copy_gbs);
  EXPECT_DOUBLE_EQ(twice.shm_reduce_gbs, 2 * table.shm_reduce_gbs);
  EXPECT_DOUBLE_EQ(twice.shm_dram_gbs, 2 * table.shm_dram_gbs);
  EXPECT_DOUBLE_EQ(twice.shm_cache_bytes, 8 << 20);
  EXPECT_DOUBLE_EQ(twice.shm_sync_us, table.shm_sync_us);  // not a rate
  const PlannerParams same = scaled_for_host(0, 0);
  EXPECT_DOUBLE_EQ(same.shm_copy_gbs, table.shm_copy_gbs);
  EXPECT_DOUBLE_EQ(same.shm_cache_bytes, table.shm_cache_bytes);
  for (double factor : {0.25, 1.0, 3.0}) {
    const PlannerParams p = scaled_for_host(factor * table.shm_fitted_copy_gbs, 16 << 20);
    for (size_t bytes = 1024; bytes <= (size_t{256} << 20); bytes *= 4) {
      const bool two = faster_local_algorithm(CollKind::kAllreduce, bytes, 3, kSlot, 2, p) == LocalAlgorithm::kTwoShot;
      EXPECT_EQ(choose_local_algorithm(spec_of(CollKind::kAllreduce, bytes), 3, 2, kSlot, Algorithm::kAuto, p),
                two ? Algorithm::kTwoShot : Algorithm::kOneShot)
          << factor << "x, " << bytes << " B";
    }
  }
}

// What support/host_rates.h measures is a plausible figure on any machine.
TEST(PlannerLocal, HostRatesArePlausible) {
  const HostRates& rates = host_rates();
  EXPECT_GT(rates.copy_gbs, 0.1);
  EXPECT_LT(rates.copy_gbs, 10000);
  EXPECT_GE(rates.cache_bytes, 64 << 10);
}

}  // namespace
}  // namespace kolo
