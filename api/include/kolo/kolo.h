/* kolo: collective communication for GPU clusters and CPU hosts.
 *
 * The one header users need. Plain C; no CUDA header (streams are void*).
 * Host buffers: every call blocks until the collective is complete on this rank.
 * Device buffers: enqueued on the stream (NULL = default stream), as NCCL does.
 * Every function returns a kolo_result_t; on failure kolo_last_error() says what was
 * wrong, with which values, in words. */
#ifndef KOLO_KOLO_H_
#define KOLO_KOLO_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KOLO_MAJOR 0
#define KOLO_MINOR 1
#define KOLO_PATCH 0
#define KOLO_VERSION_CODE (KOLO_MAJOR * 10000 + KOLO_MINOR * 100 + KOLO_PATCH)

typedef struct kolo_comm* kolo_comm_t;

/* The enums are int-sized in C; C++ sees them with int as their underlying type, so that
 * any int a caller passes (an out-of-range value is an error kolo reports) is a value of
 * the type, not undefined behaviour. */
#ifdef __cplusplus
#define KOLO_ENUM enum : int
#else
#define KOLO_ENUM enum
#endif

typedef KOLO_ENUM {
  KOLO_SUCCESS = 0,
  KOLO_IN_PROGRESS,
  KOLO_ERR_INVALID_ARGUMENT,
  KOLO_ERR_INVALID_USAGE,
  KOLO_ERR_MISMATCH,
  KOLO_ERR_REMOTE,
  KOLO_ERR_TIMEOUT,
  KOLO_ERR_ABORTED,
  KOLO_ERR_UNSUPPORTED,
  KOLO_ERR_SYSTEM,
  KOLO_ERR_INTERNAL
} kolo_result_t;

typedef KOLO_ENUM {
  KOLO_INT8, KOLO_UINT8, KOLO_INT32, KOLO_UINT32, KOLO_INT64, KOLO_UINT64,
  KOLO_FLOAT16, KOLO_BFLOAT16, KOLO_FLOAT32, KOLO_FLOAT64, KOLO_FLOAT8_E4M3,
  KOLO_FLOAT8_E5M2, KOLO_DTYPE_COUNT
} kolo_dtype_t;

/* KOLO_ADASUM: adaptive summation (Horovod's op=Adasum), not element-wise: allreduce only
 * (and kolo_enqueue_allreduce), of FLOAT16, BFLOAT16, FLOAT32 or FLOAT64 host buffers; device
 * tensors through the runtime (kolo_enqueue_allreduce), which stages them in host memory.
 * Any number of ranks (Horovod: powers of two); see docs/adasum.md. */
typedef KOLO_ENUM { KOLO_SUM, KOLO_PROD, KOLO_MIN, KOLO_MAX, KOLO_AVG, KOLO_ADASUM, KOLO_OP_COUNT } kolo_op_t;

/* Algorithms for kolo_coll_options.algorithm and KOLO_ALGO. */
#define KOLO_ALGO_AUTO 0
#define KOLO_ALGO_RING 1
#define KOLO_ALGO_DIRECT 2
#define KOLO_ALGO_TREE 3             /* double binary tree */
#define KOLO_ALGO_HALVING_DOUBLING 4 /* recursive halving-doubling (Rabenseifner) */
#define KOLO_ALGO_HIERARCHICAL 5     /* inside each host, then across hosts */
#define KOLO_ALGO_ONE_SHOT 6         /* one host: every rank reads all peers' buffers */
#define KOLO_ALGO_TWO_SHOT 7         /* one host: reduce-scatter from shared buffers, then allgather */

int kolo_version(void); /* MAJOR*10000 + MINOR*100 + PATCH */
const char* kolo_result_string(kolo_result_t result);
const char* kolo_last_error(void); /* this thread's last failure, in words */

/* World from the environment: kolorun, mpirun (Open MPI), srun (Slurm), or
 * KOLO_RANK/KOLO_SIZE/KOLO_ADDR. */
kolo_result_t kolo_init(kolo_comm_t* comm);

typedef struct { char internal[128]; } kolo_unique_id;
/* Called on one rank (it hosts the rendezvous store); the id is then given to every
 * rank, which calls kolo_comm_init_rank. The id contains the job's secret: pass it only
 * over a channel you trust. */
kolo_result_t kolo_get_unique_id(kolo_unique_id* id);
kolo_result_t kolo_comm_init_rank(kolo_comm_t* comm, int nranks, const kolo_unique_id* id, int rank);
/* Ranks with the same color form a new communicator, ordered by key, then by old rank.
 * color < 0 means "not in any": *out is set to NULL. */
