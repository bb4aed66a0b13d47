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
// decodes the same bytes). The links carry wire bytes only. A call runs in the Plan's
// chunks (1 MB of fp32), pipelined: a chunk's codecs run while the links carry earlier ones.
//
// Hierarchical (allreduce on hosts of equal rank counts L >= 2, when the planner's model
// prefers it): the ranks of a host first reduce-scatter in fp32 over their local links
// (local rank i gets part i summed over its host), part i is allreduced as above among
// the local-rank-i ranks of every host (the host's sum is the contribution, encoded once:
// within the bound, since |sum| <= sum |x|), and the host's ranks allgather the parts in
// fp32. The network carries 1/L of the flat form's bytes.
#include <sched.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "engine/executors/executor.h"
#include "engine/schedules/ring_order.h"
#include "kernels/compress.h"

namespace kolo {
namespace {

constexpr int kSpinsBeforeSleep = 200;
// Tags of the hierarchical form's fp32 phases, above the two-shot's (2 per chunk).
constexpr uint64_t kLocalScatterTag = uint64_t{1} << 31;
constexpr uint64_t kLocalGatherTag = kLocalScatterTag + (uint64_t{1} << 30);

size_t round16(size_t bytes) { return (bytes + 15) & ~size_t{15}; }

// Block q of n values split among p ranks: the first n % p blocks one value longer.
size_t block_first(size_t n, int p, int q) { return q * (n / p) + std::min<size_t>(q, n % p); }
size_t block_len(size_t n, int p, int q) { return n / p + (static_cast<size_t>(q) < n % p ? 1 : 0); }

// One call: its chunks, and where each chunk's encoded blocks lie in the executor's
// buffers. allreduce: chunk c covers values [c * k, ...), cut into p blocks;
// reduce_scatter and allgather: block q of chunk c is values [c * k, ...) of rank q's
// count (in the input of reduce_scatter, the output of allgather). k: the Plan's values
// per chunk (compressed_chunk_values).
struct Layout {
  int p = 1;
  size_t k = 1;
  bool split = true;  // allreduce: chunks of the whole vector, split among the ranks
  size_t n = 0, chunks = 0;
  WireFormat fmt;
  std::vector<size_t> block_at;  // (c, q) -> offset in encoded_/results_; [chunks * p] = total
  std::vector<size_t> slot_at;   // c -> offset of chunk c's receive slots in received_
  std::vector<size_t> slot;      // c -> bytes per receive slot of chunk c
  size_t chunk_first(size_t c) const { return c * k; }
  size_t chunk_len(size_t c) const { return std::min(k, n - c * k); }
  size_t first(size_t c, int q) const {
    return split ? chunk_first(c) + block_first(chunk_len(c), p, q) : q * n + chunk_first(c);
  }
  size_t len(size_t c, int q) const { return split ? block_len(chunk_len(c), p, q) : chunk_len(c); }
  size_t wire(size_t c, int q) const { return wire_bytes(fmt, len(c, q)); }
};

// The ranks a phase runs among (communicator ranks) and this rank's index in them.
struct Group {
  std::vector<int> ranks;
  int me = 0;
  int size() const { return static_cast<int>(ranks.size()); }
};

class CompressedLinkExecutor final : public Executor {
 public:
  CompressedLinkExecutor(Fabric& fabric, int rank, int size, std::vector<std::vector<int>> hosts)
      : fabric_(fabric), rank_(rank), size_(size), hosts_(std::move(hosts)) {}

  bool compresses(const CollSpec&) const override { return true; }

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
  // One compressed call among the ranks of g: `n` values per block (reduce_scatter,
  // allgather) or in all (allreduce).
  struct Part {
    CollKind kind;
    DType wire;
    const float* in;
    float* out;
    size_t n;
    Scale pre, post;
    uint64_t tag_base;
    // Hierarchical: run before chunk c is encoded (its fp32 input made) and after it is
    // decoded (its result handed on). Chunk c is values [c * chunk_values_, ...) of `n`.
    std::function<Status(size_t c)> before_encode, after_decode;
  };
  Status run_one(const PlannedCall& planned, const Deadline& deadline);
  Status two_shot(const Group& g, const Part& part, const Deadline& deadline);
  Status hierarchical(const PlannedCall& planned, const Deadline& deadline);
  // Progresses the links until every request is done, the deadline passes or one fails.
  Status wait_all(const std::vector<std::vector<TransferRequest>*>& reqs, const Deadline& deadline);
  Status context(const Status& s) const { return s.with_context(str_cat("rank ", rank_, ", compressed ", what_, ": ")); }
  static bool all_done(const std::vector<TransferRequest>& reqs, Status* failed);
  // Between progress passes that did nothing: yield, then sleep on the links.
  Status idle(int* spins, const Deadline& deadline);

