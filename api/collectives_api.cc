// C entry points for collectives and point-to-point calls: argument checks, then one
// CollCall handed to the communicator (or queued until kolo_group_end).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "api/api_support.h"
#include "engine/adasum.h"
#include "kernels/host_kernels.h"
#include "support/device/buffer_place.h"
#include "support/device/device.h"
#include "support/probe.h"

using kolo::CollCall;
using kolo::CollKind;
using kolo::Code;
using kolo::Status;
using kolo::api_call;
using kolo::error;

namespace {

struct GroupState {
  std::vector<std::pair<kolo_comm_t, CollCall>> pending;
};
thread_local GroupState t_group;
thread_local int t_group_depth = 0;  // read by every call

size_t elem_size(kolo_dtype_t dtype) { return kolo::dtype_size(static_cast<kolo::DType>(dtype)); }

CollCall make_call(CollKind kind, const void* send, void* recv, size_t count, kolo_dtype_t dtype, kolo_op_t op) {
  CollCall call;
  call.spec.kind = kind;
  call.spec.count = count;
  call.spec.dtype = static_cast<kolo::DType>(dtype);
  call.spec.op = static_cast<kolo::ReduceOp>(op);
  call.send = send;
  call.recv = recv;
  return call;
}

// Host or device memory, asked of the device runtime (support/device): every buffer of a
// call must be of one kind. Device calls are enqueued on `stream`.
Status classify(CollCall& call, void* stream, int rank) {
  // A broadcast's send buffer matters at the root only.
  const bool send_used = call.spec.kind != CollKind::kBroadcast || call.spec.in_place || call.spec.root == rank;
  kolo::device::BufferPlace place;
  Status s = place.add("send", send_used ? call.send : nullptr);
  if (s.ok()) s = place.add("recv", call.recv);
  if (!s.ok()) return s.with_context(kolo::str_cat("rank ", rank, ": "));
  call.spec.device = place.on_device();
  call.stream = call.spec.device ? stream : nullptr;
  // The call's copies and kernels run on the device that owns its buffers, whatever device
  // is current on the calling thread.
  call.device = place.device_index();
  return Status();
}

// Runs the call now (host buffers) or enqueues it on its stream (device buffers), or
// queues it when inside a group.
Status submit(kolo_comm_t comm, CollCall call, void* stream) {
  KOLO_TRY(classify(call, stream, comm->impl->rank()));
  if (t_group_depth > 0) {
    t_group.pending.emplace_back(comm, std::move(call));
    return Status();
  }
  return comm->impl->run(call);
}

// The small-call lane (engine/call_runner.h): a host call that the communicator ran before
// (the same key), run again without building, checking, lowering or planning it again. Only
// what may differ from that call is checked: the handle, the group, the buffers (not null,
// not partly overlapping, host memory). False: not taken, nothing run; the caller goes the
// whole way, which also names what is wrong with a call the lane would not take.
bool ran_on_lane(kolo_comm_t comm, const kolo::LaneKey& key, const void* send, void* recv, const char* function,
                 kolo_result_t* result) {
  if (t_group_depth > 0 || send == nullptr || recv == nullptr) return false;
  if (static_cast<unsigned>(key.dtype) >= static_cast<unsigned>(KOLO_DTYPE_COUNT) || !kolo::check_comm(comm).ok()) {
    return false;
  }
  const size_t bytes = key.count * kolo::dtype_size(key.dtype);
  if (!kolo::check_no_partial_overlap(send, bytes, recv, bytes).ok()) return false;
  if (kolo::device::runtime().kind.runs_kernels) {  // else all memory is the host's
    kolo::device::BufferPlace place;
    if (!place.add("send", send).ok() || !place.add("recv", recv).ok() || place.on_device()) return false;
  }
  bool ran = false;
  *result = api_call(function, [&]() -> Status {
    Status status;
    ran = comm->impl->run_on_lane(key, send, recv, &status);
    return status;
  });
  return ran || *result != KOLO_SUCCESS;
}

Status check_common(kolo_comm_t comm, kolo_dtype_t dtype) {
  KOLO_TRY(kolo::check_comm(comm));
  return kolo::check_dtype(dtype);
}

Status check_reduction(kolo_comm_t comm, kolo_dtype_t dtype, kolo_op_t op, const char* collective) {
  KOLO_TRY(check_common(comm, dtype));
  return kolo::check_reduction_op(op, dtype, collective);
}

Status check_scale(const char* name, double value) {
  if (!std::isfinite(value)) return error(Code::kInvalidArgument, name, " = ", value, " is not finite");
  return Status();
}


// kolo_coll_options on a call: the scales (reductions only: elsewhere they must be 1),
// the wire type (FLOAT32 data, whole floats) and a forced algorithm.
Status apply_options(CollCall& call, const kolo_coll_options* options, kolo_dtype_t dtype, kolo_op_t op,
                     bool reduces) {
  if (options == nullptr) return Status();
  KOLO_TRY(check_scale("prescale", options->prescale));
  KOLO_TRY(check_scale("postscale", options->postscale));
  if (!reduces && (options->prescale != 1.0 || options->postscale != 1.0)) {
    return error(Code::kInvalidArgument, "prescale = ", options->prescale, ", postscale = ", options->postscale,
                 ": ", coll_name(call.spec.kind), " does not reduce, so both must be 1");
  }
  if (options->wire_dtype != KOLO_DTYPE_COUNT && options->wire_dtype != dtype) {
    KOLO_TRY(kolo::check_wire(options->wire_dtype, dtype, op));
    // The codec kernels read and write whole floats: refused here, on this rank, rather
    // than halfway through the collective.
    for (const void* p : {call.send, static_cast<const void*>(call.recv)}) {
      if (reinterpret_cast<uintptr_t>(p) % sizeof(float) != 0) {
        return error(Code::kInvalidArgument, p == call.send ? "send" : "recv", " ", p,
                     " is not aligned to 4 bytes (FLOAT32 with wire_dtype)");
      }
    }
    call.spec.wire = static_cast<kolo::DType>(options->wire_dtype);
  }
  if (options->algorithm < KOLO_ALGO_AUTO || options->algorithm > KOLO_ALGO_TWO_SHOT) {
    return error(Code::kInvalidArgument, "algorithm = ", options->algorithm, " is not a KOLO_ALGO_* value");
  }
  call.prescale.factor = options->prescale;
  call.postscale.factor = options->postscale;
  call.spec.algorithm = static_cast<kolo::Algorithm>(options->algorithm);
  return Status();
}

// KOLO_ADASUM (engine/adasum.h): not one planned call but a sequence of exchanges, run
// now on host buffers. Device buffers would need a stream-ordered Adasum, which kolo does
// not have: the runtime (kolo_enqueue_allreduce) stages them through host memory instead.
Status adasum(kolo_comm_t comm, const void* send, void* recv, size_t count, kolo_dtype_t dtype,
              const kolo_coll_options* options, void* stream) {
  const int rank = comm->impl->rank();
  if (t_group_depth > 0) {
    return error(Code::kInvalidArgument, "rank ", rank, ": an allreduce with KOLO_ADASUM cannot be part of a group");
  }
  CollCall call = make_call(CollKind::kAllreduce, send, recv, count, dtype, KOLO_ADASUM);
  KOLO_TRY(classify(call, stream, rank));
  if (call.spec.device) {
    return error(Code::kUnsupported, "rank ", rank, ": KOLO_ADASUM on device buffers is not stream-ordered in kolo; "
                 "enqueue it through the runtime (kolo_enqueue_allreduce), which stages it through host memory");
  }
  kolo::Scale prescale, postscale;
  if (options != nullptr) {
    KOLO_TRY(check_scale("prescale", options->prescale));
    KOLO_TRY(check_scale("postscale", options->postscale));
    if (options->wire_dtype != KOLO_DTYPE_COUNT && options->wire_dtype != dtype) {
      return error(Code::kUnsupported, "rank ", rank, ": KOLO_ADASUM has no compressed wire (wire_dtype = ",
                   kolo::dtype_name(static_cast<kolo::DType>(options->wire_dtype)), ")");
    }
    if (options->algorithm != KOLO_ALGO_AUTO) {
      return error(Code::kInvalidArgument, "rank ", rank, ": KOLO_ADASUM has one algorithm of its own; algorithm = ",
                   options->algorithm, " must be KOLO_ALGO_AUTO");
    }
    prescale.factor = options->prescale;
    postscale.factor = options->postscale;
  }
  const kolo::DType type = static_cast<kolo::DType>(dtype);
  KOLO_TRY(kolo::scale_copy(recv, send, count, type, prescale));
  KOLO_TRY(kolo::adasum_allreduce(*comm->impl, recv, count, type));
  return kolo::scale_copy(recv, recv, count, type, postscale);
}

}  // namespace

