#include "engine/executors/local/op_signature.h"

#include <string>

namespace kolo {

// Three words: 1-based op number (0 = empty or being rewritten; written last), shape
// (kind, dtype, op, root, two-shot, wire dtype packed) and count (or a hash of allgatherv's counts).
struct OpSignatures::Signature {
  std::atomic<uint64_t> sequence{0};
  std::atomic<uint64_t> shape{0};
  std::atomic<uint64_t> count{0};
};
static_assert(sizeof(OpSignatures::Signature) * kSignatureRing <= kRankAreaBytes - kDeviceBarrierAreaBytes);

namespace {

using Signature = OpSignatures::Signature;

Signature& current(const SharedDomain& d, int index) {
  static_assert(kDeviceBarrierWord >= 3 && sizeof(Signature) == 3 * sizeof(std::atomic<uint64_t>));
  return *reinterpret_cast<Signature*>(d.line(index).words);
}
Signature& in_ring(const SharedDomain& d, int index, uint64_t sequence) {
  return reinterpret_cast<Signature*>(d.rank_area(index))[sequence % kSignatureRing];
}

std::string describe(uint64_t shape, uint64_t count) {
  const CollKind kind = static_cast<CollKind>(shape & 0xff);
  const DType dtype = static_cast<DType>((shape >> 8) & 0xff);
  std::string text = str_cat(coll_name(kind), " of ", count, " x ", dtype_name(dtype));
  if (kind == CollKind::kAllreduce || kind == CollKind::kReduce || kind == CollKind::kReduceScatter) {
    text += str_cat(" (", op_name(static_cast<ReduceOp>((shape >> 16) & 0xff)), ")");
  }
  if (kind == CollKind::kBroadcast || kind == CollKind::kReduce) text += str_cat(" root ", (shape >> 24) & 0xffff);
  if (kind == CollKind::kAllreduce || kind == CollKind::kReduce) text += (shape >> 40) & 1 ? " two-shot" : " one-shot";
  const DType wire = static_cast<DType>((shape >> 48) & 0xff);
  if (wire != DType::kCount) text += str_cat(" with wire_dtype ", dtype_name(wire));
  return text;
}

struct SignatureView {
  uint64_t sequence, shape, count;
};

// False when the owner was rewriting it (the peer ran on to its next op meanwhile).
bool read_signature(const Signature& sig, SignatureView* view) {
  view->sequence = sig.sequence.load(std::memory_order_acquire);
  view->shape = sig.shape.load(std::memory_order_relaxed);
  view->count = sig.count.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return view->sequence != 0 && sig.sequence.load(std::memory_order_relaxed) == view->sequence;
}

}  // namespace

OpSignatures::OpSignatures(SharedDomain& domain)
    : d_(domain),
      index_(domain.index()),
      now_(&current(domain, index_)),
      ring_(reinterpret_cast<Signature*>(domain.rank_area(index_))) {}

void OpSignatures::set(uint64_t sequence, const CollSpec& spec, bool two_shot, bool avg) {
  sequence_ = sequence;
  shape_ = static_cast<uint64_t>(spec.kind) | static_cast<uint64_t>(spec.dtype) << 8 |
           static_cast<uint64_t>(avg ? ReduceOp::kAvg : spec.op) << 16 |
           static_cast<uint64_t>(spec.root & 0xffff) << 24 |
           static_cast<uint64_t>(two_shot) << 40 | static_cast<uint64_t>(spec.wire) << 48;
  count_ = spec.count;
  if (spec.kind == CollKind::kAllgatherv) {
    count_ = 1469598103934665603ull;  // FNV-1a over counts and displacements
    for (size_t v : spec.counts) count_ = (count_ ^ v) * 1099511628211ull;
    for (size_t v : spec.displs) count_ = (count_ ^ v) * 1099511628211ull;
  }
}

void OpSignatures::publish() {
  // `current` is rewritten while peers may read it: a seqlock (sequence 0 while it changes).
  now_->sequence.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  auto write = [this](Signature& sig) {
    sig.shape.store(shape_, std::memory_order_relaxed);
    sig.count.store(count_, std::memory_order_relaxed);
    sig.sequence.store(sequence_ + 1, std::memory_order_release);
  };
  write(ring_[sequence_ % kSignatureRing]);
  write(*now_);
}

Status OpSignatures::check_one(int index) const {
  // The peer's current op is ours unless it has run ahead; then its ring has ours (a peer
  // is never kSignatureRing ops ahead: the boxes and slots hold it back).
  SignatureView view{};
  if (!read_signature(current(d_, index), &view) || view.sequence != sequence_ + 1) {
    read_signature(in_ring(d_, index, sequence_), &view);
  }
  if (view.sequence == sequence_ + 1 && view.shape == shape_ && view.count == count_) return Status();
  if (view.sequence != sequence_ + 1) {
    return error(Code::kMismatch, "rank ", d_.global_rank(index), " is at collective #", view.sequence, " while rank ",
                 d_.global_rank(index_), " is at #", sequence_ + 1, " (", describe(shape_, count_), ")");
  }
  return mismatch(index, view.shape, view.count);
}

Status OpSignatures::mismatch(int index, uint64_t shape, uint64_t count) const {
  return error(Code::kMismatch, "rank ", d_.global_rank(index), " called ", describe(shape, count), " but rank ",
               d_.global_rank(index_), " called ", describe(shape_, count_));
}

Status OpSignatures::check_if_arrived(int index) const {
  SignatureView view{};
  if (!read_signature(current(d_, index), &view)) return Status();  // being rewritten: later
  if (view.sequence >= sequence_ + 1) return check_one(index);
  // Behind: what it runs now must be what this rank ran as that op (a rank that takes the
  // fast boxes where its peers take the slots may run on into later ops before it waits).
  SignatureView mine{};
  if (view.sequence == 0 || !read_signature(ring_[(view.sequence - 1) % kSignatureRing], &mine) ||
      mine.sequence != view.sequence || (mine.shape == view.shape && mine.count == view.count)) {
    return Status();
  }
  return error(Code::kMismatch, "rank ", d_.global_rank(index), " called ", describe(view.shape, view.count),
               " as collective #", view.sequence, " but rank ", d_.global_rank(index_), " called ",
               describe(mine.shape, mine.count));
}

Status OpSignatures::check(int index) const {
  if (index >= 0) return index == index_ ? Status() : check_one(index);
  for (int k = 0; k < d_.size(); ++k) {
    if (k != index_) KOLO_TRY(check_one(k));
  }
  return Status();
}

}  // namespace kolo
