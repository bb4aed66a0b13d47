// Collectives: NCCL's calls as kolo's, with NCCL's reduction operators (built-in and
// PreMulSum) resolved to a kolo op and a prescale. Point-to-point: nccl_point_to_point.cc.
#include "api/nccl/nccl_internal.h"

using kolo_nccl::fail;
using kolo_nccl::words;

namespace {

struct ResolvedOp {
  kolo_op_t op = KOLO_SUM;
  bool premul = false;
  double prescale = 1.0;
};

// A PreMulSum operator of `comm`, or null (with the last error set) for any other value.
ncclResult_t find_premul(const char* function, ncclComm* comm, ncclRedOp_t op, ncclComm::PreMulSum* out) {
  std::lock_guard<std::mutex> lock(comm->ops_mutex);
  const long index = static_cast<long>(op) - ncclNumOps;
  if (op < ncclNumOps || index >= static_cast<long>(comm->ops.size()) || !comm->ops[index].live) {
    return fail(ncclInvalidArgument, words(function, " on rank ", comm->rank, ": op ", static_cast<int>(op),
                                           " is neither a built-in ncclRedOp_t (0..", ncclNumOps - 1,
                                           ") nor a live operator from ncclRedOpCreatePreMulSum on this communicator"));
  }
  *out = comm->ops[index];
  return ncclSuccess;
}

ncclResult_t resolve_op(const char* function, ncclComm* comm, ncclRedOp_t op, ncclDataType_t dtype, cudaStream_t stream,
                        ResolvedOp* out) {
  // Listed one by one: NCCL has MAX before MIN, kolo MIN before MAX.
  switch (op) {
    case ncclSum: out->op = KOLO_SUM; return ncclSuccess;
    case ncclProd: out->op = KOLO_PROD; return ncclSuccess;
    case ncclMax: out->op = KOLO_MAX; return ncclSuccess;
    case ncclMin: out->op = KOLO_MIN; return ncclSuccess;
    case ncclAvg: out->op = KOLO_AVG; return ncclSuccess;
    default: break;
  }
  ncclComm::PreMulSum premul;
  if (ncclResult_t r = find_premul(function, comm, op, &premul); r != ncclSuccess) return r;
  if (premul.dtype != dtype) {
    return fail(ncclInvalidArgument,
                words(function, " on rank ", comm->rank, ": op ", static_cast<int>(op), " was created for datatype ",
                      static_cast<int>(premul.dtype), ", called with datatype ", static_cast<int>(dtype)));
  }
  out->op = KOLO_SUM;
  out->premul = true;
  out->prescale = premul.value;
  if (premul.residence == ncclScalarDevice) {
    return kolo_nccl::read_scalar(function, comm, premul.scalar, dtype, stream, &out->prescale);
  }
  return ncclSuccess;
}

// What every collective starts with: the communicator counted in flight (before anything
// of it is read, see InFlight), the open group's hold on it, and the data type.
ncclResult_t begin(const char* function, ncclComm* comm, ncclDataType_t datatype, kolo_dtype_t* dtype,
                   kolo_nccl::InFlight* in_flight) {
  if (ncclResult_t r = in_flight->enter(function, comm); r != ncclSuccess) return r;
  kolo_nccl::note_group_call(comm);
  return kolo_nccl::check_dtype(function, comm, datatype, dtype);
}

ncclResult_t done(kolo_result_t r, const char* function, const ncclComm* comm) {
  return r == KOLO_SUCCESS ? ncclSuccess : kolo_nccl::from_kolo(r, function, comm);
}

// kolo's C API takes a prescale on allreduce only (kolo_allreduce_ex).
ncclResult_t refuse_premul(const char* function, const ncclComm* comm, ncclRedOp_t op) {
  return fail(ncclInvalidUsage, words(function, " on rank ", comm->rank, ": PreMulSum operator ", static_cast<int>(op),
                                      " is supported on ncclAllReduce only: kolo's C API has no prescale for this "
                                      "collective"));
}

}  // namespace

extern "C" {

NCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  const char* function = "ncclAllReduce";
  kolo_dtype_t dtype;
  ResolvedOp kop;
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = begin(function, comm, datatype, &dtype, &in_flight); r != ncclSuccess) return r;
  if (ncclResult_t r = resolve_op(function, comm, op, datatype, stream, &kop); r != ncclSuccess) return r;
  if (!kop.premul)
    return done(kolo_allreduce(sendbuff, recvbuff, count, dtype, kop.op, comm->kolo, stream), function, comm);
  kolo_coll_options options = KOLO_COLL_OPTIONS_INIT;
  options.prescale = kop.prescale;
  return done(kolo_allreduce_ex(sendbuff, recvbuff, count, dtype, kop.op, &options, comm->kolo, stream), function,
              comm);
}

