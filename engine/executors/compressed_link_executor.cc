// The "compressed" row: allreduce of FLOAT32 data carried in a wire type (fp16, bf16,
// block-scaled fp8) over the fabric's links, where the one-host executors cannot run it
// (ranks on several hosts). Two phases, as the one-host two-shot:
//   1. every rank encodes each block of its input once (prescale fused) and sends block q
//      to rank q; rank q decodes the contributions and sums them in fp32, in rank order;
//   2. rank q encodes its block's sum once and sends it to every rank; every rank decodes
//      every block, its own too, applying postscale (AVG's division included).
// So each contribution is rounded once to the wire type and the result once more, however
// many ranks there are (the bound of docs/device.md's two-shot), and every rank decodes
// the same bytes: the same bits everywhere. The links carry wire bytes only. The call runs
// in 1 MB chunks, pipelined: a chunk's codecs run while the links carry earlier chunks.
#include <sched.h>

#include <algorithm>
#include <vector>

#include "engine/executors/executor.h"
#include "kernels/compress.h"

namespace kolo {
namespace {

constexpr int kSpinsBeforeSleep = 200;
// Values per pipeline chunk (1 MB of fp32): the codecs of one chunk run while the links
// carry the chunks before it. A multiple of the fp8 scale block, so chunks keep its grid.
constexpr size_t kChunkValues = size_t{1} << 18;
static_assert(kChunkValues % kWireFp8Block == 0);

size_t round16(size_t bytes) { return (bytes + 15) & ~size_t{15}; }

// Block q of n values split among p ranks: the first n % p blocks one value longer.
size_t block_first(size_t n, int p, int q) { return q * (n / p) + std::min<size_t>(q, n % p); }
size_t block_len(size_t n, int p, int q) { return n / p + (static_cast<size_t>(q) < n % p ? 1 : 0); }

// One call: its chunks, and where each chunk's encoded blocks lie in the executor's
// buffers. Chunk c covers values [c * kChunkValues, ...), cut into p blocks.
struct Layout {
  int p = 1;
  size_t n = 0, chunks = 0;
  WireFormat fmt;
  std::vector<size_t> block_at;  // (c, q) -> offset in encoded_/results_; [chunks * p] = total
  std::vector<size_t> slot_at;   // c -> offset of chunk c's receive slots in received_
  std::vector<size_t> slot;      // c -> bytes per receive slot of chunk c
  size_t chunk_first(size_t c) const { return c * kChunkValues; }
  size_t chunk_len(size_t c) const { return std::min(kChunkValues, n - c * kChunkValues); }
  size_t first(size_t c, int q) const { return chunk_first(c) + block_first(chunk_len(c), p, q); }
  size_t len(size_t c, int q) const { return block_len(chunk_len(c), p, q); }
  size_t wire(size_t c, int q) const { return wire_bytes(fmt, len(c, q)); }
};

class CompressedLinkExecutor final : public Executor {
 public:
  CompressedLinkExecutor(Fabric& fabric, int rank, int size) : fabric_(fabric), rank_(rank), size_(size) {}

  Status run(const PlannedCall* calls, size_t n, const Deadline& deadline) override {
    for (size_t i = 0; i < n; ++i) KOLO_TRY(run_one(calls[i], deadline));
    return Status();
  }

 private:
  // Per chunk: the receives of each phase, its sends, and how far it got.
  struct Chunk {
    std::vector<TransferRequest> gathered;  // phase 1: the peers' encodings of this rank's block
    std::vector<TransferRequest> results;   // phase 2: the peers' encoded sums
    std::vector<TransferRequest> sends;
    bool encoded = false, summed = false, decoded = false;
  };
  Status run_one(const PlannedCall& planned, const Deadline& deadline);
  Status context(const Status& s) const { return s.with_context(str_cat("rank ", rank_, ", compressed allreduce: ")); }
  static bool all_done(const std::vector<TransferRequest>& reqs, Status* failed);

