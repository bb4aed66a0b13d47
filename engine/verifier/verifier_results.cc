// The per-collective result check: after the simulation, every output element must hold
// what the collective promises (every contribution exactly once, element i from element i,
// pre-scale once before combining, post-scale once at the end).
#include <functional>
#include <string>

#include "engine/verifier/verifier_values.h"

namespace kolo::verifier {

namespace {

class Results {
 public:
  Results(const CollSpec& spec, int p, const ValueTable& values, const OutputCell& output, const FailRank& fail_rank)
      : spec_(spec), p_(p), values_(values), output_(output), fail_rank_(fail_rank) {}

  // Checks output element `e` of rank r against the expected value.
  Status expect(int r, size_t e, int from_rank, uint64_t index, bool reduction) const {
    const int32_t id = output_(r, e);
    bool ok = id >= 0 && values_.at(id).index == index;
    if (ok && reduction) {
      ok = values_.covers_all(id, p_) && values_.at(id).post == 1 && (!spec_.prescaled || values_.at(id).pre);
    } else if (ok) {
      ok = values_.is_single(id, from_rank) && !values_.at(id).pre && values_.at(id).post == 0;
    }
    if (ok) return Status();
    std::string want = reduction ? str_cat("element ", index, " of all ", p_, " ranks", spec_.prescaled ? ", pre-scaled" : "",
                                           ", post-scaled once")
                                 : str_cat("element ", index, " of rank ", from_rank);
    return fail_rank_(r, str_cat("output element ", e, " holds ", values_.describe(id), ", expected ", want));
  }

  Status check() const {
    const size_t n = spec_.count;
    for (int r = 0; r < p_; ++r) {
      switch (spec_.kind) {
        case CollKind::kAllreduce:
          for (size_t e = 0; e < n; ++e) KOLO_TRY(expect(r, e, -1, e, true));
          break;
        case CollKind::kReduce:
          if (r == spec_.root) {
            for (size_t e = 0; e < n; ++e) KOLO_TRY(expect(r, e, -1, e, true));
          }
          break;
        case CollKind::kReduceScatter:
          for (size_t e = 0; e < n; ++e) KOLO_TRY(expect(r, e, -1, r * n + e, true));
          break;
        case CollKind::kAllgather:
          for (int q = 0; q < p_; ++q) {
            for (size_t e = 0; e < n; ++e) KOLO_TRY(expect(r, q * n + e, q, e, false));
          }
          break;
        case CollKind::kAllgatherv:
          for (int q = 0; q < p_; ++q) {
            for (size_t e = 0; e < spec_.counts[q]; ++e) KOLO_TRY(expect(r, spec_.displs[q] + e, q, e, false));
          }
          break;
        case CollKind::kBroadcast:
          for (size_t e = 0; e < n; ++e) KOLO_TRY(expect(r, e, spec_.root, e, false));
          break;
        case CollKind::kAlltoall:
          for (int q = 0; q < p_; ++q) {
            for (size_t e = 0; e < n; ++e) KOLO_TRY(expect(r, q * n + e, q, r * n + e, false));
          }
          break;
        case CollKind::kSend: case CollKind::kRecv: case CollKind::kBarrier:
          break;
      }
    }
    return Status();
  }


 private:
  const CollSpec& spec_;
  const int p_;
  const ValueTable& values_;
  const OutputCell& output_;
  const FailRank& fail_rank_;
};

}  // namespace

Status check_results(const CollSpec& spec, int p, const ValueTable& values, const OutputCell& output,
                     const FailRank& fail_rank) {
  return Results(spec, p, values, output, fail_rank).check();
}

}  // namespace kolo::verifier