NCCL_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  const char* function = "ncclReduce";
  kolo_dtype_t dtype;
  ResolvedOp kop;
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = begin(function, comm, datatype, &dtype, &in_flight); r != ncclSuccess) return r;
  if (ncclResult_t r = resolve_op(function, comm, op, datatype, stream, &kop); r != ncclSuccess) return r;
  if (kop.premul) return refuse_premul(function, comm, op);
  return done(kolo_reduce(sendbuff, recvbuff, count, dtype, kop.op, root, comm->kolo, stream), function, comm);
}

NCCL_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  const char* function = "ncclReduceScatter";
  kolo_dtype_t dtype;
  ResolvedOp kop;
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = begin(function, comm, datatype, &dtype, &in_flight); r != ncclSuccess) return r;
  if (ncclResult_t r = resolve_op(function, comm, op, datatype, stream, &kop); r != ncclSuccess) return r;
  if (kop.premul) return refuse_premul(function, comm, op);
  return done(kolo_reduce_scatter(sendbuff, recvbuff, recvcount, dtype, kop.op, comm->kolo, stream), function, comm);
}

NCCL_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         int root, ncclComm_t comm, cudaStream_t stream) {
  kolo_dtype_t dtype;
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = begin("ncclBroadcast", comm, datatype, &dtype, &in_flight); r != ncclSuccess) return r;
  return done(kolo_broadcast(sendbuff, recvbuff, count, dtype, root, comm->kolo, stream), "ncclBroadcast", comm);
}

NCCL_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
         cudaStream_t stream) {
  kolo_dtype_t dtype;
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = begin("ncclBcast", comm, datatype, &dtype, &in_flight); r != ncclSuccess) return r;
  return done(kolo_broadcast(buff, buff, count, dtype, root, comm->kolo, stream), "ncclBcast", comm);
}

NCCL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
         ncclComm_t comm, cudaStream_t stream) {
  kolo_dtype_t dtype;
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = begin("ncclAllGather", comm, datatype, &dtype, &in_flight); r != ncclSuccess) return r;
  return done(kolo_allgather(sendbuff, recvbuff, sendcount, dtype, comm->kolo, stream), "ncclAllGather", comm);
}

NCCL_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
         ncclComm_t comm, cudaStream_t stream) {
  kolo_dtype_t dtype;
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = begin("ncclAlltoAll", comm, datatype, &dtype, &in_flight); r != ncclSuccess) return r;
  return done(kolo_alltoall(sendbuff, recvbuff, count, dtype, comm->kolo, stream), "ncclAlltoAll", comm);
}

// SUM of each rank's input times its scalar: kolo's SUM with a prescale. The scalar has
// the operator's datatype; ncclScalarHostImmediate is read now, ncclScalarDevice at each
// collective (after the stream's earlier work, see read_scalar).
NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
         ncclScalarResidence_t residence, ncclComm_t comm) {
  const char* function = "ncclRedOpCreatePreMulSum";
  kolo_dtype_t dtype;
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = begin(function, comm, datatype, &dtype, &in_flight); r != ncclSuccess) return r;
  if (op == nullptr || scalar == nullptr) {
    return fail(ncclInvalidArgument, words(function, " on rank ", comm->rank, ": op ", static_cast<void*>(op),
                                           " and scalar ", scalar, " must not be NULL"));
  }
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate) {
    return fail(ncclInvalidArgument, words(function, " on rank ", comm->rank, ": residence ",
                                           static_cast<int>(residence), " is not an ncclScalarResidence_t (0, 1)"));
  }
  ncclComm::PreMulSum premul;
  premul.live = true;
  premul.dtype = datatype;
  premul.residence = residence;
  premul.scalar = scalar;
  if (residence == ncclScalarHostImmediate) premul.value = kolo_nccl::scalar_value(scalar, datatype);
  std::lock_guard<std::mutex> lock(comm->ops_mutex);
  size_t index = 0;
  while (index < comm->ops.size() && comm->ops[index].live) ++index;  // reuse destroyed slots
  if (index >= static_cast<size_t>(ncclMaxRedOp - ncclNumOps)) {
    return fail(ncclInvalidUsage, words(function, " on rank ", comm->rank, ": too many live operators"));
  }
  if (index == comm->ops.size()) comm->ops.emplace_back();
  comm->ops[index] = premul;
  *op = static_cast<ncclRedOp_t>(ncclNumOps + index);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  const char* function = "ncclRedOpDestroy";
  kolo_nccl::InFlight in_flight;
  if (ncclResult_t r = in_flight.enter(function, comm); r != ncclSuccess) return r;
  ncclComm::PreMulSum premul;
  if (ncclResult_t r = find_premul(function, comm, op, &premul); r != ncclSuccess) return r;
  std::lock_guard<std::mutex> lock(comm->ops_mutex);
  comm->ops[static_cast<size_t>(op) - ncclNumOps].live = false;
  return ncclSuccess;
}

}  // extern "C"