kolo_result_t kolo_comm_split(kolo_comm_t comm, int color, int key, kolo_comm_t* out);
kolo_result_t kolo_comm_destroy(kolo_comm_t comm);
/* Safe from another thread; the communicator's runtime (kolo_enqueue_*) is aborted with it. */
kolo_result_t kolo_comm_abort(kolo_comm_t comm);
/* The communicator's first failure, including one that happened after a device call had
 * returned (a peer died while the call was queued on a stream): KOLO_SUCCESS while it
 * works; kolo_last_error() then says what failed. Safe from another thread. */
kolo_result_t kolo_comm_get_async_error(kolo_comm_t comm, kolo_result_t* async_error);
/* How long each wait of this communicator's later calls may last, in seconds (> 0; above
 * 1e9, inf too, counts as 1e9): KOLO_TIMEOUT when it was made. Not collective: give every
 * rank the same. The runtime's calls (kolo_enqueue_*) keep KOLO_TIMEOUT. */
kolo_result_t kolo_comm_set_timeout(kolo_comm_t comm, double seconds);
/* Writes the communicator's flight recorder (comm NULL: every communicator of this process,
 * the runtime's own among them) (its last KOLO_TRACE_CALLS calls: which
 * collective, dtype, count, plan, when each entered, started and ended, and its state; no
 * data, no secret) to folder/kolo-trace.<communicator>.rank<R>.json (folder NULL or "":
 * KOLO_TRACE_DIR). Not collective, safe from another thread: a thread of a rank whose call
 * hangs may dump. `kolo-trace FOLDER` reads the dumps of every rank. A failed call dumps by
 * itself where KOLO_TRACE_DIR is set, and so does SIGUSR1. */
kolo_result_t kolo_comm_dump(kolo_comm_t comm, const char* folder);
/* ---- Elastic jobs (docs/elastic.md) ----
 * Collective over the ranks that take part: a new communicator without the ranks listed in
 * exclude (every caller passes the same list; excluded ranks do not call), or, with exclude
 * NULL and n_exclude 0, without the ranks that are gone (their process exited) or that do
 * not call within KOLO_TIMEOUT. Works on a failed or aborted communicator (abort it first
 * where a call of another thread may still wait in it). The survivors keep their order. A
 * rank left out (it came after the others agreed) gets KOLO_ERR_ABORTED and *out = NULL.
 * The agreement runs in the job's store under KOLO_ELASTIC=1 (kolorun's, which outlives
 * every rank), else in the communicator's, which lives in its rank 0's process: then rank 0
 * must be among the survivors. Registered buffers are not carried over: register them with
 * the new communicator. */
kolo_result_t kolo_comm_shrink(kolo_comm_t comm, const int* exclude, int n_exclude, kolo_comm_t* out);
/* Elastic worlds (kolo_init's with KOLO_ELASTIC=1, which kolorun --min-np/--max-np sets, and
 * the communicators this returns): the next membership epoch, made of the ranks of comm that
 * take part (as kolo_comm_shrink with exclude NULL) and the workers waiting to join (started
 * with KOLO_ELASTIC=join: their kolo_init returns once a rebuild lets them in). Every rank
 * keeps its worker id; ranks are renumbered, old members first in their old order. The old
 * communicator is left as it was: destroy it. */
kolo_result_t kolo_comm_rebuild(kolo_comm_t comm, kolo_comm_t* out);
int kolo_comm_epoch(kolo_comm_t comm); /* 0 at kolo_init; +1 per shrink or rebuild */
/* Workers waiting to join an elastic world at its next rebuild (0 elsewhere). Reads the
 * job's store, not collective: ask on one rank and broadcast, so that every rank decides alike. */
kolo_result_t kolo_comm_pending_joiners(kolo_comm_t comm, int* count);
/* 1 when this rank should leave the elastic world: kolorun's discovery script no longer
 * lists its host (KOLO_ELASTIC_HOST). Not collective: a rank that leaves stops taking part
 * (it exits); the others rebuild without it, with nothing to restore. 0 elsewhere. */
kolo_result_t kolo_comm_leaving(kolo_comm_t comm, int* leaving);
/* This rank's worker id, the same in every epoch: "0".."n-1" for the ranks of kolo_init,
 * "j1", "j2"... for workers that joined; NUL-terminated into buf (size bytes). */
