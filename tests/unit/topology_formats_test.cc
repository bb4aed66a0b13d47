// JSON round trips, NCCL XML import, and errors for malformed files.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "topology/json_format.h"
#include "topology/nccl_xml.h"
#include "topology/render.h"
#include "tests/unit/topology_test_util.h"

namespace kolo {
namespace {

using topo_test::fixture;
using topo_test::load_fixture;
using topo_test::node;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(TopoJson, RoundTripsEveryFixture) {
  for (const char* name : {"dgx_h100.json", "dgx_a100.json", "pcie_8gpu.json", "r750xa.json", "cpu_vm.json"}) {
    HostTopology topo = load_fixture(name);
    std::string once = topology_to_json(topo);
    Result<HostTopology> again = topology_from_json(once);
    ASSERT_TRUE(again.ok()) << name << ": " << again.status().to_string();
    again.value().sources = topo.sources;
    EXPECT_EQ(topology_to_json(again.value()), once) << name;
    EXPECT_EQ(again.value().nodes().size(), topo.nodes().size());
    EXPECT_EQ(again.value().links().size(), topo.links().size());
  }
}

TEST(TopoJson, ClusterRoundTrip) {
  ClusterTopology cluster;
  cluster.hosts.push_back(load_fixture("dgx_h100.json"));
  cluster.hosts.push_back(load_fixture("cpu_vm.json"));
  std::string text = cluster_to_json(cluster);
  Result<ClusterTopology> back = cluster_from_json(text);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_EQ(back.value().hosts.size(), 2u);
  EXPECT_EQ(cluster_to_json(back.value()), text);
}

TEST(TopoJson, ErrorsNameTheField) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"{\"nodes\": [{\"name\": \"a\", \"kind\": \"cpu\"},", "line 1"},
      {"[]", "topology: expected an object"},
      {"{}", "topology.nodes: missing"},
      {"{\"nodes\": [{\"kind\": \"cpu\"}]}", "topology.nodes[0].name: missing"},
      {"{\"nodes\": [{\"name\": \"a\", \"kind\": \"tpu\"}]}", "topology.nodes[0].kind: 'tpu'"},
      {"{\"nodes\": [{\"name\": \"a\", \"kind\": \"cpu\", \"cores\": -3}]}", "topology.nodes[0].cores"},
      {"{\"nodes\": [{\"name\": \"a\", \"kind\": \"cpu\"}, {\"name\": \"a\", \"kind\": \"gpu\"}]}", "used twice"},
      {"{\"nodes\": [{\"name\": \"a\", \"kind\": \"cpu\"}], \"links\": [{\"a\": \"a\", \"b\": \"z\", \"kind\": \"pcie\"}]}",
       "topology.links[0].b: no node named 'z'"},
      {"{\"nodes\": [{\"name\": \"a\", \"kind\": \"cpu\"}, {\"name\": \"b\", \"kind\": \"gpu\"}], "
       "\"links\": [{\"a\": \"a\", \"b\": \"b\", \"kind\": \"pcie\", \"bw_gbs\": \"fast\"}]}",
       "topology.links[0].bw_gbs: expected a number"},
      {"{\"version\": 2, \"nodes\": []}", "topology.version: 2"},
  };
  for (const Case& c : cases) {
    Result<HostTopology> topo = topology_from_json(c.text);
    ASSERT_FALSE(topo.ok()) << c.text;
    EXPECT_NE(topo.status().message().find(c.expect), std::string::npos)
        << c.text << " -> " << topo.status().message();
  }
}

