"""Horovod's PyTorch API on kolo: `import kolo.torch as hvd` in a Horovod training script.

Runs with `kolorun -np N python3 train.py` (or mpirun, srun): init() finds the world in the
environment. CPU tensors, handed to kolo's runtime through their data pointers; named
operations are matched across ranks, fused and ordered by the runtime (engine/runtime).
Process sets are sub-communicators of the world. Not yet: CUDA tensors, Adasum (refused
with an error)."""
import ctypes

from kolo import _capi
from kolo._capi import KoloError
from kolo.torch import _state
from kolo.torch._ops import (Adasum, Average, Max, Min, Product, Sum, allgather, allgather_async,  # noqa: F401
                             allreduce, allreduce_, allreduce_async, allreduce_async_, alltoall, alltoall_async,
                             barrier, broadcast, broadcast_, broadcast_async, broadcast_async_, grouped_allreduce,
                             grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_, join, poll,
                             reducescatter, reducescatter_async, synchronize)
from kolo.torch._state import ProcessSet, add_process_set, global_process_set, remove_process_set  # noqa: F401
from kolo.torch._optimizer import (DistributedOptimizer, allgather_object, broadcast_object,  # noqa: F401
                                   broadcast_optimizer_state, broadcast_parameters)
from kolo.torch.compression import Compression  # noqa: F401
from kolo.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401

# Horovod scripts catch this when a peer fails.
HorovodInternalError = KoloError


def init(comm=None, process_sets=None):
    """Joins the job kolorun, mpirun or srun started (KOLO_RANK/KOLO_SIZE/KOLO_ADDR or
    theirs). Idempotent."""
    if comm is not None:
        raise NotImplementedError("kolo.torch.init: comm= is not supported; the world is every rank the launcher "
                                  "started (use process sets for subsets)")
    _state.init()
    for ps in process_sets or []:
        add_process_set(ps)


def shutdown():
    _state.shutdown()


def is_initialized():
    return _state.comm is not None


def _query(fn):
    return getattr(_capi.lib, fn)(_state.require())


def size():
    return _query("kolo_comm_size")


def rank():
    return _query("kolo_comm_rank")


def local_size():
    return _query("kolo_comm_local_size")


def local_rank():
    return _query("kolo_comm_local_rank")


def cross_size():
    return _query("kolo_comm_cross_size")


def cross_rank():
    return _query("kolo_comm_cross_rank")


def start_timeline(file_path, mark_cycles=False):
    _capi.check(_capi.lib.kolo_timeline_start(_state.require(), file_path.encode()))


def stop_timeline():
    _capi.check(_capi.lib.kolo_timeline_stop(_state.require()))


# What Horovod's capability queries ask, answered for kolo: it uses neither MPI, Gloo,
# oneCCL nor DDL for its collectives (it has its own), and NCCL only as an optional
# fallback for device buffers (KOLO_BACKEND=nccl), which kolo.torch does not use.
def mpi_built():
    return False


def mpi_enabled():
    return False


def mpi_threads_supported():
    return False


def gloo_built():
    return False


def gloo_enabled():
    return False


def nccl_built():
    return 0


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return False  # kolo.torch carries CPU tensors so far


def rocm_built():
    return False


def kolo_built():
    return True


del ctypes