kolo_result_t kolo_comm_worker_id(kolo_comm_t comm, char* buf, size_t size);
int kolo_comm_rank(kolo_comm_t comm);
int kolo_comm_size(kolo_comm_t comm);
int kolo_comm_local_rank(kolo_comm_t comm);
int kolo_comm_local_size(kolo_comm_t comm);
int kolo_comm_cross_rank(kolo_comm_t comm);
int kolo_comm_cross_size(kolo_comm_t comm);

kolo_result_t kolo_allreduce(const void* send, void* recv, size_t count, kolo_dtype_t dtype,
                             kolo_op_t op, kolo_comm_t comm, void* stream);
kolo_result_t kolo_broadcast(const void* send, void* recv, size_t count, kolo_dtype_t dtype,
                             int root, kolo_comm_t comm, void* stream);
kolo_result_t kolo_reduce(const void* send, void* recv, size_t count, kolo_dtype_t dtype,
                          kolo_op_t op, int root, kolo_comm_t comm, void* stream);
kolo_result_t kolo_allgather(const void* send, void* recv, size_t sendcount, kolo_dtype_t dtype,
                             kolo_comm_t comm, void* stream);
kolo_result_t kolo_allgatherv(const void* send, size_t sendcount, void* recv,
                              const size_t* recvcounts, const size_t* displs, kolo_dtype_t dtype,
                              kolo_comm_t comm, void* stream);
kolo_result_t kolo_reduce_scatter(const void* send, void* recv, size_t recvcount,
                                  kolo_dtype_t dtype, kolo_op_t op, kolo_comm_t comm, void* stream);
kolo_result_t kolo_alltoall(const void* send, void* recv, size_t count_per_peer,
                            kolo_dtype_t dtype, kolo_comm_t comm, void* stream);
kolo_result_t kolo_send(const void* buf, size_t count, kolo_dtype_t dtype, int peer,
                        kolo_comm_t comm, void* stream);
kolo_result_t kolo_recv(void* buf, size_t count, kolo_dtype_t dtype, int peer, kolo_comm_t comm,
                        void* stream);
kolo_result_t kolo_barrier(kolo_comm_t comm);
/* Calls between group_start and group_end are run together at group_end (so a send and
 * a recv with the same peer cannot deadlock). Groups nest; the outermost end runs them.
 * As in NCCL, the calls of a group must be independent: none may read a buffer that
 * another call of the group writes. */
kolo_result_t kolo_group_start(void);
kolo_result_t kolo_group_end(void);

typedef struct {
  double prescale;         /* inputs are multiplied by this before reducing (reductions only;
                              allgather: must be 1) */
  double postscale;        /* the result is multiplied by this (reductions only) */
  kolo_dtype_t wire_dtype; /* KOLO_DTYPE_COUNT = as the data; FLOAT16, BFLOAT16,
                              FLOAT8_E4M3/E5M2 (a scale per 128 values) on FLOAT32 data:
                              allreduce and reduce_scatter (SUM or AVG): each contribution
                              compressed once on the wire, accumulated in FLOAT32 (allreduce:
                              the result once more); allgather: each rank's block compressed
                              once, every rank decoding the same bytes (the same bits
                              everywhere, the block's owner included). Runs on host buffers
                              (one host: the staging slots; several hosts: encoded blocks
                              over the links) and, allreduce only, on device buffers of one
                              host (device_ipc); staged device buffers, device
                              reduce_scatter/allgather and groups get KOLO_ERR_UNSUPPORTED on
                              more than one rank. Error bounds: docs/numerics.md */
  int algorithm;           /* 0 = automatic; otherwise a KOLO_ALGO_* value */
} kolo_coll_options;
#define KOLO_COLL_OPTIONS_INIT {1.0, 1.0, KOLO_DTYPE_COUNT, 0}
kolo_result_t kolo_allreduce_ex(const void* send, void* recv, size_t count, kolo_dtype_t dtype,
                                kolo_op_t op, const kolo_coll_options* options, kolo_comm_t comm,
                                void* stream);
kolo_result_t kolo_reduce_scatter_ex(const void* send, void* recv, size_t recvcount,
                                     kolo_dtype_t dtype, kolo_op_t op,
                                     const kolo_coll_options* options, kolo_comm_t comm,
                                     void* stream);
kolo_result_t kolo_allgather_ex(const void* send, void* recv, size_t sendcount, kolo_dtype_t dtype,
                                const kolo_coll_options* options, kolo_comm_t comm, void* stream);

