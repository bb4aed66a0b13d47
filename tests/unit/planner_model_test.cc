// The cost model and the selector: predictions against the published DGX H100 figures
// (docs/planner.md), the selector's guarantee (never 10 % or more slower than the best
// prediction), forcing and fallback, and the simulator's deadlock detection.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/planner/compressed_model.h"
#include "engine/planner/device_ipc_model.h"
#include "engine/planner/plan.h"
#include "engine/planner/selector.h"
#include "engine/planner/simulate.h"
#include "kernels/flagged_body.h"
#include "topology_test_util.h"

namespace kolo {
namespace {

struct Machine {
  ClusterTopology cluster;
  std::vector<int> host_of;
  PlanContext ctx;
  Machine(const char* fixture, int hosts, int per_host, bool device) {
    for (int h = 0; h < hosts; ++h) cluster.hosts.push_back(topo_test::load_fixture(fixture));
    for (int r = 0; r < hosts * per_host; ++r) host_of.push_back(r / per_host);
    ctx = PlanContext{0, hosts * per_host, 1 << 20};
    ctx.topology = &cluster;
    ctx.host_of_rank = &host_of;
    ctx.device_memory = device;
  }
};

CollSpec allreduce_bytes(size_t bytes) {
  CollSpec spec;
  spec.count = bytes / 4;
  return spec;
}

// A collective of `bytes` (FLOAT32) on device buffers.
CollSpec device_spec(size_t bytes, CollKind kind = CollKind::kAllreduce) {
  CollSpec spec = allreduce_bytes(bytes);
  spec.kind = kind;
  spec.device = true;
  return spec;
}

// Rank `rank`'s view of a device allgatherv of these FLOAT32 counts, packed in rank order:
// its own count differs from the others'.
CollSpec device_allgatherv(const std::vector<size_t>& counts, int rank) {
  CollSpec spec = device_spec(0, CollKind::kAllgatherv);
  spec.counts = counts;
  spec.displs.assign(counts.size(), 0);
  for (size_t r = 1; r < counts.size(); ++r) spec.displs[r] = spec.displs[r - 1] + counts[r - 1];
  spec.count = counts[rank];
  return spec;
}

double ring_busbw(Machine& m, size_t bytes) {
  Result<double> us = predict_us(allreduce_bytes(bytes), m.ctx, Algorithm::kRing, CostModel(m.ctx));
  EXPECT_TRUE(us.ok()) << us.status().message();
  const int p = m.ctx.size;
  return us.ok() ? static_cast<double>(bytes) / (us.value() * 1e3) * 2.0 * (p - 1) / p : 0;
}

TEST(PlannerModel, DgxH100RingAllreduceMatchesPublishedBusbw) {
  Machine one("dgx_h100.json", 1, 8, true);
  EXPECT_NEAR(ring_busbw(one, size_t{1} << 30), 370, 0.15 * 370);  // NVIDIA/nccl #1455
  Machine two("dgx_h100.json", 2, 8, true);
  EXPECT_NEAR(ring_busbw(two, size_t{1} << 30), 340, 0.15 * 330);  // NVIDIA/nccl #1221
}

TEST(PlannerModel, SelectorNeverPicksTenPercentSlowerThanItsBest) {
  int checked = 0;
  for (auto [fixture, hosts, per_host, device] :
       {std::tuple{"dgx_h100.json", 1, 8, true}, {"dgx_h100.json", 2, 4, true}, {"pcie_8gpu.json", 1, 8, true},
        {"r750xa.json", 3, 4, true}, {"cpu_vm.json", 1, 4, false}, {"cpu_vm.json", 2, 2, false}}) {
    Machine m(fixture, hosts, per_host, device);
    CostModel model(m.ctx);
    for (CollKind kind : {CollKind::kAllreduce, CollKind::kAllgather, CollKind::kReduceScatter, CollKind::kBroadcast,
                          CollKind::kReduce}) {
      for (size_t bytes = 256; bytes <= (size_t{64} << 20); bytes *= 8) {
        CollSpec spec = allreduce_bytes(bytes);
        spec.kind = kind;
        std::vector<Candidate> all = predict_all(spec, m.ctx, model);
        ASSERT_GE(all.size(), 2u) << fixture << " " << coll_name(kind);
        double best = all[0].us, chosen_us = -1;
        Algorithm chosen = choose_algorithm(spec, m.ctx);
        for (const Candidate& c : all) {
          best = std::min(best, c.us);
          if (c.algorithm == chosen) chosen_us = c.us;
        }
        ASSERT_GT(chosen_us, 0) << algorithm_name(chosen) << " was not a candidate";
        EXPECT_LT(chosen_us, 1.1 * best) << fixture << " " << coll_name(kind) << " " << bytes << " B: "
                                         << algorithm_name(chosen);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(PlannerModel, LatencyAlgorithmsForSmallBandwidthAlgorithmsForLarge) {
  Machine m("dgx_h100.json", 2, 8, true);
  const Algorithm small = choose_algorithm(allreduce_bytes(1024), m.ctx);
  EXPECT_TRUE(small == Algorithm::kDirect || small == Algorithm::kTwoShot || small == Algorithm::kHalvingDoubling)
      << algorithm_name(small);
  const Algorithm large = choose_algorithm(allreduce_bytes(size_t{1} << 30), m.ctx);
  EXPECT_TRUE(large == Algorithm::kRing || large == Algorithm::kHierarchical) << algorithm_name(large);
}

TEST(PlannerModel, ForcedAlgorithmWinsWhereItAppliesElseFallsBack) {
  Machine m("dgx_h100.json", 1, 8, true);
  m.ctx.forced = Algorithm::kTree;
  EXPECT_EQ(choose_algorithm(allreduce_bytes(1 << 20), m.ctx), Algorithm::kTree);
  m.ctx.forced = Algorithm::kHierarchical;  // one host: no hierarchy
  EXPECT_NE(choose_algorithm(allreduce_bytes(1 << 20), m.ctx), Algorithm::kHierarchical);
  CollSpec gather = allreduce_bytes(1 << 20);
  gather.kind = CollKind::kAllgatherv;
  gather.counts.assign(8, 10);
  gather.displs = {0, 10, 20, 30, 40, 50, 60, 70};
  m.ctx.forced = Algorithm::kHalvingDoubling;  // no allgatherv
  Algorithm a = choose_algorithm(gather, m.ctx);
  EXPECT_TRUE(a == Algorithm::kRing || a == Algorithm::kDirect);
}

TEST(PlannerModel, SimulatorReportsDeadlock) {
  CollSpec spec = allreduce_bytes(4096);
  PlanContext ctx{0, 3, 1 << 20};
  std::vector<Schedule> s = schedules_for_all(spec, ctx, Algorithm::kRing);
  ASSERT_TRUE(simulate_us(s, CostModel(ctx)).ok());
  for (Step& step : s[1].steps) {
    if (step.kind == StepKind::kRecv) { step.tag += 1000; break; }
  }
  Result<double> broken = simulate_us(s, CostModel(ctx));
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("deadlock"), std::string::npos) << broken.status().message();
}

TEST(PlannerModel, MoreBytesNeverPredictFaster) {
  Machine m("cpu_vm.json", 1, 4, false);
  CostModel model(m.ctx);
  for (Algorithm a : {Algorithm::kRing, Algorithm::kDirect, Algorithm::kTree, Algorithm::kHalvingDoubling}) {
    double prev = 0;
    for (size_t bytes = 64; bytes <= (size_t{16} << 20); bytes *= 4) {
      Result<double> us = predict_us(allreduce_bytes(bytes), m.ctx, a, model);
      ASSERT_TRUE(us.ok());
      EXPECT_GE(us.value(), prev * 0.98) << algorithm_name(a) << " at " << bytes;
      prev = us.value();
    }
  }
}

// The device_ipc choice (device_ipc_model.h): one-shot always at 2 ranks; on 8 NVLink
// GPUs two-shot from about 100-200 KB; over PCIe (slower links) two-shot from smaller
// sizes; ranks sharing one GPU share its bandwidth; compression counts wire bytes; the
// call or KOLO_ALGO forces either.
TEST(PlannerModel, DeviceIpcOneShotOrTwoShotFromTheDeviceLinks) {
  auto choose = [](Machine& m, size_t bytes, DType wire = DType::kCount, Algorithm forced = Algorithm::kAuto) {
    CollSpec spec = allreduce_bytes(bytes);
    spec.device = true;
    spec.wire = wire;
    spec.algorithm = forced;
    return choose_device_ipc_algorithm(spec, m.ctx);
  };
  Machine pair("dgx_h100.json", 1, 2, true);
  for (size_t bytes : {size_t{1} << 10, size_t{1} << 20, size_t{1} << 30}) EXPECT_EQ(choose(pair, bytes), Algorithm::kOneShot);
  Machine eight("dgx_h100.json", 1, 8, true);
  EXPECT_EQ(choose(eight, 32 << 10), Algorithm::kOneShot);
  EXPECT_EQ(choose(eight, 1 << 20), Algorithm::kTwoShot);
  // The crossover: the smallest power-of-two size that goes two-shot.
  auto crossover = [&](Machine& m, DType wire = DType::kCount) {
    size_t b = 1024;
    while (b < (size_t{1} << 34) && choose(m, b, wire) == Algorithm::kOneShot) b *= 2;
    return b;
  };
  // With a barrier a kernel that waits for its peers (3.7 us, params.cc: calibrated on one
  // H200) and two-shot's n + 1 kernels, the crossover on 8 x H100 is near 1 MB.
  const size_t nvlink = crossover(eight);
  EXPECT_GE(nvlink, size_t{256} << 10);
  EXPECT_LE(nvlink, size_t{2} << 20);
  Machine pcie("pcie_8gpu.json", 1, 8, true);
  EXPECT_LT(crossover(pcie), nvlink);
  // Compressed to fp16, the same count crosses half the bytes: it turns two-shot later.
  EXPECT_EQ(crossover(eight, DType::kFloat16), 2 * nvlink);
  // Two ranks on each GPU (16 ranks on 8): each has half its GPU's links, so a large
  // one-shot takes (15 / 7) x 2 as long as on 8 ranks.
  Machine shared("dgx_h100.json", 1, 16, true);
  PlanContext device = eight.ctx, device_shared = shared.ctx;
  const double t8 = predict_device_ipc_allreduce(size_t{1} << 30, CostModel(device)).one_shot_us;
  const double t16 = predict_device_ipc_allreduce(size_t{1} << 30, CostModel(device_shared)).one_shot_us;
  EXPECT_NEAR(t16 / t8, 30.0 / 7.0, 0.05);
  EXPECT_EQ(choose(eight, 1 << 20, DType::kCount, Algorithm::kOneShot), Algorithm::kOneShot);
  EXPECT_EQ(choose(pair, 1 << 10, DType::kCount, Algorithm::kTwoShot), Algorithm::kTwoShot);
  eight.ctx.forced = Algorithm::kTwoShot;
  EXPECT_EQ(choose(eight, 1 << 10), Algorithm::kTwoShot);
  // Other collectives run one pass.
  CollSpec bcast = allreduce_bytes(1 << 30);
  bcast.kind = CollKind::kBroadcast;
  EXPECT_EQ(choose_device_ipc_algorithm(bcast, eight.ctx), Algorithm::kOneShot);
  // No GPUs in the topology (the emulated device): host memory's figures, still a crossover.
  Machine host("dgx_h100.json", 1, 3, false);
  host.ctx.topology = nullptr;
  const size_t emulated = crossover(host);
  EXPECT_GT(emulated, size_t{1} << 10);
  EXPECT_LT(emulated, size_t{1} << 30);
}

// The ring on device_ipc: forced, it runs (compressed calls keep two-shot, a ring would
// round partial sums); by the model only where the neighbours' links beat the slowest
// path between any two ranks, never over NVSwitch (every pair alike).
TEST(PlannerModel, DeviceIpcRingWhereTheNeighboursAreFaster) {
  auto spec_of = [](size_t bytes) { return device_spec(bytes); };
  Machine eight("dgx_h100.json", 1, 8, true);
  for (size_t bytes : {size_t{1} << 10, size_t{1} << 20, size_t{1} << 30}) {
    EXPECT_NE(choose_device_ipc_algorithm(spec_of(bytes), eight.ctx), Algorithm::kRing) << bytes;
  }
  CollSpec forced = spec_of(1 << 20);
  forced.algorithm = Algorithm::kRing;
  EXPECT_EQ(choose_device_ipc_algorithm(forced, eight.ctx), Algorithm::kRing);
  forced.wire = DType::kFloat16;
  EXPECT_EQ(choose_device_ipc_algorithm(forced, eight.ctx), Algorithm::kTwoShot);
  Machine pcie("pcie_8gpu.json", 1, 8, true);
  PlanContext device = pcie.ctx;
  device.device_memory = true;
  const DeviceIpcCost big = predict_device_ipc_allreduce(size_t{1} << 30, CostModel(device));
  // Links alike (one PCIe tree): the ring moves as many bytes per rank as two-shot over
  // the same bandwidth, with more barriers.
  EXPECT_GT(big.ring_us, big.two_shot_us);
  EXPECT_LT(big.ring_us, big.one_shot_us);
}

// The one-kernel form (protocol flagged) where the model says it costs least and the
// call fits its box: on 2 and 8 H100s every size up to the box (one launch and one wait
// against a copy, a barrier and a reduce), with its own figures checked against the slot
// programs'; never past the box, nor where the ranks wait on the host or an algorithm
// other than one-shot is forced; on the emulated device the GPU's plan.
TEST(PlannerModel, FlaggedWhereOneKernelCostsLeast) {
  auto spec_of = [](size_t bytes, CollKind kind = CollKind::kAllreduce) { return device_spec(bytes, kind); };
  for (int n : {2, 8}) {
    Machine m("dgx_h100.json", 1, n, true);
    m.ctx.device_ipc = true;
    m.ctx.flagged_bytes = kFlaggedMaxBytes;
    for (size_t bytes : {size_t{8}, size_t{4} << 10, kFlaggedMaxBytes}) {
      EXPECT_TRUE(device_ipc_flagged(spec_of(bytes), m.ctx)) << n << " ranks, " << bytes;
      PlanContext device = m.ctx;
      device.device_memory = true;
      const DeviceIpcCost cost = predict_device_ipc_allreduce(bytes, CostModel(device));
      EXPECT_LT(cost.flagged_us, cost.one_shot_us + cost.copy_in_us) << n << " ranks, " << bytes;
    }
    EXPECT_FALSE(device_ipc_flagged(spec_of(kFlaggedMaxBytes + 4), m.ctx)) << n;
    EXPECT_EQ(plan(spec_of(1 << 10), m.ctx).protocol, Protocol::kFlagged) << n;
    EXPECT_TRUE(device_ipc_flagged(spec_of(1 << 10, CollKind::kBroadcast), m.ctx)) << n;
    CollSpec two = spec_of(1 << 10);
    two.algorithm = Algorithm::kTwoShot;
    EXPECT_FALSE(device_ipc_flagged(two, m.ctx)) << n;
    m.ctx.device_barrier = DeviceBarrierSetting::kHost;
    EXPECT_FALSE(device_ipc_flagged(spec_of(1 << 10), m.ctx)) << n;
  }
  // An allgatherv's own count differs from rank to rank: every rank decides alike, from the
  // longest rank's bytes (over PCIe the model's break-even lies inside the box).
  for (int n : {2, 8}) {
    Machine pcie("pcie_8gpu.json", 1, n, true);
    pcie.ctx.device_ipc = true;
    pcie.ctx.flagged_bytes = kFlaggedMaxBytes;
    for (size_t small : {size_t{256}, size_t{1} << 10, size_t{4} << 10}) {
      std::vector<size_t> counts(n, small);
      counts[n - 1] = kFlaggedMaxBytes / 4;
      EXPECT_EQ(device_ipc_flagged(device_allgatherv(counts, 0), pcie.ctx),
                device_ipc_flagged(device_allgatherv(counts, n - 1), pcie.ctx))
          << n << " ranks, " << small;
    }
  }
  // Were the box much larger, the slots would win: the flags halve the bytes per word.
  Machine eight("dgx_h100.json", 1, 8, true);
  eight.ctx.device_ipc = true;
  eight.ctx.flagged_bytes = size_t{1} << 30;
  EXPECT_FALSE(device_ipc_flagged(spec_of(size_t{64} << 20), eight.ctx));
  Machine host("dgx_h100.json", 1, 3, false);
  host.ctx.topology = nullptr;
  host.ctx.device_ipc = true;
  host.ctx.flagged_bytes = kFlaggedMaxBytes;
  EXPECT_TRUE(device_ipc_flagged(spec_of(kFlaggedMaxBytes), host.ctx));
}

// Processes time-slicing one GPU (host barriers by auto's choice): calls below 1 MB are
// staged, larger ones and compressed ones stay on device_ipc; a forced host barrier keeps
// every size there; an allgatherv decides by its longest rank's bytes on every rank.
TEST(PlannerModel, TimeSlicedProcessesStageSmallDeviceCalls) {
  auto spec_of = [](size_t bytes) { return device_spec(bytes); };
  Machine m("dgx_h100.json", 1, 2, true);
  m.ctx.device_ipc = true;
  m.ctx.device_setup = DeviceSetup::kMapped;
  m.ctx.flagged_bytes = kFlaggedMaxBytes;
  m.ctx.device_barrier = DeviceBarrierSetting::kHost;
  EXPECT_EQ(plan(spec_of(1 << 10), m.ctx).executor, ExecutorKind::kDeviceIpc);  // forced: every size
  EXPECT_EQ(plan(spec_of(1 << 10), m.ctx).barrier, BarrierKind::kDeviceHost);
  m.ctx.device_barrier = DeviceBarrierSetting::kAuto;
  m.ctx.device_processes_time_slice = true;
  for (size_t bytes : {size_t{8}, size_t{64} << 10, (size_t{1} << 20) - 4}) {
    EXPECT_EQ(plan(spec_of(bytes), m.ctx).executor, ExecutorKind::kDeviceStaged) << bytes;
  }
  const Plan big = plan(spec_of(size_t{1} << 20), m.ctx);
  EXPECT_EQ(big.executor, ExecutorKind::kDeviceIpc);
  EXPECT_EQ(big.barrier, BarrierKind::kDeviceHost);
  CollSpec compressed = spec_of(1 << 10);
  compressed.wire = DType::kFloat16;
  EXPECT_EQ(plan(compressed, m.ctx).executor, ExecutorKind::kDeviceIpc);
  for (int rank : {0, 1}) {
    EXPECT_EQ(plan(device_allgatherv({16, size_t{1} << 18}, rank), m.ctx).executor, ExecutorKind::kDeviceIpc) << rank;
  }
}

// Registered buffers (kolo_mem_register): an allreduce is read in place (two-shot, a third
// barrier, no copy into the slot) once the copy it saves outweighs the barrier it adds;
// the other collectives that can always are; never alltoall, a compressed or a prescaled
// call; a forced algorithm is honoured (two-shot reads in place, one-shot uses the slots).
TEST(PlannerModel, RegisteredBuffersReadInPlaceWhenItPays) {
  auto spec_of = [](size_t bytes, CollKind kind = CollKind::kAllreduce) {
    CollSpec spec = device_spec(bytes, kind);
    spec.registered = true;
    return spec;
  };
  for (int n : {2, 8}) {
    Machine m("dgx_h100.json", 1, n, true);
    m.ctx.device_ipc = true;
    EXPECT_FALSE(device_ipc_zero_copy(spec_of(1 << 10), m.ctx)) << n;
    EXPECT_TRUE(device_ipc_zero_copy(spec_of(size_t{256} << 20), m.ctx)) << n;
    EXPECT_EQ(choose_device_ipc_algorithm(spec_of(size_t{256} << 20), m.ctx), Algorithm::kTwoShot) << n;
    const Plan p = plan(spec_of(size_t{256} << 20), m.ctx);
    EXPECT_EQ(p.executor, ExecutorKind::kDeviceIpc);
    EXPECT_TRUE(p.zero_copy());
    CollSpec unregistered = spec_of(size_t{256} << 20);
    unregistered.registered = false;
    EXPECT_FALSE(plan(unregistered, m.ctx).zero_copy());
    for (CollKind kind : {CollKind::kReduce, CollKind::kBroadcast, CollKind::kAllgather, CollKind::kReduceScatter}) {
      EXPECT_TRUE(device_ipc_zero_copy(spec_of(64, kind), m.ctx)) << coll_name(kind);
    }
    EXPECT_FALSE(device_ipc_zero_copy(spec_of(size_t{256} << 20, CollKind::kAlltoall), m.ctx));
    CollSpec compressed = spec_of(size_t{256} << 20), prescaled = compressed;
    compressed.wire = DType::kFloat16;
    prescaled.prescaled = true;
    EXPECT_FALSE(device_ipc_zero_copy(compressed, m.ctx));
    EXPECT_FALSE(device_ipc_zero_copy(prescaled, m.ctx));
    CollSpec one = spec_of(size_t{256} << 20), two = spec_of(1 << 10);
    one.algorithm = Algorithm::kOneShot;
    two.algorithm = Algorithm::kTwoShot;
    EXPECT_FALSE(device_ipc_zero_copy(one, m.ctx));
    EXPECT_TRUE(device_ipc_zero_copy(two, m.ctx));
  }
  // On host memory's figures (the emulated device) as well: slots for small calls.
  Machine host("dgx_h100.json", 1, 3, false);
  host.ctx.topology = nullptr;
  EXPECT_FALSE(device_ipc_zero_copy(spec_of(64), host.ctx));
  EXPECT_TRUE(device_ipc_zero_copy(spec_of(size_t{64} << 20), host.ctx));
}


// Compressed allreduce across hosts: the hierarchical form (fp32 in the host, 1/L of the
// bytes on the network) where the network is slow, the flat two-shot where it is as fast
// as the host's own links or there is one rank per host; the cost counts wire bytes.
TEST(PlannerModel, CompressedHierarchicalWhereTheNetworkIsSlow) {
  auto machine = [](int hosts, int per_host, double net_gbs) {
    auto m = std::make_unique<Machine>("cpu_vm.json", hosts, per_host, false);
    for (HostTopology& h : m->cluster.hosts) {
      for (size_t l = 0; l < h.links().size(); ++l) {
        if (h.links()[l].kind == LinkKind::kNet) h.set_link_bandwidth(static_cast<int>(l), net_gbs);
      }
    }
    return m;
  };
  CollSpec spec = allreduce_bytes(64 << 20);
  spec.wire = DType::kFloat16;
  auto slow = machine(2, 2, 0.25 / 0.7);  // a 2 Gbit/s link, as calibrated
  const CompressedCost c = predict_compressed_allreduce(spec, CostModel(slow->ctx));
  EXPECT_GT(c.hierarchical_us, 0);
  EXPECT_LT(c.hierarchical_us * 1.3, c.flat_us);
  EXPECT_EQ(plan(spec, slow->ctx).executor, ExecutorKind::kCompressed);
  EXPECT_EQ(plan(spec, slow->ctx).algorithm, Algorithm::kHierarchical);
  // fp8 moves half of fp16's bytes: faster still, in both forms.
  CollSpec fp8 = spec;
  fp8.wire = DType::kFloat8E4M3;
  const CompressedCost c8 = predict_compressed_allreduce(fp8, CostModel(slow->ctx));
  EXPECT_LT(c8.flat_us, c.flat_us);
  EXPECT_LT(c8.hierarchical_us, c.hierarchical_us);

  auto fast = machine(2, 2, 100.0);  // the network as fast as the host's links
  EXPECT_EQ(plan(spec, fast->ctx).algorithm, Algorithm::kTwoShot);
  auto single = machine(2, 1, 0.25 / 0.7);  // one rank per host: one level only
  EXPECT_EQ(predict_compressed_allreduce(spec, CostModel(single->ctx)).hierarchical_us, 0);
  EXPECT_EQ(plan(spec, single->ctx).algorithm, Algorithm::kTwoShot);
  // Forced either way, where the form exists.
  spec.algorithm = Algorithm::kTwoShot;
  EXPECT_EQ(plan(spec, slow->ctx).algorithm, Algorithm::kTwoShot);
  spec.algorithm = Algorithm::kHierarchical;
  EXPECT_EQ(plan(spec, fast->ctx).algorithm, Algorithm::kHierarchical);
  EXPECT_EQ(plan(spec, single->ctx).algorithm, Algorithm::kTwoShot);
}

}  // namespace
}  // namespace kolo
