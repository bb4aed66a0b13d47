// The "compressed" row: FLOAT32 collectives carried in a wire type (fp16, bf16,
// block-scaled fp8) over the fabric's links, where the one-host executors cannot run them
// (ranks on several hosts). An allreduce runs two phases, as the one-host two-shot:
//   1. every rank encodes each block of its input once (prescale fused) and sends block q
//      to rank q; rank q decodes the contributions and sums them in fp32, in rank order;
//   2. rank q encodes its block's sum once and sends it to every rank; every rank decodes
//      every block, its own too, applying postscale (AVG's division included).
// So each contribution is rounded once to the wire type and the result once more, however
// many ranks there are (the bound of docs/device.md's two-shot), and every rank decodes
// the same bytes: the same bits everywhere. reduce_scatter is phase 1 alone (block q is
// rank q's recvcount values; the fp32 sum, postscaled, is the output: one rounding per
// contribution), allgather phase 2 alone (rank q's input encoded once; every rank, q too,
// decodes the same bytes). The links carry wire bytes only. A call runs in 1 MB chunks,
// pipelined: a chunk's codecs run while the links carry earlier chunks.
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
// buffers. allreduce: chunk c covers values [c * kChunkValues, ...), cut into p blocks;
// reduce_scatter and allgather: block q of chunk c is values [c * kChunkValues, ...) of
// rank q's count (in the input of reduce_scatter, the output of allgather).
struct Layout {
  int p = 1;
  bool split = true;  // allreduce: chunks of the whole vector, split among the ranks
  size_t n = 0, chunks = 0;
  WireFormat fmt;
  std::vector<size_t> block_at;  // (c, q) -> offset in encoded_/results_; [chunks * p] = total
  std::vector<size_t> slot_at;   // c -> offset of chunk c's receive slots in received_
  std::vector<size_t> slot;      // c -> bytes per receive slot of chunk c
  size_t chunk_first(size_t c) const { return c * kChunkValues; }
  size_t chunk_len(size_t c) const { return std::min(kChunkValues, n - c * kChunkValues); }
  size_t first(size_t c, int q) const {
    return split ? chunk_first(c) + block_first(chunk_len(c), p, q) : q * n + chunk_first(c);
  }
  size_t len(size_t c, int q) const { return split ? block_len(chunk_len(c), p, q) : chunk_len(c); }
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
  Status context(const Status& s) const { return s.with_context(str_cat("rank ", rank_, ", compressed ", what_, ": ")); }
  static bool all_done(const std::vector<TransferRequest>& reqs, Status* failed);

  Fabric& fabric_;
  const int rank_, size_;
  std::vector<char> encoded_;   // this rank's input, encoded block by block
  std::vector<char> received_;  // the peers' encodings of this rank's blocks
  std::vector<char> results_;   // every block's encoded sum
  std::vector<Chunk> chunks_;
  const char* what_ = "allreduce";
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
  const bool allreduce = spec.kind == CollKind::kAllreduce;
  const bool scatter = allreduce || spec.kind == CollKind::kReduceScatter;  // phase 1
  const bool gather = allreduce || spec.kind == CollKind::kAllgather;       // phase 2
  what_ = coll_name(spec.kind);
  if (!(scatter || gather) || spec.dtype != DType::kFloat32 || !spec.compressed()) {
    return error(Code::kInternal, "rank ", rank_, ": the compressed executor runs allreduce, reduce_scatter and "
                 "allgather of FLOAT32 with a wire type, not this call");
  }
  const int p = size_, me = rank_;
  Layout L;
  L.p = p;
  L.split = allreduce;
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
  encoded_.resize(scatter ? L.block_at.back() : 0);
  results_.resize(gather ? L.block_at.back() : 0);
  received_.resize(scatter ? L.slot_at.back() : 0);
  const auto* in = static_cast<const float*>(call.send);
  auto* out = static_cast<float*>(call.recv);
  auto tag = [&](size_t c, int phase) { return planned.tag_base + 1 + 2 * c + phase; };
  auto block = [&](std::vector<char>& buf, size_t c, int q) { return buf.data() + L.block_at[c * p + q]; };
  auto gathered = [&](size_t c, int r) { return received_.data() + L.slot_at[c] + r * L.slot[c]; };

