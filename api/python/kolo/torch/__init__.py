"""Horovod's PyTorch API on kolo: `import kolo.torch as hvd` in a Horovod training script.

Runs with `kolorun -np N python3 train.py` (or mpirun, srun): init() finds the world in the
environment. CPU and CUDA tensors, handed to kolo's runtime through their data pointers;
named operations are matched across ranks, fused and ordered by the runtime (engine/runtime).
Process sets are sub-communicators of the world. op=Adasum runs on any number of ranks
(engine/adasum.h), CUDA tensors staged through host memory. Elastic training (Horovod's
hvd.elastic) under `kolorun --min-np N --max-np M`: kolo.torch.elastic."""
import ctypes

from kolo import _capi
from kolo._capi import KoloError
from kolo.torch import _state
from kolo.torch._ops import (Adasum, Average, Max, Min, Product, Sum, allgather, allgather_async,  # noqa: F401
                             allreduce, allreduce_, allreduce_async, allreduce_async_, alltoall, alltoall_async,
                             barrier, broadcast, broadcast_, broadcast_async, broadcast_async_, grouped_allgather,
                             grouped_allgather_async, grouped_allreduce, grouped_allreduce_, grouped_allreduce_async,
                             grouped_allreduce_async_, grouped_reducescatter, grouped_reducescatter_async, join, poll,
                             reducescatter, reducescatter_async, sparse_allreduce_async, synchronize)
from kolo.torch._state import ProcessSet, global_process_set, remove_process_set  # noqa: F401
from kolo.torch._optimizer import (DistributedOptimizer, allgather_object, broadcast_object,  # noqa: F401
                                   broadcast_optimizer_state, broadcast_parameters)
from kolo.torch.compression import Compression  # noqa: F401
from kolo.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401
from kolo.torch import elastic  # noqa: F401 - hvd.elastic.run, hvd.elastic.TorchState, ...

# Horovod scripts catch this when a peer fails.
HorovodInternalError = KoloError

# Horovod's variables, as its users set them, and kolo's that do the same (the same units:
# bytes, milliseconds, seconds). Read when kolo.torch starts its runtime; a KOLO_* one set
# too wins, and a conflict is a warning.
HOROVOD_VARIABLES = {
    "HOROVOD_TIMELINE": "KOLO_TIMELINE",
    "HOROVOD_FUSION_THRESHOLD": "KOLO_FUSION_THRESHOLD",
    "HOROVOD_CYCLE_TIME": "KOLO_CYCLE_TIME",
    "HOROVOD_CACHE_CAPACITY": "KOLO_CACHE_CAPACITY",
    "HOROVOD_STALL_CHECK_TIME_SECONDS": "KOLO_STALL_CHECK_TIME",
    "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "KOLO_STALL_SHUTDOWN_TIME",
    "HOROVOD_AUTOTUNE": "KOLO_AUTOTUNE",
}


def _horovod_environment(environ=None):
    """Sets the KOLO_* variable of each HOROVOD_* one given (in `environ`, os.environ by
    default, which kolo's library reads too); returns the warnings."""
    import os
    env = os.environ if environ is None else environ
    warnings = []
    for horovod, kolo in HOROVOD_VARIABLES.items():
        value = env.get(horovod)
        if value is None:
            continue
        if horovod == "HOROVOD_TIMELINE" and value == "DYNAMIC":
            continue  # Horovod's word for "no file until start_timeline()", not a file's name
        if horovod == "HOROVOD_AUTOTUNE":
            value = "1" if value.strip().lower() in ("1", "true", "yes", "on") else "0"
        mine = env.get(kolo)
        if mine is None:
            env[kolo] = value
        elif mine != value:
            warnings.append(f"kolo.torch: {horovod}={value} and {kolo}={mine} disagree; {kolo} wins")
    if env.get("HOROVOD_STALL_CHECK_DISABLE", "").strip().lower() in ("1", "true"):
        if env.get("KOLO_STALL_CHECK_TIME") not in (None, "0"):
            warnings.append("kolo.torch: HOROVOD_STALL_CHECK_DISABLE=1 and KOLO_STALL_CHECK_TIME disagree; "
                            "KOLO_STALL_CHECK_TIME wins")
        else:
            env["KOLO_STALL_CHECK_TIME"] = "0"
    if env.get("HOROVOD_TIMELINE_MARK_CYCLES", "0") not in ("", "0"):
        warnings.append("kolo.torch: HOROVOD_TIMELINE_MARK_CYCLES: kolo's timeline marks no cycles (ignored)")
    return warnings


def init(comm=None, process_sets=None):
    """Joins the job kolorun, mpirun or srun started (KOLO_RANK/KOLO_SIZE/KOLO_ADDR or
    theirs). Idempotent."""
    if comm is not None:
        raise NotImplementedError("kolo.torch.init: comm= is not supported; the world is every rank the launcher "
                                  "started (use process sets for subsets)")
    first = _state.comm is None
    if first:
        import warnings
        for text in _horovod_environment():
            warnings.warn(text)
    _state.init()
    if first:
        _start_runtime(None)
    for ps in process_sets or []:
        add_process_set(ps)


def _start_runtime(process_set):
    """Starts the runtime of the world or of a process set now, where every rank of it is,
    as Horovod starts its background thread in init(). Starting it is a rendezvous of the
    communicator's ranks; left to the first operation, a rank whose first operation is
    asynchronous would wait there for a peer that is in barrier() meanwhile (a hang until
    KOLO_TIMEOUT)."""
    import torch
    root = 0 if process_set is None else process_set.ranks[0]  # root_rank is a global rank (as Horovod's)
    broadcast_(torch.zeros(1, dtype=torch.uint8), root, name="kolo.torch.start", process_set=process_set)


def add_process_set(process_set):
    """Collective over the world: every rank calls it with the same ranks, in the same order."""
    ps = _state.add_process_set(process_set)
    if ps.included():
        _start_runtime(ps)
    return ps


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


def dump_trace(folder=None):
    """Writes the flight recorder of every kolo communicator of this process (the last
    KOLO_TRACE_CALLS calls of each: what, how planned, when; no data) into `folder`
    (None: KOLO_TRACE_DIR), one file each; `kolo-trace FOLDER` reads those of all ranks.
    Safe from another thread, e.g. while a call hangs."""
    _capi.check(_capi.lib.kolo_comm_dump(None, folder.encode() if folder else None))


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
