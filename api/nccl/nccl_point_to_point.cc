// Point-to-point, groups, and the rooted collectives built from them (gather, scatter).
//
// NCCL lets a rank send to and receive from itself inside a group (all-to-all-v codes
// exchange with every rank, themselves included); kolo refuses peer == rank. So the
// drop-in pairs a group's self-sends with its self-receives itself, in the order they
// were made, as local copies (stream-ordered for device memory), and hands only the
// other peers to kolo.
#include <memory>
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
// The communicators the open group has calls on.
thread_local std::vector<ncclComm*> t_group_comms;

ncclResult_t done(kolo_result_t r, const char* function, const ncclComm* comm) {
  return r == KOLO_SUCCESS ? ncclSuccess : kolo_nccl::from_kolo(r, function, comm);
}

ncclResult_t begin(const char* function, ncclComm* comm, ncclDataType_t datatype, kolo_dtype_t* dtype) {
  if (ncclResult_t r = kolo_nccl::check_comm(function, comm); r != ncclSuccess) return r;
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
    const ncclResult_t r = kolo_nccl::local_copy(function, call.comm, recv.buffer, send.buffer,
                                                 send.count * kolo_nccl::dtype_bytes(send.dtype), recv.stream);
    t_unpaired.erase(t_unpaired.begin() + static_cast<long>(i));
    return r;
  }
  t_unpaired.push_back(call);
  return ncclSuccess;
}

}  // namespace

void kolo_nccl::note_group_call(ncclComm* comm) {
  if (t_group_depth == 0) return;
  for (ncclComm* c : t_group_comms) {
    if (c == comm) return;
  }
  t_group_comms.push_back(comm);
}

extern "C" {

NCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
         cudaStream_t stream) {
  kolo_dtype_t dtype;
  if (ncclResult_t r = begin("ncclSend", comm, datatype, &dtype); r != ncclSuccess) return r;
  kolo_nccl::InFlight in_flight(comm);
  if (peer == comm->rank) {
    return self_call("ncclSend", {comm, true, const_cast<void*>(sendbuff), count, datatype, stream});
  }
  return done(kolo_send(sendbuff, count, dtype, peer, comm->kolo, stream), "ncclSend", comm);
}

NCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
         cudaStream_t stream) {
  kolo_dtype_t dtype;
  if (ncclResult_t r = begin("ncclRecv", comm, datatype, &dtype); r != ncclSuccess) return r;
  kolo_nccl::InFlight in_flight(comm);
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
  ncclResult_t unpaired = ncclSuccess;
  if (--t_group_depth == 0 && !t_unpaired.empty()) {
    const SelfCall& c = t_unpaired.front();
    unpaired = fail(ncclInvalidUsage, words("ncclGroupEnd on rank ", c.comm->rank, ": ", t_unpaired.size(),
                                            " send(s)/receive(s) to itself without a partner, the first a ",
                                            c.send ? "send" : "receive", " of ", c.count, " elements"));
    t_unpaired.clear();
  }
  // kolo's group is closed (and the calls to other peers run) whatever the self-calls did.
  std::vector<std::unique_ptr<kolo_nccl::InFlight>> running;
  if (t_group_depth == 0) {
    for (ncclComm* c : t_group_comms) running.push_back(std::make_unique<kolo_nccl::InFlight>(c));
    t_group_comms.clear();
  }
  const kolo_result_t r = kolo_group_end();
  running.clear();
  if (unpaired != ncclSuccess) return unpaired;
  return done(r, "ncclGroupEnd", nullptr);
}

// Every rank sends its count elements to root, which receives rank q's at q * count: one
// group of point-to-point calls (root's own block: a local copy, none in place).
NCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, cudaStream_t stream) {
  const char* function = "ncclGather";
  kolo_dtype_t dtype;
  if (ncclResult_t r = begin(function, comm, datatype, &dtype); r != ncclSuccess) return r;
  kolo_nccl::InFlight in_flight(comm);
  if (root < 0 || root >= comm->size) {
    return fail(ncclInvalidArgument, words(function, " on rank ", comm->rank, ": root ", root,
                                           " is out of range for a communicator of ", comm->size, " ranks"));
  }
  const size_t block = count * kolo_nccl::dtype_bytes(datatype);
  if (ncclResult_t r = ncclGroupStart(); r != ncclSuccess) return r;
  ncclResult_t result = ncclSuccess;
  if (comm->rank != root) {
    result = ncclSend(sendbuff, count, datatype, root, comm, stream);
  } else {
    char* out = static_cast<char*>(recvbuff);
    for (int q = 0; q < comm->size && result == ncclSuccess; ++q) {
      result = q == root ? kolo_nccl::local_copy(function, comm, out + q * block, sendbuff, block, stream)
                         : ncclRecv(out + q * block, count, datatype, q, comm, stream);
    }
  }
  const ncclResult_t ended = ncclGroupEnd();
  return result != ncclSuccess ? result : ended;
}

// Root sends block q (at q * count) to rank q; every rank receives count elements.
NCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, cudaStream_t stream) {
  const char* function = "ncclScatter";
  kolo_dtype_t dtype;
  if (ncclResult_t r = begin(function, comm, datatype, &dtype); r != ncclSuccess) return r;
  kolo_nccl::InFlight in_flight(comm);
  if (root < 0 || root >= comm->size) {
    return fail(ncclInvalidArgument, words(function, " on rank ", comm->rank, ": root ", root,
                                           " is out of range for a communicator of ", comm->size, " ranks"));
  }
  const size_t block = count * kolo_nccl::dtype_bytes(datatype);
  if (ncclResult_t r = ncclGroupStart(); r != ncclSuccess) return r;
  ncclResult_t result = ncclSuccess;
  if (comm->rank != root) {
    result = ncclRecv(recvbuff, count, datatype, root, comm, stream);
  } else {
    const char* in = static_cast<const char*>(sendbuff);
    for (int q = 0; q < comm->size && result == ncclSuccess; ++q) {
      result = q == root ? kolo_nccl::local_copy(function, comm, recvbuff, in + q * block, block, stream)
                         : ncclSend(in + q * block, count, datatype, q, comm, stream);
    }
  }
  const ncclResult_t ended = ncclGroupEnd();
  return result != ncclSuccess ? result : ended;
}

}  // extern "C"
