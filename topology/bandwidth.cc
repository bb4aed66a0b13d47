#include "topology/bandwidth.h"

namespace kolo {

double link_bandwidth_gbs(LinkKind kind, int gen, int width) {
  if (width <= 0) return 0;
  switch (kind) {
    case LinkKind::kPcie: {
      // Per lane per direction, after encoding, rounded as vendors quote them
      // (PCI-SIG: 2.5/5/8/16/32/64 GT/s; NVIDIA datasheets: Gen4 x16 = 64 GB/s both
      // directions, Gen5 x16 = 128 GB/s both directions).
      static constexpr double kLane[] = {0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0};
      if (gen < 1 || gen > 6) return 0;
      return kLane[gen] * width;
    }
    case LinkKind::kNvLink: {
      // Per link per direction. NVLink 1 (P100): 20 GB/s; NVLink 2 (V100), 3 (A100),
      // 4 (H100): 25 GB/s (A100: 12 links = 600 GB/s both ways; H100 SXM: 18 links =
      // 900 GB/s both ways); NVLink 5 (B200): 50 GB/s (18 links = 1.8 TB/s both ways).
      static constexpr double kPerLink[] = {0, 20.0, 25.0, 25.0, 25.0, 50.0};
      if (gen < 1 || gen > 5) return 0;
      return kPerLink[gen] * width;
    }
    case LinkKind::kC2C:
      // NVLink-C2C on Grace Hopper: 900 GB/s both ways, per chip pair (width ignored).
      return 450.0;
    case LinkKind::kInterSocket: {
      // Per link per direction: UPI moves 2 bytes per transfer each way (Intel ARK:
      // 10.4 / 11.2 / 16 GT/s); AMD quotes xGMI-2 at 16 GT/s x16 = 32 GB/s and xGMI-3
      // at 32 GT/s x16 = 64 GB/s per link and direction.
      static constexpr double kPerLink[] = {0, 20.8, 22.4, 32.0, 32.0, 64.0};
      if (gen < 1 || gen > 5) return 0;
      return kPerLink[gen] * width;
    }
    case LinkKind::kNet:
      return 0;  // the NIC's port speed decides; see net_gbs()
  }
  return 0;
}

double link_latency_us(LinkKind kind) {
  // Nominal one-way figures, enough to rank paths; measure for the truth.
  switch (kind) {
    case LinkKind::kPcie: return 0.25;         // a switch hop, store-and-forward of a TLP
    case LinkKind::kNvLink: return 0.6;        // NCCL's per-hop NVLink latency (LL), tuning.cc
    case LinkKind::kC2C: return 0.3;
    case LinkKind::kInterSocket: return 0.15;  // remote-socket memory adds ~100-150 ns
    case LinkKind::kNet: return 2.7;           // NCCL's network latency (LL), tuning.cc
  }
  return 0;
}

int nvlink_gen_for_sm(int sm) {
  if (sm >= 100) return 5;  // Blackwell
  if (sm >= 90) return 4;   // Hopper
  if (sm >= 80) return 3;   // Ampere
  if (sm >= 70) return 2;   // Volta
  if (sm >= 60) return 1;   // Pascal
  return 0;
}

void guess_inter_socket(const std::string& vendor, long family, long model, int* gen, int* width) {
  *gen = 0;
  *width = 0;
  if (vendor == "AuthenticAMD") {
    *gen = family >= 0x19 && model >= 0x10 ? kXgmi3 : kXgmi2;  // Genoa is family 19h, models 10h+
    *width = 4;
  } else if (vendor == "GenuineIntel" && family == 6) {
    if (model >= 143) *gen = kUpi160;       // Sapphire Rapids (143) and later
    else if (model >= 106) *gen = kUpi112;  // Ice Lake-SP (106)
    else *gen = kUpi104;                    // Skylake-SP, Cascade Lake (85)
    *width = 2;
  }
}

int pcie_gen_for_gts(double gts) {
  if (gts >= 60) return 6;
  if (gts >= 30) return 5;
  if (gts >= 15) return 4;
  if (gts >= 7.5) return 3;
  if (gts >= 4.5) return 2;
  if (gts >= 2) return 1;
  return 0;
}

}  // namespace kolo
