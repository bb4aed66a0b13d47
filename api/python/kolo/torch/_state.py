"""The process's kolo world for kolo.torch (made by init(), replaced by rebuild() in elastic
jobs, destroyed by shutdown()) and its process sets: sub-communicators split from the world
(kolo_comm_split), each with its own runtime, so that operations on a set run among its
ranks only."""
import atexit
import ctypes

from kolo import _capi
from kolo.torch import _inflight
from kolo.torch._launch import launched

comm = None  # kolo_comm_t of the world, or None before init()


def require():
    if comm is None:
        raise ValueError("kolo.torch has not been initialised; call kolo.torch.init() first")
    return comm


class ProcessSet:
    """Ranks of the world that run operations among themselves (Horovod's ProcessSet).
    Made usable by add_process_set, which every rank calls in the same order."""

    def __init__(self, ranks):
        self.ranks = sorted(int(r) for r in ranks)
        if len(set(self.ranks)) != len(self.ranks):
            raise ValueError(f"kolo.torch: a process set has a rank twice: {self.ranks}")
        self.process_set_id = None  # set by add_process_set
        self.comm = None            # this rank's communicator of the set; None where it is not a member

    def included(self):
        return self.comm is not None

    def rank(self):
        return _capi.lib.kolo_comm_rank(comm_of(self))

    def size(self):
        return len(self.ranks)

    def __repr__(self):
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0
_sets = {0: global_process_set}
_next_id = 1


def comm_of(process_set):
    """The communicator operations of `process_set` (None: the world) run on."""
    require()
    if process_set is None or process_set is global_process_set:
        return comm
    if process_set.process_set_id not in _sets or _sets[process_set.process_set_id] is not process_set:
        raise ValueError(f"kolo.torch: {process_set!r} has not been added (add_process_set) or was removed")
    if process_set.comm is None:
        raise ValueError(f"kolo.torch: rank {_capi.lib.kolo_comm_rank(comm)} is not in {process_set!r}")
    return process_set.comm


def set_id(process_set):
    return 0 if process_set is None else process_set.process_set_id


def add_process_set(process_set):
    """Collective over the world: every rank calls it with the same ranks, in the same order."""
    require()
    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)
    n = _capi.lib.kolo_comm_size(comm)
    me = _capi.lib.kolo_comm_rank(comm)
    if not ps.ranks or ps.ranks[0] < 0 or ps.ranks[-1] >= n:
        raise ValueError(f"kolo.torch: process set ranks {ps.ranks} are not ranks of the {n} in the world")
    out = ctypes.c_void_p()
    _capi.check(_capi.lib.kolo_comm_split(comm, 0 if me in ps.ranks else -1, me, ctypes.byref(out)))
    ps.comm = out if out.value else None
    # Never reused (unnamed operations are counted per set id: a new set starts afresh).
    global _next_id
    ps.process_set_id = _next_id
    _next_id += 1
    _sets[ps.process_set_id] = ps
    return ps


def remove_process_set(process_set):
    """Collective among the set's ranks (others return at once)."""
    if process_set is global_process_set or process_set.process_set_id not in _sets:
        return False
    del _sets[process_set.process_set_id]
    made, process_set.comm = process_set.comm, None
    if made is not None:
        _capi.check(_capi.lib.kolo_comm_destroy(made))
    return True


_torch_store = None  # torch's store the world was made through (torchrun), kept while it lives


def _world_through_torch_store():
    """Under torchrun (RANK/WORLD_SIZE, no KOLO_RANK): the world is made as the "kolo"
    backend makes its group. Rank 0's kolo unique id (which holds the job's secret) goes
    through torch's store, then every rank joins with kolo_comm_init_rank: no KOLO_ADDR, no
    KOLO_SECRET, and a fresh store each time torchrun's agent restarts the workers. The
    store: the default group's when torch.distributed is initialised (a second env:// store
    on MASTER_PORT would clash with it), else env://'s (the agent's under static rendezvous)."""
    global _torch_store
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        store, me, n = dist.distributed_c10d._get_default_store(), dist.get_rank(), dist.get_world_size()
    else:
        store, me, n = next(dist.rendezvous("env://"))
    store = dist.PrefixStore("kolo.torch", store)
    uid = _capi.UniqueId()
    if me == 0:
        _capi.check(_capi.lib.kolo_get_unique_id(ctypes.byref(uid)))
        store.set("unique_id", ctypes.string_at(ctypes.byref(uid), ctypes.sizeof(uid)))
    ctypes.memmove(ctypes.byref(uid), store.get("unique_id"), ctypes.sizeof(uid))
    out = ctypes.c_void_p()
    _capi.check(_capi.lib.kolo_comm_init_rank(ctypes.byref(out), n, ctypes.byref(uid), me))
    _torch_store = store  # under c10d rank 0's store serves the others until they have read
    return out


