// Every fixture, checked against the published specification of its machine.
#include <gtest/gtest.h>

#include "tests/unit/topology_test_util.h"

namespace kolo {
namespace {

using topo_test::load_fixture;
using topo_test::node;

std::string gpu(int i) { return "gpu" + std::to_string(i); }
std::string mlx(int i) { return "mlx5_" + std::to_string(i); }

// The PCIe switch a device hangs off (-1 when on a CPU root port).
int switch_of(const HostTopology& topo, int n) {
  for (int l : topo.links_of(n)) {
    const TopoLink& link = topo.links()[l];
    int other = link.a == n ? link.b : link.a;
    if (link.kind == LinkKind::kPcie && topo.node(other).kind == NodeKind::kPciSwitch) return other;
  }
  return -1;
}

TEST(TopoFixtures, DgxH100) {
  HostTopology topo = load_fixture("dgx_h100.json");
  ASSERT_EQ(topo.of_kind(NodeKind::kGpu).size(), 8u);
  ASSERT_EQ(topo.of_kind(NodeKind::kNic).size(), 8u);
  ASSERT_EQ(topo.of_kind(NodeKind::kCpu).size(), 2u);
  PathTable paths(topo);
  for (int a = 0; a < 8; ++a) {
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      const Path& p = paths.path(node(topo, gpu(a)), node(topo, gpu(b)));
      EXPECT_EQ(p.type, PathType::kNvl) << a << "->" << b;
      EXPECT_DOUBLE_EQ(p.bw_gbs, 450.0);  // 18 NVLink4 links x 25 GB/s per direction
    }
    int g = node(topo, gpu(a));
    std::vector<int> nearest = paths.nearest_nics(g);
    ASSERT_EQ(nearest.size(), 1u) << "gpu" << a;
    EXPECT_EQ(topo.node(nearest[0]).name, mlx(a));
    EXPECT_EQ(paths.path(g, nearest[0]).type, PathType::kPix);
    EXPECT_EQ(switch_of(topo, g), switch_of(topo, nearest[0]));  // behind its own PCIe switch
    EXPECT_DOUBLE_EQ(paths.path(g, nearest[0]).bw_gbs, 64.0);    // PCIe Gen5 x16
    EXPECT_DOUBLE_EQ(topo.node(nearest[0]).port_gbps, 400.0);
  }
  EXPECT_EQ(paths.path(node(topo, "gpu0"), node(topo, "mlx5_1")).type, PathType::kPhb);
  EXPECT_EQ(paths.path(node(topo, "gpu0"), node(topo, "mlx5_4")).type, PathType::kSys);
  EXPECT_EQ(paths.path(node(topo, "gpu0"), node(topo, "gpu0")).type, PathType::kLoc);
}

TEST(TopoFixtures, DgxA100) {
  HostTopology topo = load_fixture("dgx_a100.json");
  PathTable paths(topo);
  for (int a = 0; a < 8; ++a) {
    for (int b = a + 1; b < 8; ++b) {
      const Path& p = paths.path(node(topo, gpu(a)), node(topo, gpu(b)));
      EXPECT_EQ(p.type, PathType::kNvl);
      EXPECT_DOUBLE_EQ(p.bw_gbs, 300.0);  // 12 NVLink3 links x 25 GB/s
    }
    int g = node(topo, gpu(a));
    std::vector<int> nearest = paths.nearest_nics(g);
    ASSERT_EQ(nearest.size(), 1u);
    EXPECT_EQ(topo.node(nearest[0]).name, mlx(a));
    EXPECT_EQ(paths.path(g, nearest[0]).type, PathType::kPix);
    EXPECT_DOUBLE_EQ(paths.path(g, nearest[0]).bw_gbs, 32.0);  // PCIe Gen4 x16
  }
  // The other GPU's HCA in the same switch complex: two levels of switch.
  EXPECT_EQ(paths.path(node(topo, "gpu0"), node(topo, "mlx5_1")).type, PathType::kPxb);
  EXPECT_EQ(paths.path(node(topo, "gpu0"), node(topo, "mlx5_2")).type, PathType::kPhb);
  EXPECT_EQ(paths.path(node(topo, "gpu0"), node(topo, "mlx5_7")).type, PathType::kSys);
  EXPECT_DOUBLE_EQ(topo.node(node(topo, "mlx5_0")).port_gbps, 200.0);
}

TEST(TopoFixtures, Pcie8Gpu) {
  HostTopology topo = load_fixture("pcie_8gpu.json");
  PathTable paths(topo);
  auto p = [&](const char* a, const char* b) { return paths.path(node(topo, a), node(topo, b)); };
  EXPECT_EQ(p("gpu0", "gpu1").type, PathType::kPix);  // same switch
  EXPECT_DOUBLE_EQ(p("gpu0", "gpu1").bw_gbs, 32.0);
  EXPECT_EQ(p("gpu0", "gpu2").type, PathType::kPhb);  // other switch, same socket
  EXPECT_EQ(p("gpu0", "gpu4").type, PathType::kSys);  // other socket
  EXPECT_DOUBLE_EQ(p("gpu0", "gpu4").bw_gbs, 32.0);   // PCIe, not UPI (3 x 22.4), is the bottleneck
  EXPECT_EQ(p("gpu0", "mlx5_0").type, PathType::kPix);
  EXPECT_EQ(p("gpu7", "mlx5_3").type, PathType::kPix);
  const TopoLink& upi = topo.links()[topo.links_of(node(topo, "cpu0"))[0]];
  EXPECT_EQ(upi.kind, LinkKind::kInterSocket);
  EXPECT_NEAR(upi.bw_gbs, 67.2, 1e-9);
}

TEST(TopoFixtures, R750xa) {
  HostTopology topo = load_fixture("r750xa.json");
  PathTable paths(topo);
  auto p = [&](const char* a, const char* b) { return paths.path(node(topo, a), node(topo, b)); };
  EXPECT_EQ(p("gpu0", "gpu1").type, PathType::kNvl);  // NVLink bridge: 12 links
  EXPECT_DOUBLE_EQ(p("gpu0", "gpu1").bw_gbs, 300.0);
  EXPECT_EQ(p("gpu2", "gpu3").type, PathType::kNvl);
  EXPECT_EQ(p("gpu1", "gpu2").type, PathType::kSys);  // bridged pairs sit on different sockets
  EXPECT_DOUBLE_EQ(p("gpu1", "gpu2").bw_gbs, 32.0);
  EXPECT_EQ(p("gpu0", "mlx5_0").type, PathType::kPhb);
  EXPECT_EQ(p("gpu3", "mlx5_0").type, PathType::kSys);
  const TopoNode& nic = topo.node(node(topo, "mlx5_0"));
  EXPECT_EQ(nic.ports, 2);
  EXPECT_DOUBLE_EQ(nic.port_gbps, 100.0);
  EXPECT_EQ(nic.link_layer, "Ethernet");
  for (int g = 0; g < 4; ++g) {
    std::vector<int> nearest = paths.nearest_nics(node(topo, gpu(g)));
    ASSERT_EQ(nearest.size(), 1u);
    EXPECT_EQ(nearest[0], node(topo, "mlx5_0"));
  }
}

TEST(TopoFixtures, CpuVm) {
  HostTopology topo = load_fixture("cpu_vm.json");
  EXPECT_TRUE(topo.of_kind(NodeKind::kGpu).empty());
  ASSERT_EQ(topo.of_kind(NodeKind::kNic).size(), 1u);
  PathTable paths(topo);
  const Path& p = paths.path(node(topo, "eth0"), node(topo, "cpu0"));
  EXPECT_EQ(p.type, PathType::kPhb);
  EXPECT_EQ(p.bw_gbs, 0.0);  // virtio: no PCIe figures, so unknown rather than invented
}

TEST(TopoFixtures, ClusterOfTwoDgxH100) {
  ClusterTopology cluster;
  cluster.hosts.push_back(load_fixture("dgx_h100.json"));
  cluster.hosts.push_back(load_fixture("dgx_h100.json"));
  int g0 = cluster.hosts[0].find("gpu0");
  Path p = cluster_path(cluster, 0, g0, 1, g0);
  EXPECT_EQ(p.type, PathType::kNet);
  EXPECT_DOUBLE_EQ(p.bw_gbs, 50.0);  // one 400 Gb/s port
  EXPECT_EQ(cluster_path(cluster, 0, g0, 0, cluster.hosts[0].find("gpu1")).type, PathType::kNvl);
}

}  // namespace
}  // namespace kolo