extern "C" {

kolo_result_t kolo_allreduce_ex(const void* send, void* recv, size_t count, kolo_dtype_t dtype, kolo_op_t op,
                                const kolo_coll_options* options, kolo_comm_t comm, void* stream) {
  KOLO_PROBE(kApiEntry);
  kolo_result_t result = KOLO_SUCCESS;
  const kolo::LaneKey key{CollKind::kAllreduce, static_cast<kolo::DType>(dtype), static_cast<kolo::ReduceOp>(op), 0,
                          count, send == recv};
  if (options == nullptr && ran_on_lane(comm, key, send, recv, "kolo_allreduce", &result)) {
    KOLO_PROBE(kApiExit);
    return result;
  }
  result = api_call("kolo_allreduce", [&]() -> Status {
    KOLO_TRY(check_reduction(comm, dtype, op, "allreduce"));
    KOLO_TRY(kolo::check_buffer("send", send, count));
    KOLO_TRY(kolo::check_buffer("recv", recv, count));
    const size_t bytes = count * elem_size(dtype);
    KOLO_TRY(kolo::check_no_partial_overlap(send, bytes, recv, bytes));
    if (op == KOLO_ADASUM) return adasum(comm, send, recv, count, dtype, options, stream);
    CollCall call = make_call(CollKind::kAllreduce, send, recv, count, dtype, op);
    call.spec.in_place = send == recv;
    KOLO_TRY(apply_options(call, options, dtype, op, true));
    return submit(comm, std::move(call), stream);
  });
  KOLO_PROBE(kApiExit);
  return result;
}

kolo_result_t kolo_allreduce(const void* send, void* recv, size_t count, kolo_dtype_t dtype, kolo_op_t op,
                             kolo_comm_t comm, void* stream) {
  return kolo_allreduce_ex(send, recv, count, dtype, op, nullptr, comm, stream);
}

kolo_result_t kolo_broadcast(const void* send, void* recv, size_t count, kolo_dtype_t dtype, int root,
                             kolo_comm_t comm, void* stream) {
  return api_call("kolo_broadcast", [&]() -> Status {
    KOLO_TRY(check_common(comm, dtype));
    KOLO_TRY(kolo::check_rank("root", root, comm->impl->size()));
    if (comm->impl->rank() == root) KOLO_TRY(kolo::check_buffer("send (at the root)", send, count));
    KOLO_TRY(kolo::check_buffer("recv", recv, count));
    const size_t bytes = count * elem_size(dtype);
    if (comm->impl->rank() == root) KOLO_TRY(kolo::check_no_partial_overlap(send, bytes, recv, bytes));
    CollCall call = make_call(CollKind::kBroadcast, send, recv, count, dtype, KOLO_SUM);
    call.spec.root = root;
    call.spec.in_place = send == recv;
    return submit(comm, std::move(call), stream);
  });
}

kolo_result_t kolo_reduce(const void* send, void* recv, size_t count, kolo_dtype_t dtype, kolo_op_t op, int root,
                          kolo_comm_t comm, void* stream) {
  return api_call("kolo_reduce", [&]() -> Status {
    KOLO_TRY(check_reduction(comm, dtype, op, "reduce"));
    KOLO_TRY(kolo::check_rank("root", root, comm->impl->size()));
    KOLO_TRY(kolo::check_buffer("send", send, count));
    const bool at_root = comm->impl->rank() == root;
    if (at_root) KOLO_TRY(kolo::check_buffer("recv (at the root)", recv, count));
    const size_t bytes = count * elem_size(dtype);
    if (at_root) KOLO_TRY(kolo::check_no_partial_overlap(send, bytes, recv, bytes));
    CollCall call = make_call(CollKind::kReduce, send, at_root ? recv : nullptr, count, dtype, op);
    call.spec.root = root;
    call.spec.in_place = at_root && send == recv;
    return submit(comm, std::move(call), stream);
  });
}

kolo_result_t kolo_allgather_ex(const void* send, void* recv, size_t sendcount, kolo_dtype_t dtype,
                                const kolo_coll_options* options, kolo_comm_t comm, void* stream) {
  return api_call("kolo_allgather", [&]() -> Status {
    KOLO_TRY(check_common(comm, dtype));
    KOLO_TRY(kolo::check_buffer("send", send, sendcount));
    KOLO_TRY(kolo::check_buffer("recv", recv, sendcount));
    const size_t block = sendcount * elem_size(dtype);
    const char* own = recv == nullptr ? nullptr : static_cast<const char*>(recv) + comm->impl->rank() * block;
    if (send != own) {
      KOLO_TRY(kolo::check_disjoint(send, block, recv, block * comm->impl->size(), "send == recv + rank * sendcount"));
    }
    CollCall call = make_call(CollKind::kAllgather, send, recv, sendcount, dtype, KOLO_SUM);
    call.spec.in_place = send == own;
    KOLO_TRY(apply_options(call, options, dtype, KOLO_SUM, false));
    return submit(comm, std::move(call), stream);
  });
}

kolo_result_t kolo_allgather(const void* send, void* recv, size_t sendcount, kolo_dtype_t dtype, kolo_comm_t comm,
                             void* stream) {
  return kolo_allgather_ex(send, recv, sendcount, dtype, nullptr, comm, stream);
}

kolo_result_t kolo_allgatherv(const void* send, size_t sendcount, void* recv, const size_t* recvcounts,
                              const size_t* displs, kolo_dtype_t dtype, kolo_comm_t comm, void* stream) {
  return api_call("kolo_allgatherv", [&]() -> Status {
    KOLO_TRY(check_common(comm, dtype));
    if (recvcounts == nullptr) return error(Code::kInvalidArgument, "recvcounts is NULL");
    if (displs == nullptr) return error(Code::kInvalidArgument, "displs is NULL");
    const int size = comm->impl->size();
    const int rank = comm->impl->rank();
    if (recvcounts[rank] != sendcount) {
      return error(Code::kInvalidArgument, "recvcounts[", rank, "] = ", recvcounts[rank],
                   " differs from sendcount = ", sendcount, " on rank ", rank);
    }
    size_t total = 0;
    for (int q = 0; q < size; ++q) total += recvcounts[q];
    KOLO_TRY(kolo::check_buffer("send", send, sendcount));
    KOLO_TRY(kolo::check_buffer("recv", recv, total));
    size_t extent = 0;  // of recv, in elements
    for (int q = 0; q < size; ++q) extent = std::max(extent, displs[q] + recvcounts[q]);
    const size_t es = elem_size(dtype);
    if (recv != nullptr && send != static_cast<const char*>(recv) + displs[rank] * es) {
      KOLO_TRY(kolo::check_disjoint(send, sendcount * es, recv, extent * es, "send == recv + displs[rank]"));
    }
    CollCall call = make_call(CollKind::kAllgatherv, send, recv, sendcount, dtype, KOLO_SUM);
    call.spec.counts.assign(recvcounts, recvcounts + size);
    call.spec.displs.assign(displs, displs + size);
    return submit(comm, std::move(call), stream);
  });
}

kolo_result_t kolo_reduce_scatter_ex(const void* send, void* recv, size_t recvcount, kolo_dtype_t dtype,
                                     kolo_op_t op, const kolo_coll_options* options, kolo_comm_t comm,
                                     void* stream) {
  return api_call("kolo_reduce_scatter", [&]() -> Status {
    KOLO_TRY(check_reduction(comm, dtype, op, "reduce_scatter"));
    KOLO_TRY(kolo::check_buffer("send", send, recvcount));
    KOLO_TRY(kolo::check_buffer("recv", recv, recvcount));
    const size_t block = recvcount * elem_size(dtype);
    const char* own = send == nullptr ? nullptr : static_cast<const char*>(send) + comm->impl->rank() * block;
    if (recv != own) {
      KOLO_TRY(kolo::check_disjoint(send, block * comm->impl->size(), recv, block, "recv == send + rank * recvcount"));
    }
    CollCall call = make_call(CollKind::kReduceScatter, send, recv, recvcount, dtype, op);
    call.spec.in_place = recv == own;
    KOLO_TRY(apply_options(call, options, dtype, op, true));
    return submit(comm, std::move(call), stream);
  });
}

kolo_result_t kolo_reduce_scatter(const void* send, void* recv, size_t recvcount, kolo_dtype_t dtype, kolo_op_t op,
                                  kolo_comm_t comm, void* stream) {
  return kolo_reduce_scatter_ex(send, recv, recvcount, dtype, op, nullptr, comm, stream);
}

kolo_result_t kolo_alltoall(const void* send, void* recv, size_t count_per_peer, kolo_dtype_t dtype,
                            kolo_comm_t comm, void* stream) {
  return api_call("kolo_alltoall", [&]() -> Status {
    KOLO_TRY(check_common(comm, dtype));
    KOLO_TRY(kolo::check_buffer("send", send, count_per_peer));
    KOLO_TRY(kolo::check_buffer("recv", recv, count_per_peer));
    const size_t bytes = count_per_peer * elem_size(dtype) * comm->impl->size();
    KOLO_TRY(kolo::check_no_partial_overlap(send, bytes, recv, bytes));
    CollCall call = make_call(CollKind::kAlltoall, send, recv, count_per_peer, dtype, KOLO_SUM);
    call.spec.in_place = send == recv;
    return submit(comm, std::move(call), stream);
  });
}

static kolo_result_t point_to_point(const char* function, CollKind kind, const void* send, void* recv, size_t count,
                                    kolo_dtype_t dtype, int peer, kolo_comm_t comm, void* stream) {
  return api_call(function, [&]() -> Status {
    KOLO_TRY(check_common(comm, dtype));
    KOLO_TRY(kolo::check_rank("peer", peer, comm->impl->size()));
    if (peer == comm->impl->rank()) {
      return error(Code::kInvalidArgument, "peer = ", peer, " is this rank itself");
    }
    KOLO_TRY(kolo::check_buffer("buf", kind == CollKind::kSend ? send : recv, count));
    CollCall call = make_call(kind, send, recv, count, dtype, KOLO_SUM);
    call.spec.peer = peer;
    return submit(comm, std::move(call), stream);
  });
}

kolo_result_t kolo_send(const void* buf, size_t count, kolo_dtype_t dtype, int peer, kolo_comm_t comm, void* stream) {
  return point_to_point("kolo_send", CollKind::kSend, buf, nullptr, count, dtype, peer, comm, stream);
}

kolo_result_t kolo_recv(void* buf, size_t count, kolo_dtype_t dtype, int peer, kolo_comm_t comm, void* stream) {
  return point_to_point("kolo_recv", CollKind::kRecv, nullptr, buf, count, dtype, peer, comm, stream);
}

kolo_result_t kolo_barrier(kolo_comm_t comm) {
  return api_call("kolo_barrier", [&]() -> Status {
    KOLO_TRY(kolo::check_comm(comm));
    return submit(comm, make_call(CollKind::kBarrier, nullptr, nullptr, 0, KOLO_UINT8, KOLO_SUM), nullptr);
  });
}

kolo_result_t kolo_group_start(void) {
  ++t_group_depth;
  return KOLO_SUCCESS;
}

kolo_result_t kolo_group_end(void) {
  return api_call("kolo_group_end", [&]() -> Status {
    if (t_group_depth == 0) return error(Code::kInvalidUsage, "kolo_group_end without kolo_group_start");
    if (--t_group_depth > 0) return Status();
    auto pending = std::move(t_group.pending);
    t_group.pending.clear();
    // One combined run per communicator, in the order the communicators first appeared.
    std::vector<kolo_comm_t> order;
    for (auto& [comm, call] : pending) {
      if (std::find(order.begin(), order.end(), comm) == order.end()) order.push_back(comm);
    }
    // A communicator destroyed meanwhile fails the group, but the others still run their
    // calls: their peers wait for them.
    Status first;
    for (kolo_comm_t comm : order) {
      Status live = kolo::check_comm(comm);
      if (!live.ok()) {
        if (first.ok()) first = live;
        continue;
      }
      std::vector<CollCall> calls;
      for (auto& [c, call] : pending) {
        if (c == comm) calls.push_back(call);
      }
      Status s = comm->impl->run_group(calls);
      if (!s.ok() && first.ok()) first = s;
    }
    return first;
  });
}

}  // extern "C"
