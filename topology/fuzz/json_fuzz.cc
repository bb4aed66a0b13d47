// libFuzzer target: kolo's topology JSON (KOLO_TOPO_FILE), host and cluster forms.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "topology/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kolo::Result<kolo::HostTopology> topo = kolo::topology_from_json(text);
  if (topo.ok()) kolo::exercise(topo.value());
  kolo::Result<kolo::ClusterTopology> cluster = kolo::cluster_from_json(text);
  if (cluster.ok()) {
    for (const kolo::HostTopology& host : cluster.value().hosts) kolo::exercise(host);
  }
  return 0;
}
