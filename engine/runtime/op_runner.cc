#include "engine/runtime/op_runner.h"

#include <algorithm>
#include <cstring>

#include "engine/adasum.h"
#include "kernels/codec_trace.h"
#include "kernels/host_kernels.h"
#include "support/device/buffer_place.h"
#include "support/device/device.h"
#include "support/clock.h"
#include "support/env.h"

namespace kolo::runtime {
namespace {

CollCall make_call(CollKind kind, const Signature& sig, size_t count, const void* send, void* recv) {
  CollCall call;
  call.spec.kind = kind;
  call.spec.dtype = sig.dtype;
  call.spec.op = sig.op;
  call.spec.count = count;
  call.spec.in_place = send == recv;
  call.send = send;
  call.recv = recv;
  return call;
}

// Timeline phases are static strings: the timeline keeps the pointer, not a copy. Horovod's
// vocabulary (its timeline.cc), so that its tools and habits read kolo's: the operation
// (ALLREDUCE), its negotiation (NEGOTIATE_ALLREDUCE), QUEUE, MEMCPY_IN_FUSION_BUFFER,
// MEMCPY_OUT_FUSION_BUFFER, and CYCLE_START marks.
const char* phase_name(OpKind kind) {
  switch (kind) {
    case OpKind::kAllgather: return "ALLGATHER";
    case OpKind::kBroadcast: return "BROADCAST";
    case OpKind::kAlltoall: return "ALLTOALL";
    case OpKind::kReduceScatter: return "REDUCESCATTER";
    default: return "ALLREDUCE";
  }
}
const char* negotiate_name(OpKind kind) {
  switch (kind) {
    case OpKind::kAllgather: return "NEGOTIATE_ALLGATHER";
    case OpKind::kBroadcast: return "NEGOTIATE_BROADCAST";
    case OpKind::kAlltoall: return "NEGOTIATE_ALLTOALL";
    case OpKind::kReduceScatter: return "NEGOTIATE_REDUCESCATTER";
    default: return "NEGOTIATE_ALLREDUCE";
  }
}

}  // namespace

OpRunner::OpRunner(Communicator& comm, double timeout_seconds) : comm_(comm), timeout_seconds_(timeout_seconds) {}

Status OpRunner::prepare(const Request& request) {
  KOLO_TRY(lane_.use(request.sig.device ? request.device : -1));
  return lane_.wait_ready(request.ready);
}

Status OpRunner::collective(const CollCall& call) { return collective_group({call}); }

Status OpRunner::collective_group(std::vector<CollCall> calls) {
  for (CollCall& call : calls) lane_.place(call);
  Status s = comm_.run_group(calls);
  if (!s.ok() && comm_error_.ok()) comm_error_ = s;
  return s;
}

// The timeline shows the Plan that ran (the communicator's last), not a second opinion, and
// the call's number in the communicator's flight recorder (its "seq"), so that one call can
// be followed in both.
std::string OpRunner::plan_args(const CollSpec& spec) const {
  if (timeline_ == nullptr) return "";
  const Plan* p = comm_.last_plan();
  const std::string algorithm = spec.kind == CollKind::kSend ? "send/recv group" : p != nullptr ? plan_label(*p) : "";
  return str_cat("\"algorithm\": \"", algorithm, "\", \"seq\": ", comm_.last_call_seq());
}

void OpRunner::record(const Request& request, const char* phase, double start, double end, const std::string& args) {
  if (timeline_ != nullptr) timeline_->span(request.name, phase, start, end, args);
}

Status OpRunner::fatal(Status status) {
  if (comm_error_.ok()) comm_error_ = status;
  return status;
}

namespace {
// Waits for the lane on every way out of a group, so that no request completes while work
// queued on the runtime's stream may still use its buffers.
struct FinishLane {
  Lane& lane;
  double timeout;
  ~FinishLane() { (void)lane.finish(timeout); }
};
}  // namespace

Status OpRunner::allreduce(const std::vector<Request*>& members, double negotiated_at) {
  const Signature& sig = members.front()->sig;
  if (sig.op == ReduceOp::kAdasum) return adasum(members, negotiated_at);
  const size_t elem = dtype_size(sig.dtype);
  size_t tensors = 0;
  for (const Request* r : members) tensors += r->sig.counts.size();
  const double start = now_seconds();
  FinishLane finish_lane{lane_, timeout_seconds_};
  // A failure of this rank's own copies or memory after negotiation is fatal to the
  // runtime: the peers are about to run the collective, and this rank cannot go on out of
  // step with them.
  for (const Request* r : members) {
    record(*r, negotiate_name(r->sig.kind), r->enqueued_at, negotiated_at);
    record(*r, "QUEUE", negotiated_at, start);
    Status s = prepare(*r);
    if (!s.ok()) return fatal(s);
  }
  // Which tensors go through the fusion buffer: the small ones, whose per-call cost the
  // packing saves. A large tensor (or a lone one) is reduced in place as its own call of
  // the same group: copying it in and out would cost more memory traffic than the
  // allreduce itself on a host, while its per-call start-up is small next to its bytes.
  // Decided from the signature alone, so a joined rank (null buffers: zeros) makes the
  // same calls as the others; its large tensors are zeros in the scratch buffer.
  std::vector<CollCall> calls;
  std::vector<std::pair<const Request*, size_t>> packed;  // (request, tensor index)
  std::vector<std::pair<size_t, size_t>> zeros;           // (call index, bytes) of a joined rank's large tensors
  size_t packed_count = 0, zero_bytes = 0;
  for (const Request* r : members) {
    for (size_t t = 0; t < r->sig.counts.size(); ++t) {
      const size_t count = r->sig.counts[t];
      if (tensors == 1 || count * elem >= kInPlaceBytes) {
        CollCall call = make_call(CollKind::kAllreduce, sig, count, r->sends[t], r->recvs[t]);
        call.spec.wire = sig.wire;
        call.prescale.factor = sig.prescale;
        call.postscale.factor = sig.postscale;
        if (r->sends[t] == nullptr || r->recvs[t] == nullptr) {
          zeros.emplace_back(calls.size(), count * elem);
          zero_bytes += count * elem;
        }
        calls.push_back(call);
      } else {
        packed.emplace_back(r, t);
        packed_count += count;
      }
    }
  }
  if (zero_bytes > 0) {
    auto scratch = lane_.scratch(zero_bytes);
    if (!scratch.ok()) return fatal(scratch.status());
    Status s = lane_.zero(scratch.value(), zero_bytes);
    if (!s.ok()) return fatal(s);
    size_t at = 0;
    for (const auto& [index, bytes] : zeros) {
      calls[index].send = calls[index].recv = scratch.value() + at;
      calls[index].spec.in_place = true;
      at += bytes;
    }
  }
  auto fusion = lane_.fusion(packed_count * elem);
  if (!fusion.ok()) return fatal(fusion.status());
  char* const buffer = fusion.value();
  fusion_bytes_ = std::max(fusion_bytes_, packed_count * elem);
  if (packed_count > 0) {
    CollCall call = make_call(CollKind::kAllreduce, sig, packed_count, buffer, buffer);
    call.spec.wire = sig.wire;
    if (sig.op == ReduceOp::kAvg) call.spec.op = ReduceOp::kSum;
    calls.push_back(call);
  }
  // A refusal (a compressed call no executor compresses, such as one in a group) fails
  // these requests on every rank
  // alike, before anything ran or was copied, and leaves the runtime working.
  if (sig.wire != DType::kCount) {
    for (CollCall call : calls) {
      lane_.place(call);
      Status s = comm_.check_runnable(call);
      if (!s.ok()) return error(s.code(), "tensor '", members.front()->name, "': ", s.message());
    }
  }
  const Scale prescale{sig.prescale, 1};
  // AVG divides in the copy out: the collective sums, and the integer case truncates once.
  const Scale postscale{sig.postscale, sig.op == ReduceOp::kAvg ? comm_.size() : 1};
  size_t offset = 0;
  const double t0 = now_seconds();
  for (const auto& [r, t] : packed) {
    const size_t count = r->sig.counts[t];
    char* at = buffer + offset * elem;
    Status s = r->sends[t] == nullptr ? lane_.zero(at, count * elem)
                                      : lane_.scale_copy(at, r->sends[t], count, sig.dtype, prescale);
    if (!s.ok()) return fatal(s);
    offset += count;
  }
  const double t1 = now_seconds();
  // With a timeline and a wire type, the host codecs' spans are kept (codec_trace.h) and
  // drawn inside the collective's.
  CodecTrace codecs;
  const bool trace_codecs = timeline_ != nullptr && sig.wire != DType::kCount && !sig.device;
  {
    ScopedCodecTrace scope(trace_codecs ? &codecs : nullptr);
    // One call at a time: on one host each runs the shared-memory path, which a group
    // (a combined schedule over links) would not; a call's start-up is about a microsecond.
    for (const CollCall& call : calls) KOLO_TRY(collective(call));
  }
  const double t2 = now_seconds();
  offset = 0;
  for (const auto& [r, t] : packed) {
    const size_t count = r->sig.counts[t];
    if (r->recvs[t] != nullptr) {
      Status s = lane_.scale_copy(r->recvs[t], buffer + offset * elem, count, sig.dtype, postscale);
      if (!s.ok()) return fatal(s);
    }
    offset += count;
  }
  Status finished = lane_.finish(timeout_seconds_);
  if (!finished.ok()) return fatal(finished);
  const double t3 = now_seconds();
  if (timeline_ == nullptr) return Status();
  size_t bytes = 0;
  for (const CollCall& c : calls) bytes += c.spec.bytes();
  std::string args = str_cat(plan_args(calls.back().spec), ", \"fused_tensors\": ", tensors,
                             ", \"packed_tensors\": ", packed.size(), ", \"bytes\": ", bytes);
  if (trace_codecs) {
    args += str_cat(", \"wire\": \"", dtype_name(sig.wire), "\", \"encode_us\": ",
                    static_cast<int64_t>(codecs.encode_seconds * 1e6), ", \"decode_us\": ",
                    static_cast<int64_t>(codecs.decode_seconds * 1e6));
  }
  for (const Request* r : members) {
    bool in_buffer = false;
    for (const auto& p : packed) in_buffer |= p.first == r;
    if (in_buffer) record(*r, "MEMCPY_IN_FUSION_BUFFER", t0, t1);
    record(*r, "ALLREDUCE", t1, t2, args);
    for (const CodecSpan& c : codecs.spans) record(*r, c.encode ? "WIRE_ENCODE" : "WIRE_DECODE", c.start, c.end);
    if (in_buffer) record(*r, "MEMCPY_OUT_FUSION_BUFFER", t2, t3);
  }
  return Status();
}

Status OpRunner::adasum(const std::vector<Request*>& members, double negotiated_at) {
  const Signature& sig = members.front()->sig;
  const size_t elem = dtype_size(sig.dtype);
  const double start = now_seconds();
  FinishLane finish_lane{lane_, timeout_seconds_};
  std::vector<size_t> segments;
  size_t total = 0;
  for (const Request* r : members) {
    record(*r, negotiate_name(r->sig.kind), r->enqueued_at, negotiated_at);
    record(*r, "QUEUE", negotiated_at, start);
    Status s = prepare(*r);
    if (!s.ok()) return fatal(s);
    for (size_t c : r->sig.counts) {
      segments.push_back(c);
      total += c;
    }
  }
  if (adasum_buffer_.size() < total * elem) adasum_buffer_.resize(total * elem);
  char* const host = adasum_buffer_.data();
  size_t at = 0;
  for (const Request* r : members) {  // a joined rank (no buffers) contributes zeros
    for (size_t t = 0; t < r->sig.counts.size(); ++t) {
      const size_t bytes = r->sig.counts[t] * elem;
      if (r->sends[t] == nullptr) {
        std::memset(host + at, 0, bytes);
      } else {
        Status s = lane_.copy(host + at, r->sends[t], bytes);
        if (!s.ok()) return fatal(s);
      }
      at += bytes;
    }
  }
  Status s = lane_.finish(timeout_seconds_);
  if (s.ok()) s = scale_copy(host, host, total, sig.dtype, Scale{sig.prescale, 1});
  if (!s.ok()) return fatal(s);
  const double t1 = now_seconds();
  s = adasum_allreduce(comm_, host, total, sig.dtype, segments);
  if (!s.ok()) return fatal(s);
  const double t2 = now_seconds();
  s = scale_copy(host, host, total, sig.dtype, Scale{sig.postscale, 1});
  at = 0;
  for (const Request* r : members) {
    for (size_t t = 0; t < r->sig.counts.size() && s.ok(); ++t) {
      const size_t bytes = r->sig.counts[t] * elem;
      if (r->recvs[t] != nullptr) s = lane_.copy(r->recvs[t], host + at, bytes);
      at += bytes;
    }
  }
  if (s.ok()) s = lane_.finish(timeout_seconds_);
  if (!s.ok()) return fatal(s);
  for (const Request* r : members) {
    record(*r, "MEMCPY_IN_FUSION_BUFFER", start, t1);
    record(*r, "ADASUM", t1, t2, str_cat("\"algorithm\": \"adasum recursive doubling\", \"fused_tensors\": ",
                                        segments.size(), ", \"bytes\": ", total * elem));
    record(*r, "MEMCPY_OUT", t2, now_seconds());
  }
  return Status();
}

void* OpRunner::output(Request& request, size_t count, const std::vector<size_t>& rank_counts, Status* failure) {
  void* out = request.alloc ? request.alloc(count, rank_counts) : nullptr;
  if (count == 0) return out;
  if (out == nullptr) {
    *failure = error(Code::kSystem, "tensor '", request.name, "': the output allocator returned NULL for ", count,
                     " elements");
  } else {
    device::BufferPlace place = device::BufferPlace::known(request.sig.device, request.device);
    Status s = place.add("the output allocator's buffer", out);
    if (s.ok()) return out;
    *failure = s.with_context(str_cat("tensor '", request.name, "': "));
  }
  auto scratch = lane_.scratch(count * dtype_size(request.sig.dtype));
  if (!scratch.ok()) {
    *failure = scratch.status();
    return nullptr;  // the collective then fails its argument check on this rank
  }
  return scratch.value();
}

Status OpRunner::allgather(const Response& resp, Request& request, CollSpec* spec) {
  const size_t row = resp.sig.counts.empty() ? 0 : resp.sig.counts[0];
  CollCall call = make_call(CollKind::kAllgatherv, resp.sig, request.local[0] * row, request.sends[0], nullptr);
  std::vector<size_t> rows;
  size_t total = 0;
  for (const auto& local : resp.locals) {
    const size_t n = local.empty() ? 0 : local[0];
    rows.push_back(n);
    call.spec.counts.push_back(n * row);
    call.spec.displs.push_back(total);
    total += n * row;
  }
  Status failure;
  call.recv = output(request, total, rows, &failure);
  call.spec.in_place = false;
  *spec = call.spec;
  KOLO_TRY(collective(call));
  return failure;
}

// Per-peer splits: a group of sends and receives (the communicator runs them together, so
// no pair can deadlock) and a local copy of this rank's own block.
Status OpRunner::alltoall(const Response& resp, Request& request) {
  const int size = comm_.size(), me = comm_.rank();
  const size_t elem = dtype_size(resp.sig.dtype);
  std::vector<size_t> recv_counts(size);
  size_t total = 0;
  for (int q = 0; q < size; ++q) total += recv_counts[q] = resp.locals[q][me];
  Status failure;
  char* out = static_cast<char*>(output(request, total, recv_counts, &failure));
  const char* in = static_cast<const char*>(request.sends[0]);
  std::vector<CollCall> calls;
  size_t send_at = 0, recv_at = 0;
  for (int q = 0; q < size; ++q) {
    const size_t send_n = resp.locals[me][q], recv_n = recv_counts[q];
    if (q == me) {
      if (send_n > 0 && out != nullptr) KOLO_TRY(lane_.copy(out + recv_at * elem, in + send_at * elem, send_n * elem));
    } else {
      CollCall send = make_call(CollKind::kSend, resp.sig, send_n, in + send_at * elem, nullptr);
      send.spec.peer = q;
      CollCall recv = make_call(CollKind::kRecv, resp.sig, recv_n, nullptr, out + recv_at * elem);
      recv.spec.peer = q;
      calls.push_back(send);
      calls.push_back(recv);
    }
    send_at += send_n;
    recv_at += recv_n;
  }
  KOLO_TRY(collective_group(calls));
  return failure;
}

Status OpRunner::run(const Response& resp, Request& request, double negotiated_at) {
  const double start = now_seconds();
  record(request, negotiate_name(request.sig.kind), request.enqueued_at, negotiated_at);
  record(request, "QUEUE", negotiated_at, start);
  FinishLane finish_lane{lane_, timeout_seconds_};
  Status prepared = prepare(request);
  if (!prepared.ok()) return fatal(prepared);
  Status status;
  CollSpec spec;
  switch (resp.sig.kind) {
    case OpKind::kBroadcast: {
      CollCall call = make_call(CollKind::kBroadcast, resp.sig, resp.sig.counts[0], request.recvs[0], request.recvs[0]);
      call.spec.root = static_cast<int>(resp.sig.root);
      spec = call.spec;
      status = collective(call);
      break;
    }
    case OpKind::kReduceScatter: {
      CollCall call = make_call(CollKind::kReduceScatter, resp.sig, resp.sig.counts[0], request.sends[0], request.recvs[0]);
      const char* own = static_cast<const char*>(request.sends[0]) +
                        comm_.rank() * resp.sig.counts[0] * dtype_size(resp.sig.dtype);
      call.spec.in_place = request.recvs[0] == own;
      spec = call.spec;
      status = collective(call);
      break;
    }
    case OpKind::kAllgather:
      status = allgather(resp, request, &spec);
      break;
    case OpKind::kAlltoall:
      spec.kind = CollKind::kSend;
      status = alltoall(resp, request);
      break;
    default:
      return error(Code::kInternal, "tensor '", request.name, "': ", op_kind_name(resp.sig.kind), " is not run here");
  }
  Status finished = lane_.finish(timeout_seconds_);  // also after a failure: queued work may use the buffers
  if (!finished.ok()) (void)fatal(finished);
  if (status.ok()) status = finished;
  record(request, phase_name(resp.sig.kind), start, now_seconds(), plan_args(spec));
  return status;
}

}  // namespace kolo::runtime
