#include "engine/runtime/fusion.h"

#include <tuple>

namespace kolo::runtime {

std::vector<std::vector<size_t>> plan_fusion(const std::vector<Response>& ready, size_t threshold) {
  struct Open {
    const Signature* sig;
    size_t group;  // index into groups
    size_t bytes;
  };
  std::vector<std::vector<size_t>> groups;
  std::vector<Open> open;  // one open group per (dtype, op, scales, wire, memory)
  for (size_t i = 0; i < ready.size(); ++i) {
    const Response& resp = ready[i];
    if (resp.code != Code::kOk || resp.sig.kind != OpKind::kAllreduce) continue;
    const Signature& sig = resp.sig;
    const size_t bytes = sig.total_count() * dtype_size(sig.dtype);
    auto same = [&](const Open& o) {
      return std::tie(o.sig->dtype, o.sig->op, o.sig->prescale, o.sig->postscale, o.sig->wire, o.sig->device) ==
             std::tie(sig.dtype, sig.op, sig.prescale, sig.postscale, sig.wire, sig.device);
    };
    size_t k = 0;
    while (k < open.size() && !same(open[k])) ++k;
    if (k < open.size() && open[k].bytes + bytes <= threshold) {
      groups[open[k].group].push_back(i);
      open[k].bytes += bytes;
      continue;
    }
    groups.push_back({i});
    Open fresh{&sig, groups.size() - 1, bytes};
    if (k < open.size()) open[k] = fresh;
    else open.push_back(fresh);
  }
  return groups;
}

}  // namespace kolo::runtime
