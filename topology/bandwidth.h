// Nominal bandwidth and latency of each kind of link, from public specifications: one
// table (bandwidth.cc) with its sources, so a wrong figure has one place to be fixed.
// Figures are per direction; latencies are orders of magnitude for the cost model.
#pragma once

#include <string>

#include "topology/graph.h"

namespace kolo {

// Inter-socket interconnects, stored in TopoLink::gen of kInterSocket links.
enum InterSocketGen : int {
  kUpi104 = 1,  // Intel UPI 10.4 GT/s (Skylake, Cascade Lake)
  kUpi112 = 2,  // Intel UPI 11.2 GT/s (Ice Lake)
  kUpi160 = 3,  // Intel UPI 2.0 16 GT/s (Sapphire Rapids, Emerald Rapids)
  kXgmi2 = 4,   // AMD Infinity Fabric xGMI-2 (EPYC Rome, Milan)
  kXgmi3 = 5,   // AMD xGMI-3 (EPYC Genoa)
};

// GB/s per direction for a link of this kind, generation and width (lanes or link
// count); 0 when the generation or width is unknown. kNet links carry their own figure.
double link_bandwidth_gbs(LinkKind kind, int gen, int width);
double link_latency_us(LinkKind kind);
// NVLink generation of a GPU from its compute capability (sm 90 -> 4); 0 if none.
int nvlink_gen_for_sm(int sm);
// PCIe generation from a transfer rate in GT/s (8 -> 3, 16 -> 4, 32 -> 5); 0 if unknown.
int pcie_gen_for_gts(double gts);
// The inter-socket interconnect of a CPU from its vendor string ("GenuineIntel",
// "AuthenticAMD"), family and model numbers (CPUID), when the machine does not say: a
// generation and a conservative link count (Intel 2 UPI links, AMD 4 xGMI links). gen 0
// when unknown.
void guess_inter_socket(const std::string& vendor, long family, long model, int* gen, int* width);
// Network bandwidth in GB/s of a port speed in Gb/s.
inline double net_gbs(double gbps) { return gbps / 8.0; }

}  // namespace kolo
