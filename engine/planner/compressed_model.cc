#include "engine/planner/compressed_model.h"

#include <algorithm>
#include <vector>

#include "kernels/compress.h"

namespace kolo {

CompressedCost predict_compressed_allreduce(const CollSpec& spec, const CostModel& m) {
  CompressedCost cost;
  const int p = m.size();
  std::vector<int> per_host(m.hosts(), 0);
  int remote = -1;  // a rank on another host than rank 0
  for (int r = 0; r < p; ++r) {
    ++per_host[m.host_of(r)];
    if (remote < 0 && m.host_of(r) != m.host_of(0)) remote = r;
  }
  if (remote < 0) return cost;  // one host: the one-host executors run it, not this one
  const int H = m.hosts(), L = *std::max_element(per_host.begin(), per_host.end());
  const double n = static_cast<double>(spec.bytes());
  const double w = static_cast<double>(wire_bytes(wire_format(spec.wire), spec.count)) / std::max(n, 1.0);
  const LinkCost net = m.link(0, remote);
  const bool fp8 = spec.wire == DType::kFloat8E4M3 || spec.wire == DType::kFloat8E5M2;
  const double codec = (fp8 ? m.params().host_codec8_gbs : m.params().host_codec16_gbs) * 1e3;  // bytes per us
  const double net_rate = net.gbs * 1e3;
  cost.flat_us = 2 * net.alpha_us + std::max(2.0 * L * (p - L) * n * w / (p * net_rate), (3.0 + 1.0 / p) * n / codec);
  const bool balanced = std::all_of(per_host.begin(), per_host.end(), [&](int k) { return k == L; });
  if (!balanced || L < 2) return cost;
  int neighbour = -1;  // another rank on rank 0's host
  for (int r = 1; r < p && neighbour < 0; ++r) {
    if (m.host_of(r) == m.host_of(0)) neighbour = r;
  }
  const LinkCost local = m.link(0, neighbour);
  cost.hierarchical_us = 2 * local.alpha_us + 2.0 * (L - 1) * n / (L * local.gbs * 1e3) + 2 * net.alpha_us +
                         std::max(2.0 * (H - 1) * n * w / (H * net_rate), (3.0 + 1.0 / H) * n / (L * codec));
  return cost;
}

}  // namespace kolo