/* ---- Registered device memory (as NCCL's ncclMemAlloc / ncclCommRegister) ----
 * Device collectives on one host normally copy each rank's input into a staging slot
 * that the peers read. Buffers registered with a communicator are read by the peers in
 * place instead (no copy, no 4 MB chunks): allreduce (input and output; not when
 * prescaled or compressed; the planner picks this two-shot form when it beats the
 * slots), reduce and reduce_scatter (the input), broadcast and allgather(v) (the output).
 * Registration is collective: every rank of the communicator registers one buffer of its
 * own (sizes may differ) in the same order, and the k-th registration of every rank forms
 * window k. A call is read in place when each buffer the peers read lies in a window at
 * the same offset on every rank (input and output may be in different windows). Ranks
 * that disagree (buffers at other offsets, registered on some ranks only, or a prescale
 * on some ranks only) are detected by the collective itself: the call has returned
 * KOLO_SUCCESS (it is stream-ordered), and the communicator then fails with
 * KOLO_ERR_MISMATCH on every rank (kolo_comm_get_async_error); that call's outputs are
 * undefined, nothing else is touched. Elsewhere (ranks on several hosts, GPUs without
 * peer access) registration succeeds and changes nothing. cudaMalloc'd memory (or
 * kolo_mem_alloc's) can be registered; managed, pool and cuMemCreate memory cannot. A
 * registration that one rank cannot make fails on every rank.
 * Registration is optional: large calls on plain cudaMalloc buffers are read in place
 * too, each allocation exported and mapped the first time a call uses it
 * (KOLO_DEVICE_AUTO_REGISTER; docs/device.md). */
kolo_result_t kolo_mem_alloc(void** ptr, size_t bytes); /* device memory, current device */
kolo_result_t kolo_mem_free(void* ptr);
kolo_result_t kolo_mem_register(kolo_comm_t comm, void* buffer, size_t bytes, void** handle);
/* Collective; waits for the communicator's queued device calls, and for every peer to
 * unmap the buffer: once it returns KOLO_SUCCESS the buffer may be freed (an error says a
 * peer did not, in time: keep it). Not concurrently with calls on the same communicator
 * from other threads. Destroying the communicator deregisters what is left (after a
 * failure without waiting for the peers: free such buffers only once they have exited). */
kolo_result_t kolo_mem_deregister(kolo_comm_t comm, void* handle);

/* ---- The Horovod-style runtime: named asynchronous operations (engine/runtime/) ----
 * Each rank hands over tensors by name, in any order; a background thread per
 * communicator agrees with the other ranks on which names are ready everywhere, fuses
 * ready allreduces (KOLO_FUSION_THRESHOLD) and runs them in the same order on every rank.
 * The first kolo_enqueue_* or kolo_join on a communicator starts its runtime, which every
 * rank of the communicator must do. Buffers must stay valid until the request completes.
 * A name may be reused once its request has completed.
 * Host or device buffers (all of one request's of one kind, every rank's of the same kind;
 * a rank's device tensors all on one device). Device tensors are read once the work that
 * options->stream holds at enqueue is done (an event recorded on it), are reduced on the
 * runtime's own stream, and the request completes once that stream has finished: outputs
 * are then ready for any stream. A rank with no bytes in a device request (allgather of 0
 * rows) still passes a pointer into device memory of its device. */
typedef struct kolo_request* kolo_request_t;
/* Called once on the runtime's thread when the operation completes, before kolo_wait
 * returns; it must not block on the runtime (no kolo_wait inside). */
typedef void (*kolo_completion_fn)(kolo_request_t request, kolo_result_t result, void* user_data);
/* Allocates an output whose size depends on other ranks (allgather, alltoall) once it is
 * known: total_count elements, rank_counts[q] rows (allgather) or elements (alltoall)
 * from rank q. Returns NULL to fail the operation on this rank. */
