// libFuzzer target: schedules as JSON (engine/schedules/schedule.h: schedule_to_json, what
// `kolo-plan --dump ALGO --json` prints). kolo has no reader of schedule JSON of its own;
// the format's contract is that any JSON reader gets the schedule back, so the target
// builds real schedules from the input (the generators of engine/schedules/algorithms.h
// for a collective, size, rank, root, count, dtype and chunk the input picks; two of them
// concatenated with append_schedule, as a group of calls is), writes them with
// schedule_to_json, reads that back with nlohmann::json and checks every field against the
// Schedule: kinds, calls, peers, tags, slices, counts, scales, dependencies. The text
// listing (schedule_to_string) is written too.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/schedules/algorithms.h"
#include "fuzz/fuzz_check.h"

namespace {

using namespace kolo;
using Generator = Schedule (*)(const CollSpec&, const PlanContext&);

struct Entry {
  CollKind kind;
  Generator generate;
};

const Entry kGenerators[] = {
    {CollKind::kAllreduce, ring_allreduce},
    {CollKind::kAllreduce, direct_allreduce},
    {CollKind::kAllreduce, one_shot_allreduce},
    {CollKind::kAllreduce, two_shot_allreduce},
    {CollKind::kAllreduce, halving_doubling_allreduce},
    {CollKind::kAllreduce, tree_allreduce},
    {CollKind::kReduceScatter, ring_reduce_scatter},
    {CollKind::kReduceScatter, direct_reduce_scatter},
    {CollKind::kReduceScatter, halving_doubling_reduce_scatter},
    {CollKind::kAllgather, ring_allgather},
    {CollKind::kAllgather, direct_allgather},
    {CollKind::kAllgather, halving_doubling_allgather},
    {CollKind::kBroadcast, ring_broadcast},
    {CollKind::kBroadcast, direct_broadcast},
    {CollKind::kBroadcast, tree_broadcast},
    {CollKind::kReduce, ring_reduce},
    {CollKind::kReduce, direct_reduce},
    {CollKind::kReduce, tree_reduce},
    {CollKind::kAlltoall, direct_alltoall},
    {CollKind::kBarrier, dissemination_barrier},
};
constexpr size_t kGeneratorCount = sizeof(kGenerators) / sizeof(kGenerators[0]);

class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint32_t next(int n) {  // n bytes, little-endian; zeros past the end
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint32_t{at_ < size_ ? data_[at_++] : uint8_t{0}} << (8 * i);
    return v;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

Schedule generate(Bytes& in, int size, int rank) {
  const Entry& entry = kGenerators[in.next(1) % kGeneratorCount];
  CollSpec spec;
  spec.kind = entry.kind;
  spec.dtype = static_cast<DType>(in.next(1) % static_cast<int>(DType::kCount));
  spec.op = static_cast<ReduceOp>(in.next(1) % static_cast<int>(ReduceOp::kAvg));  // no AVG: the engine rewrites it
  spec.count = in.next(2) % (64 << 10 >> 1);  // elements; at most 256 KiB of float64
  spec.root = static_cast<int>(in.next(1)) % size;
  const uint32_t flags = in.next(1);
  spec.in_place = flags & 1;
  spec.prescaled = flags & 2;
  spec.postscaled = flags & 4;
  PlanContext ctx;
  ctx.rank = rank;
  ctx.size = size;
  ctx.chunk_bytes = size_t{4096} << (in.next(1) % 8);
  return entry.generate(spec, ctx);
}

const char* buffer_name(int buffer) {
  return buffer == kBufInput ? "in" : buffer == kBufOutput ? "out" : buffer == kBufStaging ? "staging" : "scratch";
}

void check_slice(const nlohmann::json& j, const Slice& s) {
  KOLO_FUZZ_CHECK(j.at("buffer").get<std::string>() == buffer_name(s.buffer));
  KOLO_FUZZ_CHECK(j.at("offset").get<uint64_t>() == s.offset);
  KOLO_FUZZ_CHECK(j.at("bytes").get<uint64_t>() == s.bytes);
}

void check(const nlohmann::json& j, const Schedule& schedule) {
  static const char* kKinds[] = {"send", "recv", "reduce", "copy", "signal", "wait"};
  static const char* kScales[] = {"none", "pre", "post", "both"};
  KOLO_FUZZ_CHECK(j.at("algorithm").get<std::string>() == schedule_algorithm_name(schedule));
  KOLO_FUZZ_CHECK(j.at("scratch_bytes").get<uint64_t>() == schedule.scratch_bytes);
  KOLO_FUZZ_CHECK(j.at("calls").get<int>() == schedule.calls());
  const nlohmann::json& steps = j.at("steps");
  KOLO_FUZZ_CHECK(steps.size() == schedule.steps.size());
  for (size_t i = 0; i < schedule.steps.size(); ++i) {
    const Step& st = schedule.steps[i];
    const nlohmann::json& js = steps[i];
    KOLO_FUZZ_CHECK(js.at("kind").get<std::string>() == kKinds[static_cast<int>(st.kind)]);
    KOLO_FUZZ_CHECK(js.at("call").get<int>() == st.call);
    if (st.kind == StepKind::kSend || st.kind == StepKind::kRecv) {
      KOLO_FUZZ_CHECK(js.at("peer").get<int>() == st.peer && js.at("tag").get<uint32_t>() == st.tag);
    }
    if (st.kind == StepKind::kSend || st.kind == StepKind::kReduce || st.kind == StepKind::kCopy) {
      KOLO_FUZZ_CHECK(js.at("srcs").size() == st.srcs.size());
      for (size_t k = 0; k < st.srcs.size(); ++k) check_slice(js.at("srcs")[k], st.srcs[k]);
    }
    if (st.kind == StepKind::kRecv || st.kind == StepKind::kReduce || st.kind == StepKind::kCopy) {
      check_slice(js.at("dst"), st.dst);
    }
    if (st.kind == StepKind::kReduce || st.kind == StepKind::kCopy) {
      KOLO_FUZZ_CHECK(js.at("count").get<uint64_t>() == st.count);
      KOLO_FUZZ_CHECK(js.at("scale").get<std::string>() == kScales[static_cast<int>(st.scale)]);
    }
    KOLO_FUZZ_CHECK(js.at("deps").get<std::vector<int>>() == st.deps);
    for (int d : st.deps) KOLO_FUZZ_CHECK(d >= 0 && static_cast<size_t>(d) < i);  // earlier steps only
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  const int ranks = 1 + static_cast<int>(in.next(1) % 16);
  const int rank = static_cast<int>(in.next(1)) % ranks;
  Schedule schedule = generate(in, ranks, rank);
  if (in.next(1) & 1) append_schedule(schedule, generate(in, ranks, rank));
  (void)schedule_to_string(schedule);
  const std::string text = schedule_to_json(schedule);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  KOLO_FUZZ_CHECK(!j.is_discarded());
  check(j, schedule);
  return 0;
}
