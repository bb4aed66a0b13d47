#include "engine/collective.h"

namespace kolo {

CollSpec spec_for_rank(const CollSpec& spec, int rank) {
  CollSpec s = spec;
  if (s.kind == CollKind::kAllgatherv && static_cast<size_t>(rank) < s.counts.size()) s.count = s.counts[rank];
  if (s.kind == CollKind::kReduce) s.in_place = s.in_place && rank == s.root;
  return s;
}

Result<Algorithm> parse_algorithm_name(const std::string& name) {
  if (name.empty() || name == "auto") return Algorithm::kAuto;
  for (int a = 1; a < kAlgorithmCount; ++a) {
    if (name == algorithm_name(static_cast<Algorithm>(a))) return static_cast<Algorithm>(a);
  }
  return error(Code::kInvalidArgument, "KOLO_ALGO='", name,
               "' is not auto, ring, direct, tree, halving_doubling, hierarchical, one_shot or two_shot");
}

const char* coll_name(CollKind kind) {
  switch (kind) {
    case CollKind::kAllreduce: return "allreduce";
    case CollKind::kBroadcast: return "broadcast";
    case CollKind::kReduce: return "reduce";
    case CollKind::kAllgather: return "allgather";
    case CollKind::kAllgatherv: return "allgatherv";
    case CollKind::kReduceScatter: return "reduce_scatter";
    case CollKind::kAlltoall: return "alltoall";
    case CollKind::kSend: return "send";
    case CollKind::kRecv: return "recv";
    case CollKind::kBarrier: return "barrier";
  }
  return "?";
}

const char* algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kAuto: return "auto";
    case Algorithm::kRing: return "ring";
    case Algorithm::kDirect: return "direct";
    case Algorithm::kTree: return "tree";
    case Algorithm::kHalvingDoubling: return "halving_doubling";
    case Algorithm::kHierarchical: return "hierarchical";
    case Algorithm::kOneShot: return "one_shot";
    case Algorithm::kTwoShot: return "two_shot";
    case Algorithm::kDissemination: return "dissemination";
    case Algorithm::kPointToPoint: return "p2p";
  }
  return "?";
}

}  // namespace kolo
