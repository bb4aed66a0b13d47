"""Horovod's horovod.torch.mpi_ops on kolo: the operations and the world's queries, for
scripts that import them from there (`from horovod.torch.mpi_ops import synchronize`)."""
from kolo.torch import (Adasum, Average, Max, Min, Product, Sum, allgather, allgather_async,  # noqa: F401
                        allreduce, allreduce_, allreduce_async, allreduce_async_, alltoall, alltoall_async, barrier,
                        broadcast, broadcast_, broadcast_async, broadcast_async_, cross_rank, cross_size,
                        global_process_set, grouped_allgather, grouped_allgather_async, grouped_allreduce,
                        grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_, grouped_reducescatter,
                        grouped_reducescatter_async, init, is_initialized, join, local_rank, local_size, poll, rank,
                        reducescatter, reducescatter_async, shutdown, size, sparse_allreduce_async, synchronize)
