#include "engine/runtime/negotiation.h"

#include "support/clock.h"

namespace kolo::runtime {
namespace {

// Header bytes of the ready vector. The vector is min-reduced, so a flag that any rank
// may raise is encoded as 0 = raised; a flag that needs all ranks is 1 = set.
enum Header : size_t {
  kNothingNew,  // 0: some rank has something for the coordinator
  kRunning,     // 0: some rank is shutting down
  kAllJoined,   // 1: every rank has joined
  kNoStall,     // 0: some rank asks for a stall check
  kTuning,      // rank 0's autotune setting (others send 255)
  kAllHolding,  // 0: some rank has no pending request (it paces the next cycle, pacing.h)
  kNoneJoined,  // 0: some rank has joined
  kHeaderBytes,
};
// Per cache slot, also min-reduced: 0 = some rank has the name with another signature
// (the slot is dropped everywhere and the name renegotiated), 1 = some rank lacks it,
// 2 = every rank has it: ready.
constexpr uint8_t kSlotInvalid = 0, kSlotMissing = 1, kSlotReady = 2;

CollCall make_call(CollKind kind, DType dtype, size_t count, const void* send, void* recv) {
  CollCall call;
  call.spec.kind = kind;
  call.spec.dtype = dtype;
  call.spec.count = count;
  call.send = send;
  call.recv = recv;
  return call;
}

}  // namespace

Negotiator::Negotiator(Communicator& comm, size_t cache_capacity, StallSettings stall)
    : comm_(comm), cache_(cache_capacity), stall_(stall) {
  if (comm.rank() == 0) coordinator_ = std::make_unique<Coordinator>(comm.size());
}

Result<CycleOutput> Negotiator::negotiate(PendingMap& pending, const CycleInput& input) {
  CycleOutput out;
  const size_t slots = cache_.slots();
  bits_.assign(kHeaderBytes + slots, kSlotMissing);
  bool something_new = input.newly_joined;
  for (auto& [name, p] : pending) {
    if (p.reported) continue;
    int slot = cache_.find(name);
    if (slot < 0) {
      something_new = true;
    } else if (peer_joined_ && p.request->sig.kind != OpKind::kAllreduce) {
      // Some rank has joined: only allreduce can run. The slot is dropped everywhere and
      // the name goes to the coordinator, which fails it at once: from the cache it would
      // wait for every other rank to hold it, and they need not (they may join instead).
      bits_[kHeaderBytes + slot] = kSlotInvalid;
    } else {
      bits_[kHeaderBytes + slot] = cache_.signature(slot) == p.request->sig ? kSlotReady : kSlotInvalid;
    }
  }
  if (input.joined) {
    // A joined rank has an empty queue and contributes zeros to whatever the others run.
    for (size_t s = 0; s < slots; ++s) bits_[kHeaderBytes + s] = cache_.used(s) ? kSlotReady : kSlotMissing;
  }
  bits_[kNothingNew] = something_new ? 0 : 1;
  bits_[kRunning] = input.shutting_down ? 0 : 1;
  bits_[kAllJoined] = input.joined ? 1 : 0;
  bits_[kNoStall] = input.stall_check ? 0 : 1;
  bits_[kTuning] = comm_.rank() == 0 ? input.tuning : 255;
  bits_[kAllHolding] = pending.empty() ? 0 : 1;
  bits_[kNoneJoined] = input.joined ? 0 : 1;
  CollCall call = make_call(CollKind::kAllreduce, DType::kUint8, bits_.size(), bits_.data(), bits_.data());
  call.spec.op = ReduceOp::kMin;
  call.spec.in_place = true;
  KOLO_TRY(comm_.run(call));

  out.tuning = bits_[kTuning];
  out.some_rank_idle = bits_[kAllHolding] == 0;
  const bool some_joined = bits_[kNoneJoined] == 0;
  peer_joined_ = some_joined && bits_[kAllJoined] == 0;
  if (bits_[kRunning] == 0) {
    out.shutdown = true;
    return out;
  }
  if (bits_[kAllJoined] == 1) {
    // Every queue is empty (a rank joins only once its own is), so nothing is ready.
    out.all_joined = true;
    return out;
  }
  std::vector<int> invalid;
  for (size_t s = 0; s < slots; ++s) {
    const uint8_t bit = bits_[kHeaderBytes + s];
    if (bit == kSlotReady && cache_.used(s)) {
      const Signature& sig = cache_.signature(s);
      if (some_joined && sig.kind != OpKind::kAllreduce) {
        // A joined rank marks every slot ready; only allreduce can take its zeros. The
        // same error on every rank, as the coordinator gives it (coordinator.cc).
        out.ready.push_back(Response{cache_.name(s), sig, {}, Code::kInvalidUsage,
                                     str_cat("tensor '", cache_.name(s), "': a rank has joined (kolo_join) and only ",
                                             "allreduce can run while ranks have joined, not ",
                                             op_kind_name(sig.kind))});
        continue;
      }
      out.ready.push_back(Response{cache_.name(s), sig, {}, Code::kOk, ""});
    } else if (bit == kSlotInvalid) {
      invalid.push_back(static_cast<int>(s));
    }
  }
  // Erased after the scan: erasing shrinks the slot vector the scan walks.
  for (int s : invalid) cache_.erase(s);
  const bool invalidated = !invalid.empty();
  out.cached_hits = out.ready.size();
  const bool stall_check = bits_[kNoStall] == 0;
  if (bits_[kNothingNew] == 0 || invalidated || stall_check) {
    out.slow_path = true;
    out.stall_checked = stall_check;
    KOLO_TRY(slow_path(pending, input, stall_check, out));
  }
  return out;
}

Status Negotiator::slow_path(PendingMap& pending, const CycleInput& input, bool stall_check, CycleOutput& out) {
  RankMessage mine;
  mine.joined = input.joined;
  const double now = now_seconds();
  for (auto& [name, p] : pending) {
    if (stall_check) mine.pending.push_back(PendingAge{name, now - p.request->enqueued_at});
    if (p.reported) continue;
    int slot = cache_.find(name);
    if (slot >= 0 && cache_.signature(slot) == p.request->sig) continue;  // answered by the bits
    mine.requests.push_back(RequestInfo{name, p.request->sig, p.request->local});
    p.reported = true;
  }
  std::vector<RankMessage> messages;
  KOLO_TRY(gather_to_coordinator(encode(mine), messages));
  std::vector<uint8_t> answer;
  if (coordinator_) answer = encode(coordinator_->handle(messages, stall_));
  KOLO_TRY(broadcast_from_coordinator(answer));
  ResponseList list;
  KOLO_TRY(decode(answer.data(), answer.size(), list));
  if (list.shutdown_code != Code::kOk) out.stop = Status(list.shutdown_code, list.shutdown_message);
  for (Response& resp : list.responses) {
    // Every rank inserts the same responses in the same order: the slots stay in step.
    if (resp.code == Code::kOk && ResponseCache::cacheable(resp.sig.kind)) cache_.insert(resp.name, resp.sig);
    out.ready.push_back(std::move(resp));
  }
  return Status();
}

// Sizes first (one allgather of uint64), then the messages (allgatherv of bytes). Only the
// coordinator reads them; an allgatherv is what the communicator offers, and the slow
// path is rare once the cache is warm.
Status Negotiator::gather_to_coordinator(const std::vector<uint8_t>& mine, std::vector<RankMessage>& messages) {
  const int size = comm_.size();
  uint64_t my_size = mine.size();
  std::vector<uint64_t> sizes(size);
  KOLO_TRY(comm_.run(make_call(CollKind::kAllgather, DType::kUint64, 1, &my_size, sizes.data())));
  CollCall call = make_call(CollKind::kAllgatherv, DType::kUint8, mine.size(), mine.data(), nullptr);
  size_t total = 0;
  for (int r = 0; r < size; ++r) {
    call.spec.counts.push_back(sizes[r]);
    call.spec.displs.push_back(total);
    total += sizes[r];
  }
  std::vector<uint8_t> all(total);
  call.recv = all.data();
  KOLO_TRY(comm_.run(call));
  if (!coordinator_) return Status();
  messages.resize(size);
  for (int r = 0; r < size; ++r) {
    KOLO_TRY(decode(all.data() + call.spec.displs[r], sizes[r], r, messages[r]));
  }
  return Status();
}

Status Negotiator::broadcast_from_coordinator(std::vector<uint8_t>& bytes) {
  uint64_t size = bytes.size();
  CollCall size_call = make_call(CollKind::kBroadcast, DType::kUint64, 1, &size, &size);
  size_call.spec.in_place = true;
  KOLO_TRY(comm_.run(size_call));
  bytes.resize(size);
  CollCall call = make_call(CollKind::kBroadcast, DType::kUint8, size, bytes.data(), bytes.data());
  call.spec.in_place = true;
  return comm_.run(call);
}

}  // namespace kolo::runtime
