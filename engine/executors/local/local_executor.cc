// The one-host executor (a row of engine/executors' table): runs LocalPrograms on the CPU
// over the communicator's shared-memory domain. HostOps is the ops policy that touches
// real memory and waits on real counters.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/executors/executor.h"
#include "engine/executors/local/fast_box.h"
#include "engine/local/local_programs.h"
#include "engine/executors/local/op_signature.h"
#include "kernels/compress.h"
#include "kernels/host_kernels.h"
#include "support/probe.h"

namespace kolo {
namespace {

class HostOps {
 public:
  // The domain's geometry is read once per communicator (Geometry): the programs ask for
  // sizes and slot addresses in their inner loops, and an 8-byte allreduce takes about a
  // microsecond.
  struct Geometry {
    int size = 1;
    int index = 0;
    SharedDomain::SlotGeometry slots;
  };

  HostOps(SharedDomain& d, const Geometry& g, const OpSignatures& signatures, const CollCall& call,
          const Deadline& deadline, std::vector<char>& scratch)
      : d_(d), g_(g), signatures_(signatures), call_(call), deadline_(deadline), scratch_(scratch) {}

  int size() const { return g_.size; }
  int index() const { return g_.index; }
  int global_rank(int index) const { return d_.global_rank(index); }
  int index_of(int rank) const { return d_.index_of(rank); }
  uint32_t slots() const { return g_.slots.slots; }
  size_t slot_bytes() const { return g_.slots.slot_bytes; }
  char* slot(int index, uint64_t chunk) const {
    return g_.slots.base + g_.slots.rank_stride * index + g_.slots.slot_bytes * (chunk % g_.slots.slots);
  }

  Status copy(void* dst, const void* src, size_t bytes) {
    std::memcpy(dst, src, bytes);
    return Status();
  }
  Status copy_out(void* dst, const void* src, size_t bytes) {
    if (stream_outputs_) {
      stream_copy(dst, src, bytes);
    } else {
      std::memcpy(dst, src, bytes);
    }
    return Status();
  }
  void stream_outputs(bool on) { stream_outputs_ = on; }
  Status scale_copy(void* dst, const void* src, size_t count, DType dtype, ScaleUse use) {
    return kolo::scale_copy(dst, src, count, dtype, scale(use));
  }
  Status reduce(void* dst, const void* const* srcs, int n, size_t count, DType dtype, ReduceOp op, ScaleUse use) {
    return reduce_into(dst, srcs, n, count, dtype, op, scale(use));
  }
  // Streaming: reduced a block at a time into a buffer that stays in L1, then stream_copy
  // to the output (the reduce kernels' own stores would read every output line first).
  Status reduce_out(void* dst, const void* const* srcs, int n, size_t count, DType dtype, ReduceOp op, ScaleUse use) {
    if (!stream_outputs_) return reduce(dst, srcs, n, count, dtype, op, use);
    const size_t esize = dtype_size(dtype), block = sizeof(block_) / esize;
    const void* at[kMaxReduceInputs];
    for (size_t done = 0; done < count; done += block) {
      const size_t m = std::min(block, count - done);
      for (int k = 0; k < n; ++k) at[k] = static_cast<const char*>(srcs[k]) + done * esize;
      KOLO_TRY(reduce_into(block_, at, n, m, dtype, op, scale(use)));
      stream_copy(static_cast<char*>(dst) + done * esize, block_, m * esize);
    }
    return Status();
  }
  // Wire codecs (kernels/compress.h) for compressed allreduce.
  Status compress(void* wire, const float* src, size_t count, WireFormat fmt, ScaleUse use) {
    return kolo::compress(wire, src, count, fmt, scale(use));
  }
  Status decompress(float* dst, const void* wire, size_t count, WireFormat fmt) {
    return kolo::decompress(dst, wire, count, fmt, Scale{});
  }
  // dst = scale(sum of the decoded wires), added in input order.
  Status sum_wires(float* dst, const void* const* wires, int n, size_t count, WireFormat fmt, ScaleUse use) {
    return decompress_sum_all(dst, wires, n, count, fmt, scale(use));
  }
  char* scratch(size_t bytes) {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_.data();
  }

  void publish(int counter, uint64_t value) { d_.publish(counter, value); }
  Status wait_for(int index, int counter, uint64_t at_least, const char* what) {
    return d_.wait_for(index, counter, at_least, deadline_, what, signatures_);
  }
  Status wait_for_all(int counter, uint64_t at_least, const char* what) {
    return d_.wait_for_all(counter, at_least, deadline_, what, signatures_);
  }
  Status check_peers(int only_index) { return signatures_.check(only_index); }

 private:
  Scale scale(ScaleUse use) const { return scale_for(use, call_); }

