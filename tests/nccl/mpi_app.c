/* An NCCL program as HPC codes write one: MPI starts the ranks, rank 0 makes the unique id
 * and MPI_Bcast gives it to the others, then NCCL collectives (on host buffers: kolo's
 * extension, so that it runs without a GPU). Built against NVIDIA's nccl.h, linked with
 * -lnccl; run under mpirun on kolo's libnccl.so.2. Prints "mpi_app ok" on every rank. */
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                                          \
  do {                                                                                       \
    ncclResult_t rc_ = (call);                                                               \
    if (rc_ != ncclSuccess) {                                                                \
      fprintf(stderr, "%s: %s (%s)\n", #call, ncclGetErrorString(rc_), ncclGetLastError(NULL)); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
    }                                                                                        \
  } while (0)

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ncclUniqueId id;
  if (rank == 0) CHECK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  CHECK(ncclCommInitRank(&comm, size, id, rank));
  enum { N = 1000 };
  float* x = malloc(N * sizeof(float));
  double* y = malloc(N * sizeof(double));
  int bad = 0;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < N; ++i) x[i] = (float)(rank + i % 5 + round);
    CHECK(ncclAllReduce(x, x, N, ncclFloat, ncclSum, comm, NULL));
    for (int i = 0; i < N; ++i) {
      float want = 0;
      for (int r = 0; r < size; ++r) want += (float)(r + i % 5 + round);
      bad += x[i] != want;
    }
    for (int i = 0; i < N; ++i) y[i] = rank == size - 1 ? i * 0.5 : -1;
    CHECK(ncclBroadcast(y, y, N, ncclDouble, size - 1, comm, NULL));
    for (int i = 0; i < N; ++i) bad += y[i] != i * 0.5;
  }
  CHECK(ncclCommDestroy(comm));
  int all = 0;
  MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (all == 0) printf("rank %d: mpi_app ok\n", rank);
  else printf("rank %d: %d wrong\n", rank, bad);
  free(x);
  free(y);
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}