def init():
    global comm
    if comm is not None:
        return
    launch = launched()
    out = ctypes.c_void_p()
    if launch.launcher == "torchrun" and launch.size > 1:
        out = _world_through_torch_store()
    else:
        _capi.check(_capi.lib.kolo_init(ctypes.byref(out)))
    comm = out
    global_process_set.ranks = list(range(_capi.lib.kolo_comm_size(comm)))
    global_process_set.comm = comm
    atexit.register(shutdown)


def rebuild(failed=True):
    """Elastic worlds (kolo.torch.elastic): replaces the world by its next membership epoch
    (kolo_comm_rebuild: the ranks that take part, old ones first in their order, and the
    workers waiting to join). Collective over every surviving rank. failed: the world has
    failed (a peer died), so its communicators are aborted before they are destroyed and
    their destroy waits for no peer; False after HostsUpdatedInterrupt (all alive).

    Process sets other than the global one are dropped (their ranks are the old world's;
    add them again on the new one), and so are operations still in flight (their handles
    become unknown). Unnamed operations are counted afresh, so that a joiner names them as
    the others do. Raises KoloError when this rank is left out of the new world (then
    kolo.torch is uninitialised here), or when a member died while the new world was being
    made (then the old world stays, for another rebuild)."""
    global comm, _next_id
    old = require()
    for ps in [ps for i, ps in _sets.items() if i != 0]:
        del _sets[ps.process_set_id]
        made, ps.comm = ps.comm, None
        if made is not None:
            _discard(made, failed)
    _next_id = 1
    # The world's runtime runs on a private duplicate of `old`, so it does not disturb the
    # rebuild; kolo stops it only by destroying `old`, which the rebuild still needs.
    out = ctypes.c_void_p()
    result = _capi.lib.kolo_comm_rebuild(old, ctypes.byref(out))
    error = _capi.last_error()
    if result != _capi.SUCCESS and "(rebuild again)" in (error or ""):
        # A member died while the new world was being made: that epoch is spent, and the
        # old world stays for another rebuild (kolo takes the next epoch number).
        raise _capi.error_for(result, error)
    comm = global_process_set.comm = None
    _discard(old, failed)
    _inflight.forget()
    if result != _capi.SUCCESS or not out.value:
        raise _capi.error_for(result, error or "kolo_comm_rebuild gave no communicator")
    comm = global_process_set.comm = out
    global_process_set.ranks = list(range(_capi.lib.kolo_comm_size(comm)))
    from kolo.torch import _start_runtime  # what init() starts (kolo.torch imports this module)
    _start_runtime(None)
    return comm


def _discard(made, failed):
    """Destroys a communicator of the old world, aborted first where it failed. Its errors
    are not raised: nothing would use them, the world being replaced."""
    if failed:
        _capi.lib.kolo_comm_abort(made)
    _capi.lib.kolo_comm_destroy(made)


def shutdown():
    global comm
    if comm is None:
        return
    for ps in [ps for i, ps in _sets.items() if i != 0]:
        remove_process_set(ps)
    made, comm = comm, None
    global_process_set.comm = None
    try:
        _capi.check(_capi.lib.kolo_comm_destroy(made))
    finally:
        # As Horovod's shutdown resets its handles: unnamed operations are numbered from 0
        # again in the next world, so ranks that a failure left out of step (a rank that
        # made an operation the others did not) start it in step.
        _inflight.forget()