  SharedDomain& d_;
  const Geometry& g_;
  const OpSignatures& signatures_;
  const CollCall& call_;
  const Deadline& deadline_;
  std::vector<char>& scratch_;
  bool stream_outputs_ = false;
  alignas(64) char block_[16 << 10];
};

class LocalExecutor final : public Executor {
 public:
  explicit LocalExecutor(SharedDomain& domain)
      : d_(domain),
        geometry_{domain.size(), domain.index(), domain.slot_geometry()},
        signatures_(domain),
        fast_(domain, signatures_) {}

  bool compresses(const CollSpec&) const override { return true; }  // the staging slots' codecs

  Status run(const PlannedCall* calls, size_t n, const Deadline& deadline) override {
    if (n != 1) return error(Code::kInternal, "the one-host executor runs one call at a time, not ", n);
    Status status = run_one(calls[0], deadline);
    if (status.ok()) return status;
    return status.with_context(str_cat("rank ", d_.global_rank(d_.index()), ", one-host ",
                                       coll_name(calls[0].call.spec.kind), ": "));
  }

 private:
  // As its Plan says: the protocol (fast boxes or slots), the algorithm, streamed outputs.
  Status run_one(const PlannedCall& planned, const Deadline& deadline) {
    const CollCall& call = planned.call;
    const Plan& plan = *planned.plan;
    const Algorithm algorithm = plan.algorithm;
    // The algorithm is part of what peers must agree on: a one-shot rank would read the
    // slots that two-shot ranks overwrite with their reduced slices.
    const bool reduces = call.spec.kind == CollKind::kAllreduce || call.spec.kind == CollKind::kReduce;
    // AVG is lowered to a sum and a divisor by Communicator::lowered.
    signatures_.set(op_sequence_, call.spec, reduces && algorithm == Algorithm::kTwoShot, call.postscale.divisor > 1);
    KOLO_PROBE(kAnnounced);
    Status status;
    if (plan.protocol == Protocol::kFastBox) {
      status = fast_.run(call, deadline);  // publishes the signature once its box is posted
    } else if (plan.protocol != Protocol::kSlots || plan.chunk_bytes != geometry_.slots.slot_bytes) {
      // A Plan this executor cannot honour (the chunk is the domain's slot, which every
      // rank has alike): no program runs another way than planned.
      status = error(Code::kInternal, "the one-host executor runs fast boxes, or chunks of its ",
                     geometry_.slots.slot_bytes, "-byte slots; the Plan asks for protocol ", protocol_name(plan.protocol),
                     " in chunks of ", plan.chunk_bytes, " bytes");
    } else {
      signatures_.publish();
      HostOps ops(d_, geometry_, signatures_, call, deadline, scratch_);
      ops.stream_outputs(plan.streamed_outputs);
      LocalPrograms<HostOps> programs(ops, next_chunk_);
      if (!call.spec.compressed()) status = programs.run(call, algorithm);
      else if (call.spec.kind == CollKind::kAllreduce) status = programs.compressed_allreduce(call, algorithm != Algorithm::kTwoShot);
      else status = programs.compressed_scatter_or_gather(call);
    }
    ++op_sequence_;
    if (!status.ok()) d_.mark_failed(status.message());  // the peers must not wait for us until their deadline
    return status;
  }

  SharedDomain& d_;
  HostOps::Geometry geometry_;
  OpSignatures signatures_;
  FastBoxes fast_;  // small messages (fast_box.h); the staging slots take the rest
  uint64_t next_chunk_ = 0;
  uint64_t op_sequence_ = 0;
  std::vector<char> scratch_;
};

}  // namespace

// Where every rank shares memory with every other: its fast boxes' payload, and outputs
// from KOLO_SHM_STREAM_BYTES on written past the caches (non-temporal stores: with the
// inputs beside them they overflow the last-level cache, so an ordinary store reads each
// output line in only to overwrite it). Off by default: on the development VM (AMD EPYC)
// streaming was slower than write-allocate, 8.7-9.0 vs 9.7-10.1 GB/s busbw for 64-256 MB
// allreduces out of place on 2 ranks, and 9.2 vs 12.2 in place.
bool declare_local_executor(const PlannerInputs& in, PlanContext& ctx) {
  if (!in.facts.shared_memory) return false;
  ctx.shared_memory = true;
  ctx.fast_box_bytes = FastBoxes::kPayloadBytes;
  ctx.stream_bytes = in.settings.shm_stream_bytes;
  return true;
}

MadeExecutor create_local_executor(const ExecutorEnv& env) {
  if (env.shared == nullptr) return error(Code::kInternal, "rank ", env.rank, ": the one-host executor without a shared-memory domain");
  return MadeExecutor(std::make_unique<LocalExecutor>(*env.shared));
}

}  // namespace kolo