  Fabric& fabric_;
  const int rank_, size_;
  std::vector<char> encoded_;   // this rank's input, encoded block by block
  std::vector<char> received_;  // the peers' encodings of this rank's blocks
  std::vector<char> results_;   // every block's encoded sum
  std::vector<Chunk> chunks_;
};

bool CompressedLinkExecutor::all_done(const std::vector<TransferRequest>& reqs, Status* failed) {
  bool all = true;
  for (const TransferRequest& r : reqs) {
    if (r.done && !r.status.ok() && failed->ok()) *failed = r.status;
    all &= r.done;
  }
  return all;
}

Status CompressedLinkExecutor::run_one(const PlannedCall& planned, const Deadline& deadline) {
  const CollCall& call = planned.call;
  const CollSpec& spec = call.spec;
  if (spec.kind != CollKind::kAllreduce || spec.dtype != DType::kFloat32 || !spec.compressed()) {
    return error(Code::kInternal, "rank ", rank_, ": the compressed executor runs allreduces of FLOAT32 with a wire "
                 "type, not this call");
  }
  const int p = size_, me = rank_;
  Layout L;
  L.p = p;
  L.n = spec.count;
  L.fmt = wire_format(spec.wire);
  L.chunks = (L.n + kChunkValues - 1) / kChunkValues;
  L.block_at.assign(L.chunks * p + 1, 0);
  L.slot_at.assign(L.chunks + 1, 0);
  L.slot.assign(L.chunks, 0);
  for (size_t c = 0; c < L.chunks; ++c) {
    for (int q = 0; q < p; ++q) L.block_at[c * p + q + 1] = L.block_at[c * p + q] + round16(L.wire(c, q));
    L.slot[c] = round16(L.wire(c, me));
    L.slot_at[c + 1] = L.slot_at[c] + L.slot[c] * p;
  }
  encoded_.resize(L.block_at.back());
  results_.resize(L.block_at.back());
  received_.resize(L.slot_at.back());
  const auto* in = static_cast<const float*>(call.send);
  auto* out = static_cast<float*>(call.recv);
  auto tag = [&](size_t c, int phase) { return planned.tag_base + 1 + 2 * c + phase; };
  auto block = [&](std::vector<char>& buf, size_t c, int q) { return buf.data() + L.block_at[c * p + q]; };
  auto gathered = [&](size_t c, int r) { return received_.data() + L.slot_at[c] + r * L.slot[c]; };

  // Every receive is posted first (the sizes are known), so nothing waits in a queue.
  chunks_.assign(L.chunks, Chunk{});
  for (size_t c = 0; c < L.chunks; ++c) {
    Chunk& ch = chunks_[c];
    ch.gathered.resize(p);
    ch.results.resize(p);
    ch.sends.resize(2 * p);  // never resized again: the links hold pointers into them
    for (int q = 0; q < p; ++q) {
      if (q == me) {
        ch.gathered[q].done = ch.results[q].done = ch.sends[q].done = ch.sends[p + q].done = true;
        continue;
      }
      Link* link = fabric_.link(q);
      Status s = link->post_recv(tag(c, 0), gathered(c, q), L.wire(c, me), &ch.gathered[q]);
      if (s.ok()) s = link->post_recv(tag(c, 1), block(results_, c, q), L.wire(c, q), &ch.results[q]);
      if (!s.ok()) return context(s);
    }
  }
  std::vector<const void*> wires(p);
  size_t next_encode = 0, decoded = 0;
  int idle_spins = 0;
  while (decoded < L.chunks) {
    if (fabric_.aborted()) return context(error(Code::kAborted, "communicator aborted by kolo_comm_abort"));
    Status failed = fabric_.progress();
    if (!failed.ok()) return context(failed);
    bool did = false;
    for (size_t c = 0; c < next_encode; ++c) {
      Chunk& ch = chunks_[c];
      if (!ch.summed && all_done(ch.gathered, &failed)) {
        // This rank's block of chunk c: the contributions decoded and summed in fp32 in
        // rank order (kMaxWireInputs per pass), into the output (the input block is
        // encoded already, so in place is safe); the sum encoded once, sent to every rank.
        for (int r = 0; r < p; ++r) wires[r] = r == me ? block(encoded_, c, me) : gathered(c, r);
        float* acc = out + L.first(c, me);
        const int first_pass = std::min(p, kMaxWireInputs);
        KOLO_TRY(decompress_sum(acc, wires.data(), first_pass, L.len(c, me), L.fmt, Scale{}));
        for (int r = first_pass; r < p; ++r) KOLO_TRY(decompress_reduce(acc, wires[r], L.len(c, me), L.fmt, Scale{}));
        KOLO_TRY(compress(block(results_, c, me), acc, L.len(c, me), L.fmt, Scale{}));
        for (int q = 0; q < p; ++q) {
          if (q == me) continue;
          Status s = fabric_.link(q)->post_send(tag(c, 1), block(results_, c, me), L.wire(c, me), &ch.sends[p + q]);
          if (!s.ok()) return context(s);
        }
        ch.summed = did = true;
      }
      if (ch.summed && !ch.decoded && all_done(ch.results, &failed) && all_done(ch.sends, &failed)) {
        // Every rank decodes the same bytes (its own block too): the same bits everywhere.
        for (int q = 0; q < p; ++q) {
          KOLO_TRY(decompress(out + L.first(c, q), block(results_, c, q), L.len(c, q), L.fmt, call.postscale));
        }
        ch.decoded = did = true;
        ++decoded;
      }
      if (!failed.ok()) return context(failed);
    }
    if (next_encode < L.chunks) {
      // The next chunk: each block encoded once (prescale fused), block q sent to rank q.
      const size_t c = next_encode++;
      Chunk& ch = chunks_[c];
      for (int q = 0; q < p; ++q) {
        KOLO_TRY(compress(block(encoded_, c, q), in + L.first(c, q), L.len(c, q), L.fmt, call.prescale));
      }
      for (int q = 0; q < p; ++q) {
        if (q == me) continue;
        Status s = fabric_.link(q)->post_send(tag(c, 0), block(encoded_, c, q), L.wire(c, q), &ch.sends[q]);
        if (!s.ok()) return context(s);
      }
      ch.encoded = did = true;
    }
    if (did) {
      idle_spins = 0;
      continue;
    }
    if (deadline.expired()) return context(error(Code::kTimeout, "timed out (KOLO_TIMEOUT)"));
    if (++idle_spins < kSpinsBeforeSleep) {
      sched_yield();
      continue;
    }
    idle_spins = 0;
    fabric_.wait_for_activity(deadline.remaining_ms(100));
  }
  return Status();
}

}  // namespace

MadeExecutor create_compressed_link_executor(const ExecutorEnv& env) {
  if (env.fabric == nullptr) return MadeExecutor(std::unique_ptr<Executor>());
  return MadeExecutor(std::make_unique<CompressedLinkExecutor>(*env.fabric, env.rank, env.size));
}

}  // namespace kolo
