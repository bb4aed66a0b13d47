// libFuzzer target: NCCL topology XML import (NCCL_TOPO_FILE format).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "topology/fuzz/fuzz_common.h"
#include "topology/nccl_xml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kolo::Result<kolo::HostTopology> topo = kolo::topology_from_nccl_xml(text);
  if (topo.ok()) kolo::exercise(topo.value());
  return 0;
}