  Fabric& fabric_;
  const int rank_, size_;
  const std::vector<std::vector<int>> hosts_;  // the communicator's ranks by host
  std::vector<char> encoded_;   // this rank's input, encoded block by block
  std::vector<char> received_;  // the peers' encodings of this rank's blocks
  std::vector<char> results_;   // every block's encoded sum
  std::vector<float> partials_;  // hierarchical: the host's fp32 inputs of this rank's part
  // Hierarchical: per local peer, per chunk, the fp32 transfers in the host (phase 1 in and
  // out, phase 3 in and out); members, as the links hold pointers into them.
  std::vector<std::vector<TransferRequest>> scatter_in_, scatter_out_, gather_in_, gather_out_;
  std::vector<Chunk> chunks_;
  const char* what_ = "allreduce";
  size_t chunk_values_ = 0;  // the call's Plan's values per pipeline chunk
};

bool CompressedLinkExecutor::all_done(const std::vector<TransferRequest>& reqs, Status* failed) {
  bool all = true;
  for (const TransferRequest& r : reqs) {
    if (r.done && !r.status.ok() && failed->ok()) *failed = r.status;
    all &= r.done;
  }
  return all;
}

Status CompressedLinkExecutor::idle(int* spins, const Deadline& deadline) {
  if (deadline.expired()) return context(error(Code::kTimeout, "timed out (KOLO_TIMEOUT)"));
  if (++*spins < kSpinsBeforeSleep) {
    sched_yield();
    return Status();
  }
  *spins = 0;
  fabric_.wait_for_activity(deadline.remaining_ms(100));
  return Status();
}

Status CompressedLinkExecutor::wait_all(const std::vector<std::vector<TransferRequest>*>& reqs,
                                        const Deadline& deadline) {
  int spins = 0;
  for (;;) {
    if (fabric_.aborted()) return context(error(Code::kAborted, "communicator aborted by kolo_comm_abort"));
    Status failed = fabric_.progress();
    if (!failed.ok()) return context(failed);
    bool all = true;
    for (const std::vector<TransferRequest>* r : reqs) all &= all_done(*r, &failed);
    if (!failed.ok()) return context(failed);
    if (all) return Status();
    KOLO_TRY(idle(&spins, deadline));
  }
}

Status CompressedLinkExecutor::run_one(const PlannedCall& planned, const Deadline& deadline) {
  const CollCall& call = planned.call;
  const CollSpec& spec = call.spec;
  what_ = coll_name(spec.kind);
  if ((spec.kind != CollKind::kAllreduce && spec.kind != CollKind::kReduceScatter &&
       spec.kind != CollKind::kAllgather) || spec.dtype != DType::kFloat32 || !spec.compressed()) {
    return error(Code::kInternal, "rank ", rank_, ": the compressed executor runs allreduce, reduce_scatter and "
                 "allgather of FLOAT32 with a wire type, not this call");
  }
  // The pipeline's chunks as planned; they must keep the fp8 scale blocks' grid.
  chunk_values_ = planned.plan->chunk_elems;
  if (chunk_values_ == 0 || chunk_values_ % kWireFp8Block != 0) {
    return error(Code::kInternal, "rank ", rank_, ": the compressed executor cannot run chunks of ", chunk_values_,
                 " values (a multiple of ", kWireFp8Block, " is needed)");
  }
  if (planned.plan->algorithm == Algorithm::kHierarchical) return hierarchical(planned, deadline);
  Group all;
  for (int r = 0; r < size_; ++r) all.ranks.push_back(r);
  all.me = rank_;
  return two_shot(all, Part{spec.kind, spec.wire, static_cast<const float*>(call.send), static_cast<float*>(call.recv),
                            spec.count, call.prescale, call.postscale, planned.tag_base, nullptr, nullptr},
                  deadline);
}

Status CompressedLinkExecutor::hierarchical(const PlannedCall& planned, const Deadline& deadline) {
  const CollCall& call = planned.call;
  const size_t n = call.spec.count;
  // The plan asks for this form only on hosts of equal rank counts (balanced_hosts).
  const int H = static_cast<int>(hosts_.size()), L = H > 0 ? static_cast<int>(hosts_[0].size()) : 0;
  Group local, cross;
  for (int h = 0; h < H; ++h) {
    if (static_cast<int>(hosts_[h].size()) != L) {
      return error(Code::kInternal, "rank ", rank_, ": hierarchical compressed allreduce on hosts of unequal size");
    }
    for (int i = 0; i < L; ++i) {
      if (hosts_[h][i] == rank_) local.ranks = hosts_[h], local.me = i;
    }
  }
  for (int h = 0; h < H; ++h) cross.ranks.push_back(hosts_[h][local.me]);
  for (int h = 0; h < H; ++h) {
    if (cross.ranks[h] == rank_) cross.me = h;
  }
  const int me = local.me;
  const auto* in = static_cast<const float*>(call.send);
  auto* out = static_cast<float*>(call.recv);
  auto first = [&](int i) { return block_first(n, L, i); };
  auto len = [&](int i) { return block_len(n, L, i); };

  // The three phases run chunk by chunk (chunk_values_ of a part), overlapped: every fp32
  // transfer in the host is posted at once; chunk c of this rank's part is summed over the
  // host just before the two-shot encodes it, and sent to the host's ranks as soon as the
  // two-shot has decoded it, while the network carries other chunks.
  const size_t K = chunk_values_;
  auto chunks_of = [&](int i) { return (len(i) + K - 1) / K; };
  auto clen = [&](int i, size_t c) { return std::min(K, len(i) - c * K); };
  partials_.resize(len(me) * L);
  for (auto* v : {&scatter_in_, &scatter_out_, &gather_in_, &gather_out_}) v->assign(L, {});
  std::vector<std::vector<TransferRequest>*> all;
  for (int i = 0; i < L; ++i) {
    if (i == me) continue;
    // Sized before anything is posted: never resized while the links hold pointers.
    scatter_in_[i].resize(chunks_of(me));
    gather_out_[i].resize(chunks_of(me));
    scatter_out_[i].resize(chunks_of(i));
    gather_in_[i].resize(chunks_of(i));
    KOLO_TRY(context(fabric_.connect(local.ranks[i], deadline)));
    Link* link = fabric_.link(local.ranks[i]);
    for (size_t c = 0; c < chunks_of(me); ++c) {
      Status s = link->post_recv(planned.tag_base + kLocalScatterTag + c, partials_.data() + i * len(me) + c * K,
                                 clen(me, c) * sizeof(float), &scatter_in_[i][c]);
      if (!s.ok()) return context(s);
    }
    for (size_t c = 0; c < chunks_of(i); ++c) {
      Status s = link->post_recv(planned.tag_base + kLocalGatherTag + c, out + first(i) + c * K,
                                 clen(i, c) * sizeof(float), &gather_in_[i][c]);
      if (s.ok()) {
        s = link->post_send(planned.tag_base + kLocalScatterTag + c, in + first(i) + c * K, clen(i, c) * sizeof(float),
                            &scatter_out_[i][c]);
      }
      if (!s.ok()) return context(s);
    }
    all.insert(all.end(), {&scatter_in_[i], &scatter_out_[i], &gather_in_[i], &gather_out_[i]});
  }
  float* part = out + first(me);
  Part cross_part{CollKind::kAllreduce, call.spec.wire, part, part, len(me), call.prescale, call.postscale,
                  planned.tag_base, nullptr, nullptr};
  // 1. Chunk c of part `me`, summed over the host in local rank order (this rank's own
  //    input copied first: in place, the part is that input).
  cross_part.before_encode = [&](size_t c) -> Status {
    const size_t at = c * K, count = clen(me, c);
    std::copy(in + first(me) + at, in + first(me) + at + count, partials_.data() + me * len(me) + at);
    int spins = 0;
    Status failed;
    for (;;) {
      bool arrived = true;
      for (int i = 0; i < L; ++i) arrived &= i == me || (scatter_in_[i][c].done && scatter_in_[i][c].status.ok());
      if (arrived) break;
      for (int i = 0; i < L; ++i) {
        if (i != me && scatter_in_[i][c].done && !scatter_in_[i][c].status.ok()) return context(scatter_in_[i][c].status);
      }
      if (fabric_.aborted()) return context(error(Code::kAborted, "communicator aborted by kolo_comm_abort"));
      failed = fabric_.progress();
      if (!failed.ok()) return context(failed);
      KOLO_TRY(idle(&spins, deadline));
    }
    std::copy(partials_.data() + at, partials_.data() + at + count, part + at);
    for (int i = 1; i < L; ++i) {
      const float* x = partials_.data() + i * len(me) + at;
      for (size_t k = 0; k < count; ++k) part[at + k] += x[k];
    }
    return Status();
  };
  // 2. runs between them: the part, compressed, among this local index's ranks of every host.
  // 3. Chunk c of the result to the host's other ranks.
  cross_part.after_decode = [&](size_t c) -> Status {
    for (int i = 0; i < L; ++i) {
      if (i == me) continue;
      Status s = fabric_.link(local.ranks[i])->post_send(planned.tag_base + kLocalGatherTag + c, part + c * K,
                                                        clen(me, c) * sizeof(float), &gather_out_[i][c]);
      if (!s.ok()) return context(s);
    }
    return Status();
  };
  KOLO_TRY(two_shot(cross, cross_part, deadline));
  return wait_all(all, deadline);
}

Status CompressedLinkExecutor::two_shot(const Group& g, const Part& part, const Deadline& deadline) {
  const bool allreduce = part.kind == CollKind::kAllreduce;
  const bool scatter = allreduce || part.kind == CollKind::kReduceScatter;  // phase 1
  const bool gather = allreduce || part.kind == CollKind::kAllgather;       // phase 2
  const int p = g.size(), me = g.me;
  Layout L;
  L.p = p;
  L.split = allreduce;
  L.n = part.n;
  L.fmt = wire_format(part.wire);
  L.k = chunk_values_;
  L.chunks = (L.n + L.k - 1) / L.k;
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
  const float* in = part.in;
  float* out = part.out;
  auto tag = [&](size_t c, int phase) { return part.tag_base + 1 + 2 * c + phase; };
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
      KOLO_TRY(context(fabric_.connect(g.ranks[q], deadline)));
      Link* link = fabric_.link(g.ranks[q]);
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
      Status s = fabric_.link(g.ranks[q])->post_send(tag(c, 1), block(results_, c, me), L.wire(c, me), &chunks_[c].sends[p + q]);
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
          KOLO_TRY(decompress_sum_all(acc, wires.data(), p, L.len(c, me), L.fmt, allreduce ? Scale{} : part.post));
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
          KOLO_TRY(decompress(out + L.first(c, q), block(results_, c, q), L.len(c, q), L.fmt, part.post));
        }
        ch.decoded = did = true;
        ++decoded;
        if (part.after_decode) KOLO_TRY(part.after_decode(c));
      }
      if (!failed.ok()) return context(failed);
    }
    if (next_encode < L.chunks) {
      const size_t c = next_encode++;
      Chunk& ch = chunks_[c];
      if (part.before_encode) KOLO_TRY(part.before_encode(c));
      if (scatter) {
        // The next chunk: each block encoded once (prescale fused), block q sent to rank q.
        for (int q = 0; q < p; ++q) {
          KOLO_TRY(compress(block(encoded_, c, q), in + L.first(c, q), L.len(c, q), L.fmt, part.pre));
        }
        for (int q = 0; q < p; ++q) {
          if (q == me) continue;
          Status s = fabric_.link(g.ranks[q])->post_send(tag(c, 0), block(encoded_, c, q), L.wire(c, q), &ch.sends[q]);
          if (!s.ok()) return context(s);
        }
      } else {
        // allgather: this rank's chunk encoded once, to every rank.
        KOLO_TRY(compress(block(results_, c, me), in + L.chunk_first(c), L.len(c, me), L.fmt, part.pre));
        KOLO_TRY(send_result(c));
      }
      ch.encoded = did = true;
    }
    if (did) {
      idle_spins = 0;
      continue;
    }
    KOLO_TRY(idle(&idle_spins, deadline));
  }
  return Status();
}

}  // namespace

// Wire-typed calls over the links: wherever there are links.
bool declare_compressed_link_executor(const PlannerInputs&, PlanContext&) { return true; }

MadeExecutor create_compressed_link_executor(const ExecutorEnv& env) {
  PlanContext ctx;
  ctx.rank = env.rank;
  ctx.size = env.size;
  ctx.host_of_rank = env.host_of_rank;
  return MadeExecutor(std::make_unique<CompressedLinkExecutor>(*env.fabric, env.rank, env.size, ranks_by_host(ctx)));
}

}  // namespace kolo
