// Import of NCCL's topology XML (the NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE format), so a
// file a user already has for NCCL describes the machine to kolo too:
//   <system version="1"><cpu numaid="0" vendor="GenuineIntel" ...>
//     <pci busid="..." class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
//       <pci busid="..." class="0x030200" ...><gpu dev="0" sm="90" ...>
//         <nvlink target="..." count="18" tclass="0x068000"/></gpu></pci>
//       <pci ...><nic><net name="mlx5_0" speed="400000" port="1" gdr="1"/></nic></pci>
//   ...
// Each PCI bridge becomes a switch node (as NCCL counts them), all NVSwitches one node.
// The file is untrusted: an error names the line and the element or attribute.
#pragma once

#include <string_view>

#include "support/status.h"
#include "topology/graph.h"

namespace kolo {

// kUnsupported when kolo was built without an XML library.
Result<HostTopology> topology_from_nccl_xml(std::string_view text);

}  // namespace kolo