TEST(TopoNcclXml, ImportsAnNcclTopologyFile) {
  HostTopology topo = load_fixture("nccl_topo.xml");
  ASSERT_EQ(topo.of_kind(NodeKind::kGpu).size(), 4u);
  ASSERT_EQ(topo.of_kind(NodeKind::kNic).size(), 3u);
  ASSERT_EQ(topo.of_kind(NodeKind::kCpu).size(), 2u);
  PathTable paths(topo);
  auto p = [&](const char* a, const char* b) { return paths.path(node(topo, a), node(topo, b)); };
  EXPECT_EQ(p("gpu0", "gpu1").type, PathType::kNvl);
  EXPECT_DOUBLE_EQ(p("gpu0", "gpu1").bw_gbs, 300.0);  // 6 NVSwitches x 2 links, summed
  EXPECT_EQ(p("gpu2", "gpu3").type, PathType::kNvl);    // bridged pair, listed from both sides
  EXPECT_DOUBLE_EQ(p("gpu2", "gpu3").bw_gbs, 300.0);
  EXPECT_EQ(p("gpu0", "mlx5_0").type, PathType::kPix);
  EXPECT_DOUBLE_EQ(p("gpu0", "mlx5_0").bw_gbs, 32.0);  // 16 GT/s x16
  EXPECT_EQ(p("gpu0", "mlx5_1").type, PathType::kPxb);
  EXPECT_EQ(p("gpu0", "gpu2").type, PathType::kSys);
  EXPECT_EQ(p("gpu2", "eth0").type, PathType::kPhb);
  EXPECT_DOUBLE_EQ(topo.node(node(topo, "mlx5_0")).port_gbps, 200.0);
  EXPECT_EQ(topo.node(node(topo, "mlx5_0")).gdr, "nvidia_peermem");
  EXPECT_EQ(topo.node(node(topo, "gpu2")).bus_id, "0000:b1:00.0");
  // And it survives the trip into kolo's own format.
  Result<HostTopology> again = topology_from_json(topology_to_json(topo));
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again.value().links().size(), topo.links().size());
}

TEST(TopoNcclXml, ErrorsNameTheLine) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"<system>\n<cpu numaid=\"0\">\n<pci busid=\"x\"", "NCCL XML line 3"},
      {"<nothing/>", "no <system>"},
      {"<system version=\"1\">\n<cpu numaid=\"zero\"/>\n</system>", "line 2: <cpu> attribute numaid='zero'"},
      {"<system>\n<cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x030200\" link_width=\"99\"><gpu dev=\"0\"/></pci>\n</cpu></system>",
       "line 3: <pci> attribute link_width='99'"},
      {"<system>\n<cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x030200\"><gpu dev=\"0\" sm=\"80\">\n"
       "<nvlink target=\"0000:99:00.0\" count=\"4\" tclass=\"0x030200\"/></gpu></pci>\n</cpu></system>",
       "line 4: <nvlink> target='0000:99:00.0'"},
  };
  for (const Case& c : cases) {
    Result<HostTopology> topo = topology_from_nccl_xml(c.text);
    ASSERT_FALSE(topo.ok()) << c.text;
    EXPECT_NE(topo.status().message().find(c.expect), std::string::npos)
        << c.text << " -> " << topo.status().message();
  }
}

// Found by the fuzzer: names in XML need not be UTF-8 nor short, and what kolo writes it
// must read back.
TEST(TopoNcclXml, OddStringsStillRoundTripThroughJson) {
  std::string xml = "<system><cpu numaid=\"0\" vendor=\"" + std::string(5000, 'x') +
                    "\"><nic><net name=\"bad\xff\xfename\" speed=\"1000\"/></nic></cpu></system>";
  Result<HostTopology> topo = topology_from_nccl_xml(xml);
  ASSERT_TRUE(topo.ok()) << topo.status().to_string();
  Result<HostTopology> again = topology_from_json(topology_to_json(topo.value()));
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again.value().of_kind(NodeKind::kNic).size(), 1u);
}

TEST(TopoRender, MatrixAndDotOfDgxH100) {
  HostTopology topo = load_fixture("dgx_h100.json");
  std::string matrix = topology_matrix(topo);
  EXPECT_NE(matrix.find("NV18"), std::string::npos);
  EXPECT_NE(matrix.find("PIX"), std::string::npos);
  std::string dot = topology_dot(topo);
  EXPECT_EQ(dot.rfind("graph topology {", 0), 0u);
  EXPECT_NE(dot.find("NVLink4 x18 450 GB/s"), std::string::npos);
  std::string line = topology_one_line(topo);
  EXPECT_NE(line.find("8 GPU(s)"), std::string::npos) << line;
  EXPECT_NE(line.find("8 NIC(s) 400 Gb/s InfiniBand GDR"), std::string::npos) << line;
}

}  // namespace
}  // namespace kolo
