// Discovery on this machine (whatever it is), and the KOLO_TOPO_FILE / DUMP_FILE variables.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "topology/json_format.h"
#include "tests/unit/topology_test_util.h"

namespace kolo {
namespace {

TEST(TopoDiscover, FindsAtLeastTheCpusAndNeverFails) {
  HostTopology topo = discover_machine();
  EXPECT_FALSE(topo.host.empty());
  EXPECT_GE(topo.of_kind(NodeKind::kCpu).size(), 1u);
  for (const TopoLink& l : topo.links()) {
    ASSERT_GE(l.a, 0);
    ASSERT_LT(l.a, static_cast<int>(topo.nodes().size()));
    ASSERT_GE(l.b, 0);
    ASSERT_LT(l.b, static_cast<int>(topo.nodes().size()));
  }
  // Every device reaches a CPU.
  PathTable paths(topo);
  int cpu = topo.of_kind(NodeKind::kCpu)[0];
  for (NodeKind kind : {NodeKind::kGpu, NodeKind::kNic}) {
    for (int n : topo.of_kind(kind)) EXPECT_NE(paths.path(n, cpu).type, PathType::kDis) << topo.node(n).name;
  }
  Result<HostTopology> again = topology_from_json(topology_to_json(topo));
  ASSERT_TRUE(again.ok()) << again.status().to_string();
}

// The hwloc walk on a PCI tree this machine lacks: hwloc reads it from HWLOC_XMLFILE.
TEST(TopoDiscover, HwlocWalkMergesSwitchPortsAndSeesThroughRootPorts) {
  ::setenv("HWLOC_XMLFILE", topo_test::fixture("hwloc_gpu_switch.xml").c_str(), 1);
  HostTopology topo = discover_machine();
  ::unsetenv("HWLOC_XMLFILE");
  if (topo.sources.find("hwloc") == std::string::npos) GTEST_SKIP() << "kolo built without hwloc";
  int gpu = topo.find_bus("0000:12:00.0");
  int nic = topo.find_bus("0000:13:00.0");
  ASSERT_GE(gpu, 0);
  ASSERT_GE(nic, 0);
  EXPECT_EQ(topo.node(nic).name, "mlx5_0");  // the verbs name, not the netdev
  // Upstream and downstream ports of one switch are one switch; the root port is the CPU's.
  EXPECT_EQ(topo.of_kind(NodeKind::kPciSwitch).size(), 1u);
  PathTable paths(topo);
  EXPECT_EQ(paths.path(gpu, nic).type, PathType::kPix);
  EXPECT_NEAR(paths.path(gpu, nic).bw_gbs, 63.0, 0.1);  // hwloc's link speed when sysfs has none
  ASSERT_EQ(paths.nearest_nics(gpu).size(), 1u);
  EXPECT_EQ(paths.nearest_nics(gpu)[0], nic);
}

TEST(TopoDiscover, TopoFileAndDumpFile) {
  std::string dump = (std::filesystem::temp_directory_path() / "kolo_topo_dump_test.json").string();
  ::setenv("KOLO_TOPO_FILE", topo_test::fixture("r750xa.json").c_str(), 1);
  ::setenv("KOLO_TOPO_DUMP_FILE", dump.c_str(), 1);
  Result<HostTopology> topo = host_topology();
  ::unsetenv("KOLO_TOPO_FILE");
  ::unsetenv("KOLO_TOPO_DUMP_FILE");
  ASSERT_TRUE(topo.ok()) << topo.status().to_string();
  EXPECT_EQ(topo.value().of_kind(NodeKind::kGpu).size(), 4u);
  Result<HostTopology> dumped = load_topology_file(dump);
  std::remove(dump.c_str());
  ASSERT_TRUE(dumped.ok()) << dumped.status().to_string();
  EXPECT_EQ(dumped.value().links().size(), topo.value().links().size());
}

TEST(TopoDiscover, BadTopoFileIsAnErrorNamingIt) {
  ::setenv("KOLO_TOPO_FILE", "/nonexistent/topo.json", 1);
  Result<HostTopology> topo = host_topology();
  ::unsetenv("KOLO_TOPO_FILE");
  ASSERT_FALSE(topo.ok());
  EXPECT_NE(topo.status().message().find("/nonexistent/topo.json"), std::string::npos);
}

}  // namespace
}  // namespace kolo
