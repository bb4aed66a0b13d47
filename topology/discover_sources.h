// The sources discovery draws on, each optional and each filling in what it can; used
// only by discover.cc. A source that is missing (no hwloc, no driver, no HCA) adds nothing
// and is not an error.
#pragma once

#include <string>

#include "topology/graph.h"

namespace kolo::discovery {

// CPUs (one node per NUMA node), and the PCI tree under them down to GPUs and NICs.
// False when hwloc is not built in or fails to load the machine.
bool add_hwloc(HostTopology* topo);
// One CPU node per /sys/devices/system/node/nodeN (or one), when hwloc is not there.
void add_cpus_from_sysfs(HostTopology* topo);
// CUDA devices (bus id, compute capability, peer access) and NVLinks from NVML, both
// loaded with dlopen. Returns the sources used ("cuda", "nvml"), comma-separated.
std::string add_gpus(HostTopology* topo);
// HCAs (/sys/class/infiniband) and network interfaces (/sys/class/net): names, port
// speeds, link layers, GPUDirect RDMA; and a link from each NIC to the network node.
void add_nics(HostTopology* topo);

// sysfs helpers shared by the sources.
std::string read_line(const std::string& path);  // "" when absent
// PCIe generation and width of a device's link to its parent (0 when unknown).
void pci_link(const std::string& bus_id, int* gen, int* width);
// The CPU node a PCI device hangs off, by its NUMA node; the first CPU when unknown.
int cpu_for_bus(const HostTopology& topo, const std::string& bus_id);

}  // namespace kolo::discovery
