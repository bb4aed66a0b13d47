// Point-to-point, groups, and the rooted collectives built from them (gather, scatter).
//
// NCCL lets a rank send to and receive from itself inside a group (all-to-all-v codes
// exchange with every rank, themselves included); kolo refuses peer == rank. So the
// drop-in pairs a group's self-sends with its self-receives itself, in the order they
// were made, as local copies (stream-ordered for device memory), and hands only the
// other peers to kolo.
#include <algorithm>
#include <string>
#include <vector>

#include "api/nccl/nccl_internal.h"

using kolo_nccl::fail;
using kolo_nccl::words;

namespace {

struct SelfCall {
  ncclComm* comm;
  bool send;
  void* buffer;  // const for a send
  size_t count;
  ncclDataType_t dtype;
  cudaStream_t stream;
};

// This thread's ncclGroupStart nesting, and the self-calls of its open group not yet paired.
thread_local int t_group_depth = 0;
thread_local std::vector<SelfCall> t_unpaired;
// The communicators the open group has calls on, each held in flight (one count) from the
// group's first call on it until ncclGroupEnd has run kolo's group (note_group_call).
thread_local std::vector<ncclComm*> t_group_comms;
// Why the open group fails at its ncclGroupEnd, when this thread aborted one of its
// communicators (drop_group_hold); empty otherwise.
thread_local std::string t_group_aborted;

ncclResult_t done(kolo_result_t r, const char* function, const ncclComm* comm) {
  return r == KOLO_SUCCESS ? ncclSuccess : kolo_nccl::from_kolo(r, function, comm);
}

// The communicator counted in flight before anything of it is read (see InFlight), the
// open group's hold on it, and the data type.
ncclResult_t begin(const char* function, ncclComm* comm, ncclDataType_t datatype, kolo_dtype_t* dtype,
                   kolo_nccl::InFlight* in_flight) {
  if (ncclResult_t r = in_flight->enter(function, comm); r != ncclSuccess) return r;
  kolo_nccl::note_group_call(comm);
  return kolo_nccl::check_dtype(function, comm, datatype, dtype);
}

// A send to or receive from this rank: paired with the first unpaired opposite call of
// the same communicator in this group, else kept until one comes.
ncclResult_t self_call(const char* function, const SelfCall& call) {
  if (t_group_depth == 0) {
    return fail(ncclInvalidUsage, words(function, " on rank ", call.comm->rank, ": peer ", call.comm->rank,
                                        " is this rank; a send to itself completes only with its receive, in one "
                                        "ncclGroupStart/ncclGroupEnd"));
  }
  for (size_t i = 0; i < t_unpaired.size(); ++i) {
    const SelfCall& other = t_unpaired[i];
    if (other.comm != call.comm || other.send == call.send) continue;
    const SelfCall& send = call.send ? call : other;
    const SelfCall& recv = call.send ? other : call;
    if (send.count != recv.count || send.dtype != recv.dtype) {
      return fail(ncclInvalidArgument,
                  words(function, " on rank ", call.comm->rank, ": a send to itself of ", send.count,
                        " elements of datatype ", static_cast<int>(send.dtype), " meets a receive of ", recv.count,
                        " of datatype ", static_cast<int>(recv.dtype)));
    }
    // The copy runs on the receive's stream, after the work queued on the send's stream
    // before the send too (what fills sendbuff), where the two streams differ.
    const ncclResult_t r =
        kolo_nccl::local_copy_after(function, call.comm, recv.buffer, send.buffer,
                                    send.count * kolo_nccl::dtype_bytes(send.dtype), send.stream, recv.stream);
    t_unpaired.erase(t_unpaired.begin() + static_cast<long>(i));
    return r;
  }
  t_unpaired.push_back(call);
  return ncclSuccess;
}

}  // namespace

void kolo_nccl::note_group_call(ncclComm* comm) {
  if (t_group_depth == 0) return;
  if (std::find(t_group_comms.begin(), t_group_comms.end(), comm) != t_group_comms.end()) return;
  // The caller's count keeps comm live (and not yet aborted) while this one is added.
  comm->in_flight.fetch_add(1, std::memory_order_acq_rel);
  t_group_comms.push_back(comm);
}

bool kolo_nccl::drop_group_hold(ncclComm* comm) {
  auto held = std::find(t_group_comms.begin(), t_group_comms.end(), comm);
  if (held == t_group_comms.end()) return false;
  t_group_comms.erase(held);
  t_unpaired.erase(std::remove_if(t_unpaired.begin(), t_unpaired.end(),
                                  [comm](const SelfCall& c) { return c.comm == comm; }),
                   t_unpaired.end());
  if (t_group_aborted.empty()) {
    t_group_aborted = words("ncclGroupEnd on rank ", comm->rank, ": comm ", static_cast<const void*>(comm),
                            " was aborted (ncclCommAbort on this thread) while the group was open; its calls in the "
                            "group did not complete");
  }
  comm->in_flight.fetch_sub(1, std::memory_order_acq_rel);
  return true;
}