  // Every receive is posted first (the sizes are known), so nothing waits in a queue.
  // What a call has no phase for is done from the start.
  chunks_.assign(L.chunks, Chunk{});
  for (size_t c = 0; c < L.chunks; ++c) {
    Chunk& ch = chunks_[c];
    ch.gathered.resize(p);
    ch.results.resize(p);
    ch.sends.resize(2 * p);  // never resized again: the links hold pointers into them
    for (int q = 0; q < p; ++q) {
      ch.gathered[q].done = q == me || !scatter;
      ch.results[q].done = q == me || !gather;
      ch.sends[q].done = q == me || !scatter;
      ch.sends[p + q].done = q == me || !gather;
      if (q == me) continue;
      Link* link = fabric_.link(q);
      Status s;
      if (scatter) s = link->post_recv(tag(c, 0), gathered(c, q), L.wire(c, me), &ch.gathered[q]);
      if (s.ok() && gather) s = link->post_recv(tag(c, 1), block(results_, c, q), L.wire(c, q), &ch.results[q]);
      if (!s.ok()) return context(s);
    }
  }
  // Rank q's encoded block of chunk c (phase 2), sent to every other rank.
  auto send_result = [&](size_t c) -> Status {
    for (int q = 0; q < p; ++q) {
      if (q == me) continue;
      Status s = fabric_.link(q)->post_send(tag(c, 1), block(results_, c, me), L.wire(c, me), &chunks_[c].sends[p + q]);
      if (!s.ok()) return context(s);
    }
    return Status();
  };
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
        if (scatter) {
          // This rank's block of chunk c: the contributions decoded and summed in fp32 in
          // rank order, into the output (the input block is encoded already, so in place
          // is safe). reduce_scatter: that is the result (postscaled); allreduce: the sum
          // is encoded once and sent to every rank.
          for (int r = 0; r < p; ++r) wires[r] = r == me ? block(encoded_, c, me) : gathered(c, r);
          float* acc = out + (allreduce ? L.first(c, me) : L.chunk_first(c));
          KOLO_TRY(decompress_sum_all(acc, wires.data(), p, L.len(c, me), L.fmt, allreduce ? Scale{} : call.postscale));
          if (allreduce) {
            KOLO_TRY(compress(block(results_, c, me), acc, L.len(c, me), L.fmt, Scale{}));
            KOLO_TRY(send_result(c));
          }
        }
        ch.summed = did = true;
      }
      if (ch.summed && !ch.decoded && all_done(ch.results, &failed) && all_done(ch.sends, &failed)) {
        // Every rank decodes the same bytes (its own block too): the same bits everywhere.
        for (int q = 0; gather && q < p; ++q) {
          KOLO_TRY(decompress(out + L.first(c, q), block(results_, c, q), L.len(c, q), L.fmt, call.postscale));
        }
        ch.decoded = did = true;
        ++decoded;
      }
      if (!failed.ok()) return context(failed);
    }
    if (next_encode < L.chunks) {
      const size_t c = next_encode++;
      Chunk& ch = chunks_[c];
      if (scatter) {
        // The next chunk: each block encoded once (prescale fused), block q sent to rank q.
        for (int q = 0; q < p; ++q) {
          KOLO_TRY(compress(block(encoded_, c, q), in + L.first(c, q), L.len(c, q), L.fmt, call.prescale));
        }
        for (int q = 0; q < p; ++q) {
          if (q == me) continue;
          Status s = fabric_.link(q)->post_send(tag(c, 0), block(encoded_, c, q), L.wire(c, q), &ch.sends[q]);
          if (!s.ok()) return context(s);
        }
      } else {
        // allgather: this rank's chunk encoded once, to every rank.
        KOLO_TRY(compress(block(results_, c, me), in + L.chunk_first(c), L.len(c, me), L.fmt, call.prescale));
        KOLO_TRY(send_result(c));
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
