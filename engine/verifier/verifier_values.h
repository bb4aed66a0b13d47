// Internal to the verifier: symbolic values and per-rank memory. A value says which ranks'
// contributions of which input element a buffer element holds, and which scales were
// applied. Values are interned in one table and cells hold ids, so copies and messages
// move 4-byte ids; a reduce makes a new value whose rank set is a list of disjoint rank
// intervals (ring and direct both combine contiguous (cyclic) runs of ranks, so the list
// stays one or two intervals long even at p = 1024).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/collective.h"
#include "engine/schedules/schedule.h"
#include "support/status.h"

namespace kolo::verifier {

constexpr int32_t kUnwritten = -1;

struct Value {
  uint64_t index = 0;      // element of the contributing ranks' input buffers
  uint32_t first = 0;      // first interval in ValueTable::ranges_
  uint32_t intervals = 0;  // how many intervals
  bool pre = false;        // every contribution was pre-scaled (mixing is an error)
  uint8_t post = 0;        // times the post-scale was applied
};

class ValueTable {
 public:
  void reserve(size_t values) {
    values_.reserve(values);
    ranges_.reserve(values * 2);
  }
  int32_t original(int rank, uint64_t index);
  // Combined value of `ids`; on failure returns -1 and sets *why.
  int32_t combine(const int32_t* ids, size_t n, std::string* why);
  // The value with a scale applied; -1 and *why on a misuse.
  int32_t scaled(int32_t id, ScaleUse use, std::string* why);
  const Value& at(int32_t id) const { return values_[id]; }
  size_t ranks_in(int32_t id) const;
  bool is_single(int32_t id, int rank) const;
  bool covers_all(int32_t id, int p) const;
  std::string describe(int32_t id) const;

 private:
  int32_t add(Value v);
  std::vector<Value> values_;
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;  // [lo, hi) of ranks
  std::vector<std::pair<uint32_t, uint32_t>> tmp_;
};

// Where a buffer of one rank lives: in-place calls alias the input and the output, so
// both map into one region of cells (with an element offset).
struct Layout {
  size_t bytes[3] = {0, 0, 0};     // input, output, scratch sizes
  int region[3] = {0, 1, 2};       // region of cells each buffer maps to
  size_t base[3] = {0, 0, 0};      // element offset inside that region
  size_t region_elems[3] = {0, 0, 0};
};

Layout layout_for(const CollSpec& spec, int rank, int p, size_t scratch_bytes);
// Whose buffer, and which of its own, a slice of `rank`'s step names: (rank, buffer), or
// for rank_buffer(q, b) (verifier.h), (q, b).
std::pair<int, int> owner_of(int rank, int buffer);
// "input", ..., "rank 2's output".
std::string buffer_name(int buffer);
const char* step_kind_name(StepKind kind);
// "posted", "reduced", "consumed" (engine/local/local_ops.h), "barriers", "flag to rank 1
// parity 0" (flag_counter), else "counter N".
std::string counter_name(int counter);
// The step's kind and what it names: "send peer 1 tag 4", "wait for rank 1's posted >= 2".
std::string step_label(const Step& st);

// After a simulation: checks every rank's output against what the collective promises.
// output(r, e) is the value id in rank r's output element e; failures go through
// fail_rank(r, why). verifier_results.cc.
using OutputCell = std::function<int32_t(int rank, size_t element)>;
using FailRank = std::function<Status(int rank, const std::string& why)>;
Status check_results(const CollSpec& spec, int p, const ValueTable& values, const OutputCell& output,
                     const FailRank& fail_rank);

}  // namespace kolo::verifier
