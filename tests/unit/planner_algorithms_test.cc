// The verifier over the planner's algorithms (tree, halving-doubling, one-shot, two-shot,
// hierarchical, topology-ordered and multi-NIC rings): every collective each one has,
// rank counts 1-17, 24, 32, 64 (256 and 1024 for tree and hierarchical), on plain rank
// lists and on communicators laid over the topology fixtures.
#include <gtest/gtest.h>

#include "engine/planner/plan.h"
#include "engine/schedules/ring_order.h"
#include "engine/verifier/verifier.h"
#include "topology_test_util.h"
#include "program_test_util.h"

namespace kolo {
namespace {

struct Case {
  Algorithm algo;
  CollKind kind;
};

const Case kCases[] = {
    {Algorithm::kTree, CollKind::kAllreduce},          {Algorithm::kTree, CollKind::kBroadcast},
    {Algorithm::kTree, CollKind::kReduce},             {Algorithm::kHalvingDoubling, CollKind::kAllreduce},
    {Algorithm::kHalvingDoubling, CollKind::kReduceScatter}, {Algorithm::kHalvingDoubling, CollKind::kAllgather},
    {Algorithm::kOneShot, CollKind::kAllreduce},       {Algorithm::kTwoShot, CollKind::kAllreduce},
};

using program_test::reduction;

std::string describe(const CollSpec& s, int p) {
  return str_cat(coll_name(s.kind), " ", algorithm_name(s.algorithm), " p=", p, " count=", s.count, " in_place=",
                 s.in_place, " prescaled=", s.prescaled, " root=", s.root);
}

TEST(PlannerAlgorithms, VerifiedForEveryShapeAndRankCount) {
  std::vector<int> ranks;
  for (int p = 1; p <= 17; ++p) ranks.push_back(p);
  for (int p : {24, 32, 64}) ranks.push_back(p);
  int verified = 0;
  for (const Case& c : kCases) {
    for (int p : ranks) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t(3 * p + 1)}) {
        for (bool in_place : {false, true}) {
          for (bool prescaled : {false, true}) {
            if (prescaled && !reduction(c.kind)) continue;
            // Small chunks pipeline the tree; big ones do not.
            for (size_t chunk : {size_t{8}, size_t{1} << 20}) {
              if (chunk != 8 && c.algo != Algorithm::kTree) continue;
              CollSpec spec;
              spec.kind = c.kind;
              spec.algorithm = c.algo;
              spec.count = count;
              spec.in_place = in_place;
              spec.prescaled = prescaled;
              spec.postscaled = true;
              spec.root = c.kind == CollKind::kAllreduce ? 0 : (p - 1) / 2;
              Status st = verify_collective(spec, p, chunk);
              ASSERT_TRUE(st.ok()) << describe(spec, p) << " chunk " << chunk << ": " << st.message();
              ++verified;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(verified, 1500);
}

// Ranks dealt to hosts round-robin (rank r on host r % hosts), the harder layout.
std::vector<int> round_robin(int p, int hosts) {
  std::vector<int> h(p);
  for (int r = 0; r < p; ++r) h[r] = r % hosts;
  return h;
}

TEST(PlannerAlgorithms, HierarchicalOnSeveralHosts) {
  for (auto [hosts, per_host] : {std::pair{2, 2}, {2, 3}, {3, 4}, {4, 2}, {2, 8}, {5, 3}, {8, 8}}) {
    const int p = hosts * per_host;
    std::vector<int> host_of = round_robin(p, hosts);
    for (size_t count : {size_t{0}, size_t{5}, size_t(2 * p + 3)}) {
      for (bool in_place : {false, true}) {
        for (bool prescaled : {false, true}) {
          CollSpec spec;
          spec.algorithm = Algorithm::kHierarchical;
          spec.count = count;
          spec.in_place = in_place;
          spec.prescaled = prescaled;
          spec.postscaled = true;
          PlanContext ctx{0, p, 16};
          ctx.host_of_rank = &host_of;
          Schedule s0 = build_schedule(spec, ctx);
          ASSERT_EQ(s0.algorithms, std::vector<Algorithm>{Algorithm::kHierarchical});
          Status st = verify_collective(spec, ctx);
          ASSERT_TRUE(st.ok()) << describe(spec, p) << " hosts " << hosts << ": " << st.message();
        }
      }
    }
  }
}

TEST(PlannerAlgorithms, ManyRanks) {
  for (int p : {256, 1024}) {
    std::vector<int> host_of(p);
    for (int r = 0; r < p; ++r) host_of[r] = r / 8;
    for (Case c : {Case{Algorithm::kTree, CollKind::kAllreduce}, Case{Algorithm::kTree, CollKind::kBroadcast},
                   Case{Algorithm::kHierarchical, CollKind::kAllreduce}}) {
      CollSpec spec;
      spec.kind = c.kind;
      spec.algorithm = c.algo;
      spec.count = p + 3;
      spec.prescaled = c.kind == CollKind::kAllreduce;
      spec.root = p / 3;
      PlanContext ctx{0, p, 64};
      ctx.host_of_rank = &host_of;
      Status st = verify_collective(spec, ctx);
      ASSERT_TRUE(st.ok()) << describe(spec, p) << ": " << st.message();
    }
  }
}

// Every fixture as 1, 2 and 3 hosts of up to 8 ranks, GPU buffers (the rings then follow
// the GPU links and use one ring per NIC): ring and hierarchical allreduce, ring
// reduce-scatter/allgather/broadcast/reduce.
TEST(PlannerAlgorithms, RingsAndHierarchyOverFixtures) {
  for (const char* name : {"cpu_vm.json", "dgx_a100.json", "dgx_h100.json", "pcie_8gpu.json", "r750xa.json"}) {
    HostTopology host = topo_test::load_fixture(name);
    int gpus = std::max<int>(1, static_cast<int>(host.of_kind(NodeKind::kGpu).size()));
    for (int hosts : {1, 2, 3}) {
      ClusterTopology cluster;
      for (int h = 0; h < hosts; ++h) cluster.hosts.push_back(host);
      const int p = hosts * std::min(gpus, 8);
      std::vector<int> host_of(p);
      for (int r = 0; r < p; ++r) host_of[r] = r / std::min(gpus, 8);
      PlanContext ctx{0, p, 64};
      ctx.topology = &cluster;
      ctx.host_of_rank = &host_of;
      ctx.device_memory = true;
      for (std::vector<int> ring : ring_orders(ctx)) {
        std::sort(ring.begin(), ring.end());
        for (int r = 0; r < p; ++r) ASSERT_EQ(ring[r], r) << name << ": a ring is not a permutation";
      }
      for (Case c : {Case{Algorithm::kRing, CollKind::kAllreduce}, Case{Algorithm::kHierarchical, CollKind::kAllreduce},
                     Case{Algorithm::kRing, CollKind::kReduceScatter}, Case{Algorithm::kRing, CollKind::kAllgather},
                     Case{Algorithm::kRing, CollKind::kBroadcast}, Case{Algorithm::kRing, CollKind::kReduce}}) {
        CollSpec spec;
        spec.kind = c.kind;
        spec.algorithm = c.algo;
        spec.count = 5 * p + 1;
        spec.prescaled = reduction(c.kind);
        spec.postscaled = true;
        spec.root = p - 1;
        Status st = verify_collective(spec, ctx);
        ASSERT_TRUE(st.ok()) << name << " x" << hosts << ": " << describe(spec, p) << ": " << st.message();
      }
    }
  }
}

TEST(PlannerAlgorithms, OneRingPerNicAcrossDgxHosts) {
  ClusterTopology cluster;
  for (int h = 0; h < 2; ++h) cluster.hosts.push_back(topo_test::load_fixture("dgx_h100.json"));
  std::vector<int> host_of(16);
  for (int r = 0; r < 16; ++r) host_of[r] = r / 8;
  PlanContext ctx{0, 16, 1 << 20};
  ctx.topology = &cluster;
  ctx.host_of_rank = &host_of;
  ctx.device_memory = true;
  std::vector<std::vector<int>> rings = ring_orders(ctx);
  ASSERT_EQ(rings.size(), 8u);
  // Ring k leaves host 0 from local rank k-1 (mod 8): every rank's NIC carries one ring.
  std::vector<int> exits;
  for (const auto& ring : rings) exits.push_back(ring[7]);
  std::sort(exits.begin(), exits.end());
  EXPECT_EQ(exits, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  ctx.device_memory = false;  // host memory: one ring, ranks grouped by host
  EXPECT_EQ(ring_orders(ctx).size(), 1u);
}

}  // namespace
}  // namespace kolo