namespace {

// The group's communicators that another thread's ncclCommAbort has marked meanwhile (their
// calls in the group fail): ncclSystemError naming the first, as kolo's ABORTED would be.
// Read while the group still holds them.
ncclResult_t aborted_in_group() {
  if (!t_group_aborted.empty()) return fail(ncclSystemError, t_group_aborted);
  for (const ncclComm* c : t_group_comms) {
    if (!c->aborting.load(std::memory_order_acquire)) continue;
    return fail(ncclSystemError, words("ncclGroupEnd on rank ", c->rank, ": comm ", static_cast<const void*>(c),
                                       " is being aborted (ncclCommAbort from another thread) while the group was "
                                       "open; its calls in the group did not complete"));
  }
  return ncclSuccess;
}

// Ends the outermost group's holds (the communicators may be freed from here on).
void release_group() {
  for (ncclComm* c : t_group_comms) c->in_flight.fetch_sub(1, std::memory_order_acq_rel);
  t_group_comms.clear();
  t_unpaired.clear();
  t_group_aborted.clear();
}

// Gather and scatter: root checked, then one group of point-to-point calls: at the root one
// per rank (at_root(q)), elsewhere one (elsewhere()). The first error wins.
template <class AtRoot, class Elsewhere>
ncclResult_t rooted_group(const char* function, ncclComm_t comm, int root, AtRoot at_root, Elsewhere elsewhere) {
  if (root < 0 || root >= comm->size) {
    return fail(ncclInvalidArgument, words(function, " on rank ", comm->rank, ": root ", root,
                                           " is out of range for a communicator of ", comm->size, " ranks"));
  }
  if (ncclResult_t r = ncclGroupStart(); r != ncclSuccess) return r;
  ncclResult_t result = comm->rank == root ? ncclSuccess : elsewhere();
  for (int q = 0; comm->rank == root && q < comm->size && result == ncclSuccess; ++q) result = at_root(q);
  const ncclResult_t ended = ncclGroupEnd();
  return result != ncclSuccess ? result : ended;
}

}  // namespace

extern "C" {

NCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
         cudaStream_t stream) {
  kolo_dtype_t dtype;
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = begin("ncclSend", comm, datatype, &dtype, &in_flight); r != ncclSuccess) return r;
  if (peer == comm->rank) {
    return self_call("ncclSend", {comm, true, const_cast<void*>(sendbuff), count, datatype, stream});
  }
  return done(kolo_send(sendbuff, count, dtype, peer, comm->kolo, stream), "ncclSend", comm);
}

NCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
         cudaStream_t stream) {
  kolo_dtype_t dtype;
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = begin("ncclRecv", comm, datatype, &dtype, &in_flight); r != ncclSuccess) return r;
  if (peer == comm->rank) return self_call("ncclRecv", {comm, false, recvbuff, count, datatype, stream});
  return done(kolo_recv(recvbuff, count, dtype, peer, comm->kolo, stream), "ncclRecv", comm);
}

NCCL_API(ncclResult_t, ncclGroupStart) {
  const kolo_result_t r = kolo_group_start();
  if (r != KOLO_SUCCESS) return kolo_nccl::from_kolo(r, "ncclGroupStart");
  ++t_group_depth;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclGroupEnd) {
  if (t_group_depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--t_group_depth > 0) return done(kolo_group_end(), "ncclGroupEnd", nullptr);
  // The outermost end: kolo's group is closed (and the calls to other peers run) whatever
  // the self-calls did or an abort meant; the group's communicators stay held until then.
  const kolo_result_t r = kolo_group_end();
  ncclResult_t result = aborted_in_group();
  if (result == ncclSuccess && !t_unpaired.empty()) {
    const SelfCall& c = t_unpaired.front();
    result = fail(ncclInvalidUsage, words("ncclGroupEnd on rank ", c.comm->rank, ": ", t_unpaired.size(),
                                          " send(s)/receive(s) to itself without a partner, the first a ",
                                          c.send ? "send" : "receive", " of ", c.count, " elements"));
  }
  if (result == ncclSuccess) result = done(r, "ncclGroupEnd", nullptr);
  release_group();
  return result;
}

// Every rank sends its count elements to root, which receives rank q's at q * count (its
// own block: a local copy, none in place).
NCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, cudaStream_t stream) {
  const char* function = "ncclGather";
  kolo_dtype_t dtype;
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = begin(function, comm, datatype, &dtype, &in_flight); r != ncclSuccess) return r;
  const size_t block = count * kolo_nccl::dtype_bytes(datatype);
  char* out = static_cast<char*>(recvbuff);
  return rooted_group(
      function, comm, root,
      [&](int q) {
        return q == root ? kolo_nccl::local_copy(function, comm, out + q * block, sendbuff, block, stream)
                         : ncclRecv(out + q * block, count, datatype, q, comm, stream);
      },
      [&] { return ncclSend(sendbuff, count, datatype, root, comm, stream); });
}

// Root sends block q (at q * count) to rank q; every rank receives count elements.
NCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, cudaStream_t stream) {
  const char* function = "ncclScatter";
  kolo_dtype_t dtype;
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = begin(function, comm, datatype, &dtype, &in_flight); r != ncclSuccess) return r;
  const size_t block = count * kolo_nccl::dtype_bytes(datatype);
  const char* in = static_cast<const char*>(sendbuff);
  return rooted_group(
      function, comm, root,
      [&](int q) {
        return q == root ? kolo_nccl::local_copy(function, comm, recvbuff, in + q * block, block, stream)
                         : ncclSend(in + q * block, count, datatype, q, comm, stream);
      },
      [&] { return ncclRecv(recvbuff, count, datatype, root, comm, stream); });
}

}  // extern "C"
