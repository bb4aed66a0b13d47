#include "engine/runtime/message.h"

#include "engine/runtime/wire.h"

namespace kolo::runtime {
namespace {

void put(WireWriter& w, const Signature& sig) {
  w.u8(static_cast<uint8_t>(sig.kind));
  w.u8(static_cast<uint8_t>(sig.dtype));
  w.u8(static_cast<uint8_t>(sig.op));
  w.i64(sig.root);
  w.f64(sig.prescale);
  w.f64(sig.postscale);
  w.u8(static_cast<uint8_t>(sig.wire));
  w.u8(sig.device ? 1 : 0);
  w.u64s(sig.counts);
  w.u64s(std::vector<uint64_t>(sig.shape.begin(), sig.shape.end()));
}

Status get(WireReader& r, Signature& sig) {
  uint8_t kind = 0, dtype = 0, op = 0;
  KOLO_TRY(r.u8(kind));
  KOLO_TRY(r.u8(dtype));
  KOLO_TRY(r.u8(op));
  if (kind >= static_cast<uint8_t>(OpKind::kCount) || dtype >= static_cast<uint8_t>(DType::kCount) ||
      op >= static_cast<uint8_t>(ReduceOp::kCount)) {
    return error(Code::kRemote, "malformed runtime message: operation ", int(kind), ", dtype ", int(dtype), ", op ",
                 int(op), " out of range");
  }
  sig.kind = static_cast<OpKind>(kind);
  sig.dtype = static_cast<DType>(dtype);
  sig.op = static_cast<ReduceOp>(op);
  KOLO_TRY(r.i64(sig.root));
  KOLO_TRY(r.f64(sig.prescale));
  KOLO_TRY(r.f64(sig.postscale));
  uint8_t wire = 0, device = 0;
  KOLO_TRY(r.u8(wire));
  KOLO_TRY(r.u8(device));
  if (wire > static_cast<uint8_t>(DType::kCount) || device > 1) {
    return error(Code::kRemote, "malformed runtime message: wire dtype ", int(wire), ", memory ", int(device),
                 " out of range");
  }
  sig.wire = static_cast<DType>(wire);
  sig.device = device == 1;
  KOLO_TRY(r.u64s(sig.counts));
  std::vector<uint64_t> shape;
  KOLO_TRY(r.u64s(shape));
  sig.shape.assign(shape.begin(), shape.end());
  return Status();
}

}  // namespace

std::vector<uint8_t> encode(const RankMessage& message) {
  WireWriter w;
  w.u8(message.joined ? 1 : 0);
  w.u64(message.requests.size());
  for (const RequestInfo& info : message.requests) {
    w.str(info.name);
    put(w, info.sig);
    w.u64s(info.local);
  }
  w.u64(message.pending.size());
  for (const PendingAge& p : message.pending) {
    w.str(p.name);
    w.f64(p.age_seconds);
  }
  return std::move(w.bytes());
}

Status decode(const uint8_t* data, size_t size, int rank, RankMessage& out) {
  WireReader r(data, size, str_cat("runtime message from rank ", rank));
  uint8_t joined = 0;
  KOLO_TRY(r.u8(joined));
  out.joined = joined != 0;
  uint64_t n = 0;
  KOLO_TRY(r.u64(n));
  // Each entry takes well over one byte, so a count above the bytes left is malformed.
  if (n > size) return error(Code::kRemote, "malformed runtime message from rank ", rank, ": ", n, " requests");
  out.requests.resize(n);
  for (RequestInfo& info : out.requests) {
    KOLO_TRY(r.str(info.name));
    KOLO_TRY(get(r, info.sig));
    KOLO_TRY(r.u64s(info.local));
  }
  KOLO_TRY(r.u64(n));
  if (n > size) return error(Code::kRemote, "malformed runtime message from rank ", rank, ": ", n, " pending");
  out.pending.resize(n);
  for (PendingAge& p : out.pending) {
    KOLO_TRY(r.str(p.name));
    KOLO_TRY(r.f64(p.age_seconds));
    // An age is seconds a rank has waited: the coordinator prints it as an int.
    if (!(p.age_seconds >= 0 && p.age_seconds < 2147483647.0)) {
      return error(Code::kRemote, "malformed runtime message from rank ", rank, ": pending age ", p.age_seconds);
    }
  }
  return Status();
}

std::vector<uint8_t> encode(const ResponseList& list) {
  WireWriter w;
  w.u64(list.responses.size());
  for (const Response& resp : list.responses) {
    w.str(resp.name);
    put(w, resp.sig);
    w.u64(resp.locals.size());
    for (const auto& local : resp.locals) w.u64s(local);
    w.u8(static_cast<uint8_t>(resp.code));
    w.str(resp.message);
  }
  w.u8(static_cast<uint8_t>(list.shutdown_code));
  w.str(list.shutdown_message);
  return std::move(w.bytes());
}

Status decode(const uint8_t* data, size_t size, ResponseList& out) {
  WireReader r(data, size, "coordinator response");
  uint64_t n = 0;
  KOLO_TRY(r.u64(n));
  if (n > size) return error(Code::kRemote, "malformed coordinator response: ", n, " entries");
  out.responses.resize(n);
  uint8_t code = 0;
  for (Response& resp : out.responses) {
    KOLO_TRY(r.str(resp.name));
    KOLO_TRY(get(r, resp.sig));
    uint64_t ranks = 0;
    KOLO_TRY(r.u64(ranks));
    if (ranks > size) return error(Code::kRemote, "malformed coordinator response: ", ranks, " ranks");
    resp.locals.resize(ranks);
    for (auto& local : resp.locals) KOLO_TRY(r.u64s(local));
    KOLO_TRY(r.u8(code));
    if (code > static_cast<uint8_t>(Code::kInternal)) return error(Code::kRemote, "malformed result code ", int(code));
    resp.code = static_cast<Code>(code);
    KOLO_TRY(r.str(resp.message));
  }
  KOLO_TRY(r.u8(code));
  if (code > static_cast<uint8_t>(Code::kInternal)) return error(Code::kRemote, "malformed result code ", int(code));
  out.shutdown_code = static_cast<Code>(code);
  return r.str(out.shutdown_message);
}

}  // namespace kolo::runtime
