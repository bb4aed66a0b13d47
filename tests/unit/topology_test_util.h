// Shared by the topology tests: where the fixtures are, and lookups that fail loudly.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "topology/discover.h"
#include "topology/graph.h"
#include "topology/paths.h"

namespace kolo::topo_test {

inline std::string fixture(const std::string& name) {
  return (std::filesystem::path(__FILE__).parent_path() / "../../topology/fixtures" / name).lexically_normal().string();
}

inline HostTopology load_fixture(const std::string& name) {
  Result<HostTopology> topo = load_topology_file(fixture(name));
  EXPECT_TRUE(topo.ok()) << topo.status().to_string();
  return topo.ok() ? topo.take() : HostTopology();
}

inline int node(const HostTopology& topo, const std::string& name) {
  int n = topo.find(name);
  EXPECT_GE(n, 0) << "no node " << name;
  return n;
}

}  // namespace kolo::topo_test
