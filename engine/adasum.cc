#include "engine/adasum.h"

#include <cstdint>
#include <cstring>

#include "kernels/adasum_math.h"

namespace kolo {
namespace {

CollCall point_to_point(CollKind kind, void* buffer, size_t bytes, int peer) {
  CollCall call;
  call.spec.kind = kind;
  call.spec.count = bytes;
  call.spec.dtype = DType::kUint8;
  call.spec.peer = peer;
  if (kind == CollKind::kSend) call.send = buffer;
  else call.recv = buffer;
  return call;
}

// A digest of what this rank asks for, and a check that every rank asks for the same:
// the element-wise MAX of (d, ~d) equals (d, ~d) on every rank only if all d are equal.
Status agree(Communicator& comm, size_t count, DType dtype, const std::vector<size_t>& segments) {
  uint64_t d = 1469598103934665603ull;  // FNV-1a over the words
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) d = (d ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
  };
  mix(count);
  mix(static_cast<uint64_t>(dtype));
  mix(segments.size());
  for (size_t s : segments) mix(s);
  uint64_t words[2] = {d, ~d};
  CollCall call;
  call.spec.kind = CollKind::kAllreduce;
  call.spec.count = 2;
  call.spec.dtype = DType::kUint64;
  call.spec.op = ReduceOp::kMax;
  call.spec.in_place = true;
  call.send = call.recv = words;
  KOLO_TRY(comm.run(call));
  if (words[0] != d || words[1] != ~d) {
    return error(Code::kMismatch, "rank ", comm.rank(), ": Adasum of ", count, " ", dtype_name(dtype),
                 " elements in ", segments.empty() ? 1 : segments.size(),
                 " tensor(s) differs from another rank's call (count, dtype or tensor sizes)");
  }
  return Status();
}

// Combines this rank's vector with the partner's (received into `theirs`) per segment;
// `mine_is_a`: this rank is the lower of the pair. The result lands in `mine`.
Status combine(char* mine, const char* theirs, bool mine_is_a, DType dtype, const std::vector<size_t>& segments) {
  const size_t elem = dtype_size(dtype);
  size_t at = 0;
  for (size_t n : segments) {
    const char* a = (mine_is_a ? mine : theirs) + at;
    const char* b = (mine_is_a ? theirs : mine) + at;
    AdasumDots dots;
    KOLO_TRY(adasum_dots(a, b, n, dtype, &dots));
    KOLO_TRY(adasum_combine(mine + at, a, b, n, dtype, adasum_coefficients(dots)));
    at += n * elem;
  }
  return Status();
}

}  // namespace

Status adasum_allreduce(Communicator& comm, void* data, size_t count, DType dtype,
                        const std::vector<size_t>& segments_in) {
  if (!adasum_dtype(dtype)) {
    return error(Code::kInvalidArgument, "rank ", comm.rank(), ": Adasum is defined for float16, bfloat16, float32 "
                 "and float64, not ", dtype_name(dtype));
  }
  std::vector<size_t> segments = segments_in;
  size_t total = 0;
  for (size_t s : segments) total += s;
  if (segments.empty()) {
    segments.push_back(count);
  } else if (total != count) {
    return error(Code::kInvalidArgument, "rank ", comm.rank(), ": Adasum's tensor sizes add up to ", total,
                 " elements, not ", count);
  }
  if (count > 0 && data == nullptr) return error(Code::kInvalidArgument, "rank ", comm.rank(), ": Adasum's buffer is NULL");
  KOLO_TRY(agree(comm, count, dtype, segments_in));
  const int n = comm.size(), me = comm.rank();
  if (n == 1 || count == 0) return Status();
  const size_t bytes = count * dtype_size(dtype);
  char* mine = static_cast<char*>(data);
  std::vector<char> theirs(bytes);
  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int extra = n - p;
  if (me >= p) {  // folded into rank me - p; gets the result back from it
    KOLO_TRY(comm.run(point_to_point(CollKind::kSend, mine, bytes, me - p)));
    return comm.run(point_to_point(CollKind::kRecv, mine, bytes, me - p));
  }
  if (me < extra) {
    KOLO_TRY(comm.run(point_to_point(CollKind::kRecv, theirs.data(), bytes, me + p)));
    KOLO_TRY(combine(mine, theirs.data(), true, dtype, segments));
  }
  for (int distance = 1; distance < p; distance *= 2) {
    const int partner = me ^ distance;
    KOLO_TRY(comm.run_group({point_to_point(CollKind::kSend, mine, bytes, partner),
                             point_to_point(CollKind::kRecv, theirs.data(), bytes, partner)}));
    KOLO_TRY(combine(mine, theirs.data(), me < partner, dtype, segments));
  }
  if (me < extra) KOLO_TRY(comm.run(point_to_point(CollKind::kSend, mine, bytes, me + p)));
  return Status();
}

}  // namespace kolo