typedef void* (*kolo_output_alloc_fn)(void* user_data, size_t total_count, const size_t* rank_counts, int nranks);
typedef struct {
  double prescale;             /* allreduce: inputs are multiplied by this (during the copy in) */
  double postscale;            /* allreduce: the result is multiplied by this (during the copy out) */
  kolo_dtype_t wire_dtype;     /* allreduce of FLOAT32: FLOAT16, BFLOAT16 or FLOAT8_* on the wire,
                                  accumulated in FLOAT32 (as kolo_allreduce_ex); KOLO_DTYPE_COUNT: none */
  kolo_completion_fn callback; /* optional */
  void* callback_data;
  kolo_output_alloc_fn alloc;  /* required by allgather and alltoall */
  void* alloc_data;
  void* stream;                /* device tensors: the stream that produces them (NULL = default) */
  int ndim;                    /* optional (0 = not given): the tensor's shape, which every rank must */
  const int64_t* shape;        /* give alike or the operation fails on all (allreduce, broadcast,
                                  reduce_scatter: the whole shape; allgather, alltoall: a row's shape,
                                  the dimensions after the first); checked, not used to move data */
} kolo_enqueue_options;
#define KOLO_ENQUEUE_OPTIONS_INIT {1.0, 1.0, KOLO_DTYPE_COUNT, NULL, NULL, NULL, NULL, NULL, 0, NULL}

/* options may be NULL (= KOLO_ENQUEUE_OPTIONS_INIT). On success *request is set; free it
 * with kolo_request_free after it completes. The name is taken until then: enqueuing it
 * again before its request is freed is KOLO_ERR_INVALID_USAGE, completed or not. */
kolo_result_t kolo_enqueue_allreduce(const char* name, const void* send, void* recv, size_t count,
                                     kolo_dtype_t dtype, kolo_op_t op, const kolo_enqueue_options* options,
                                     kolo_comm_t comm, kolo_request_t* request);
/* Several tensors under one name, always fused into one collective. */
kolo_result_t kolo_enqueue_allreduce_group(const char* name, int ntensors, const void* const* sends,
                                           void* const* recvs, const size_t* counts, kolo_dtype_t dtype,
                                           kolo_op_t op, const kolo_enqueue_options* options, kolo_comm_t comm,
                                           kolo_request_t* request);
/* rows may differ per rank; row_count (elements per row) may not. The output (all ranks'
 * rows, in rank order) comes from options->alloc. */
kolo_result_t kolo_enqueue_allgather(const char* name, const void* send, size_t rows, size_t row_count,
                                     kolo_dtype_t dtype, const kolo_enqueue_options* options, kolo_comm_t comm,
                                     kolo_request_t* request);
/* In place: buf is the root's input and every other rank's output. */
kolo_result_t kolo_enqueue_broadcast(const char* name, void* buf, size_t count, kolo_dtype_t dtype, int root,
                                     const kolo_enqueue_options* options, kolo_comm_t comm, kolo_request_t* request);
/* send_counts[q]: elements sent to rank q (blocks in rank order). The output (blocks from
 * each rank, in rank order) comes from options->alloc. */
kolo_result_t kolo_enqueue_alltoall(const char* name, const void* send, const size_t* send_counts,
                                    kolo_dtype_t dtype, const kolo_enqueue_options* options, kolo_comm_t comm,
                                    kolo_request_t* request);
/* send holds size * recvcount elements; recv gets this rank's reduced block. */
kolo_result_t kolo_enqueue_reduce_scatter(const char* name, const void* send, void* recv, size_t recvcount,
                                          kolo_dtype_t dtype, kolo_op_t op, const kolo_enqueue_options* options,
                                          kolo_comm_t comm, kolo_request_t* request);
/* KOLO_IN_PROGRESS while running; then the operation's result (kolo_last_error() says why
 * it failed, e.g. KOLO_ERR_MISMATCH naming the tensor, ranks and values). */
kolo_result_t kolo_test(kolo_request_t request);
/* Blocks until the operation completes (at most KOLO_TIMEOUT: then KOLO_ERR_TIMEOUT). */
kolo_result_t kolo_wait(kolo_request_t request);
/* KOLO_ERR_INVALID_USAGE while the request is in progress. */
kolo_result_t kolo_request_free(kolo_request_t request);
/* This rank has no more data: it contributes zeros to the other ranks' allreduces until
 * every rank has joined. Returns when all have; *last_rank (may be NULL) = the rank that
 * joined last. */
kolo_result_t kolo_join(kolo_comm_t comm, int* last_rank);
/* Start (or restart, truncating) and stop the runtime's Chrome trace-event timeline on
 * this rank (KOLO_TIMELINE starts it on rank 0). */
kolo_result_t kolo_timeline_start(kolo_comm_t comm, const char* path);
kolo_result_t kolo_timeline_stop(kolo_comm_t comm);

#ifdef __cplusplus
}
#endif

#endif /* KOLO_KOLO_H_ */
