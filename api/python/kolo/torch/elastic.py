"""Horovod's elastic training (hvd.elastic) on kolo, for jobs started by
`kolorun --min-np N --max-np M`: the training function, decorated with `run`, goes on
when a worker dies or new workers come.

    @hvd.elastic.run
    def train(state):
        ...                # every collective inside; state.commit() every few batches
    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)
    train(state)

A collective that fails because a peer died raises HorovodInternalError (kolo's KoloError)
on the others; run() then restores the last commit, rebuilds the world from the ranks left
and the workers waiting to join (kolo_comm_rebuild), and calls the function again once
sync() has given every rank rank 0's state. state.commit() also asks whether workers wait
to join or kolorun asks a rank to leave (its host is no longer listed); then every rank
raises HostsUpdatedInterrupt, the leaving workers exit (status 0), and run() rebuilds the
others without restoring (what was just committed is current; no sync when no one joins).
A new worker's hvd.init() returns once a rebuild has let it in; its first sync() gives it
the state.

Unlike Horovod, membership changes are not pushed by a driver: they are seen when a
collective fails, or polled at commit() (one allreduce). Process sets other
than the global one do not survive a rebuild (kolo.torch._state.rebuild)."""
import copy
import ctypes
import functools
import sys
import time

import torch

from kolo import _capi
from kolo._capi import KoloError, KoloUsageError
from kolo.torch import _ops, _state
from kolo.torch._elastic_sampler import ElasticSampler  # noqa: F401 - hvd.elastic.ElasticSampler
from kolo.torch._optimizer import broadcast_object, broadcast_optimizer_state, broadcast_parameters


_MISMATCH = _capi.RESULT_NAMES.index("ERR_MISMATCH")
# Rebuilds tried in a row before run() gives up: each further one follows another death.
_REBUILD_ATTEMPTS = 5


class HostsUpdatedInterrupt(RuntimeError):
    """Raised on every rank by commit() when workers wait to join or a host was removed.
    skip_sync (Horovod's): no new worker needs the state (only removals), so run() need not
    sync."""

    def __init__(self, skip_sync=False):
        super().__init__("kolo.torch.elastic: the job's hosts changed; the world is rebuilt")
        self.skip_sync = skip_sync


def epoch():
    """The world's membership epoch (kolo's): 0 for init()'s world, +1 per rebuild."""
    return _capi.lib.kolo_comm_epoch(_state.require())


def worker_id():
    """This worker's id, the same in every epoch (kolo's): "0".."n-1" for the workers
    kolorun started first, "j1", "j2"... for those that joined."""
    buf = ctypes.create_string_buffer(256)
    _capi.check(_capi.lib.kolo_comm_worker_id(_state.require(), buf, len(buf)))
    return buf.value.decode()


class State:
    """What run() keeps consistent across failures and rebuilds: save() at commit(),
    restore() after a failure, sync() (from rank 0) after every rebuild."""

    def __init__(self):
        self._reset_callbacks = []
        # kolo's: time.monotonic() when run() last caught a failure or an interrupt (None
        # before any), so that a script can time its recovery.
        self.interrupted_at = None

    def register_reset_callbacks(self, callbacks):
        """Called, in order, after each rebuild and before sync() (to scale the learning
        rate to the new size, say)."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        for callback in self._reset_callbacks:
            callback()

    def commit(self):
        """Saves the state (what a failure rolls back to), then raises HostsUpdatedInterrupt
        where workers wait to join. Collective: every rank commits at the same point."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every rank when workers wait to join (rank 0 asks
        the job's store) or when kolorun asks a rank to leave (its host is no longer
        listed); skip_sync when no one joins. One max-allreduce, so every rank decides alike."""
        joiners, leaving = ctypes.c_int(0), ctypes.c_int(0)
        if _ops._state_rank() == 0:
            _capi.check(_capi.lib.kolo_comm_pending_joiners(_state.require(), ctypes.byref(joiners)))
        _capi.check(_capi.lib.kolo_comm_leaving(_state.require(), ctypes.byref(leaving)))
        seen = _ops.allreduce(torch.tensor([joiners.value, leaving.value], dtype=torch.int64), op=_ops.Max,
                              name="kolo.elastic.hosts")
        if int(seen[0]) > 0 or int(seen[1]) > 0:
            raise HostsUpdatedInterrupt(skip_sync=int(seen[0]) == 0)

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

    def sync(self):
        raise NotImplementedError


class ObjectState(State):
    """Attributes given as keyword arguments (state.epoch, state.batch...), saved as deep
    copies (so that in-place changes after a commit do not change it) and synced by
    broadcasting rank 0's saved values. bcast_object and get_rank as Horovod's (defaults:
    kolo.torch's broadcast_object from rank 0, and rank)."""

    def __init__(self, bcast_object=None, get_rank=None, **kwargs):
        super().__init__()
        self._bcast_object = bcast_object or functools.partial(broadcast_object, root_rank=0,
                                                               name="kolo.elastic.objects")
        self._get_rank = get_rank or (lambda: _ops._state_rank())
        self._names = list(kwargs)
        for name, value in kwargs.items():
            setattr(self, name, value)
        self._saved = {}
        ObjectState.save(self)

    def save(self):
        self._saved = {name: copy.deepcopy(getattr(self, name)) for name in self._names}

    def restore(self):
        for name, value in self._saved.items():
            setattr(self, name, copy.deepcopy(value))

    def sync(self):
        # Rank 0's last commit, not its current values: after a failure they are the same
        # (restored), and a joiner's commit becomes rank 0's. No names: nothing to send
        # (every rank has the same names).
        if self._names:
            self._saved = self._bcast_object(self._saved)
            ObjectState.restore(self)  # the objects only: a subclass's restore would undo its own sync


class TorchState(ObjectState):
    """A model and an optimizer (either may be None) and the keyword arguments' objects.
    save() keeps deep copies of their state dicts; sync() broadcasts rank 0's parameters
    and buffers (broadcast_parameters) and optimizer state (broadcast_optimizer_state).
    ElasticSamplers among the keyword arguments are kept by their state dicts (the
    DataLoader holds the object itself), synced from rank 0 and dealt again among the ranks."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        self.model = model
        self.optimizer = optimizer
        self._saved_model = self._saved_optimizer = None
        self._samplers = {k: v for k, v in kwargs.items() if isinstance(v, ElasticSampler)}
        self._saved_samplers = {}
        for name, sampler in self._samplers.items():
            setattr(self, name, sampler)
        super().__init__(**{k: v for k, v in kwargs.items() if k not in self._samplers})
        self._save_torch()

    def _save_torch(self):
        if self.model is not None:
            self._saved_model = copy.deepcopy(self.model.state_dict())
        if self.optimizer is not None:
            self._saved_optimizer = copy.deepcopy(self.optimizer.state_dict())
        self._saved_samplers = {name: copy.deepcopy(s.state_dict()) for name, s in self._samplers.items()}

    def save(self):
        self._save_torch()
        super().save()

    def restore(self):
        if self.model is not None:
            self.model.load_state_dict(self._saved_model)
        if self.optimizer is not None:
            self.optimizer.load_state_dict(self._saved_optimizer)  # copies it (torch's deepcopy)
        for name, sampler in self._samplers.items():
            sampler.load_state_dict(copy.deepcopy(self._saved_samplers[name]))
        super().restore()

    def sync(self):
        if self.model is not None:
            broadcast_parameters(self.model.state_dict(), root_rank=0)
        if self.optimizer is not None:
            broadcast_optimizer_state(self.optimizer, root_rank=0, model=self.model)
        for name, sampler in sorted(self._samplers.items()):
            # Rank 0's progress through the epoch, dealt again among this world's ranks.
            sampler.load_state_dict(broadcast_object(sampler.state_dict(), root_rank=0,
                                                     name=f"kolo.elastic.sampler.{name}"))
        super().sync()
        # Rank 0's state is now every rank's commit too (a joiner's included), should a
        # failure come before the next commit.
        self._save_torch()

    def on_reset(self):
        if self.optimizer is not None:
            _forget_in_flight(self.optimizer)
        super().on_reset()


def _forget_in_flight(optimizer):
    """A step that failed leaves a DistributedOptimizer holding the handles of allreduces
    of the old world, which the rebuild dropped: without this its next backward pass would
    take them for gradients computed twice, and zero_grad() would refuse to run."""
    if not getattr(optimizer, "_kolo_distributed", False):
        return
    optimizer._handles.clear()
    for name in ("_group_handles", "_group_ready"):  # DistributedOptimizer's, not Adasum's
        getattr(optimizer, name, {}).clear()
    getattr(optimizer, "_densified", set()).clear()
    for p in optimizer._delay:
        optimizer._delay[p] = optimizer._passes
    optimizer._synchronized = False


def _leaving():
    leaving = ctypes.c_int(0)
    _capi.check(_capi.lib.kolo_comm_leaving(_state.require(), ctypes.byref(leaving)))
    return leaving.value == 1


def _leave():
    """This worker's host was removed from the job (kolorun's discovery script no longer
    lists it): it takes no part in the rebuild and exits with status 0, as the workers of a
    removed host do under horovodrun. The others need not wait for it: its process ends."""
    print(f"kolo.torch.elastic: worker {worker_id()} leaves: its host was removed from the job", flush=True)
    _state.shutdown()
    sys.exit(0)


def run(func):
    """Horovod's @hvd.elastic.run: calls func(state, ...) until it returns, rebuilding the
    world after a failure (state restored to its last commit) or a HostsUpdatedInterrupt
    (state kept), then on_reset() and sync() on every rank. sync() also runs before the
    first call, which gives workers that join rank 0's state. Not retried, but raised:
    a KoloUsageError (a program's mistake on this rank), KOLO_ERR_MISMATCH (ranks disagree
    on an operation), and a failed rebuild (this rank left out, or too few left)."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        skip_sync = False
        while True:
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HostsUpdatedInterrupt as e:
                state.interrupted_at = time.monotonic()
                skip_sync, failed, cause = e.skip_sync, False, e
                if _leaving():
                    _leave()
            except KoloUsageError:
                raise
            except KoloError as e:
                if e.code == _MISMATCH:
                    raise  # ranks disagree on an operation: it would fail the same way again
                state.interrupted_at = time.monotonic()
                state.restore()
                skip_sync, failed, cause = False, True, e
            for attempt in range(_REBUILD_ATTEMPTS):
                try:
                    _state.rebuild(failed=failed)
                    break
                except KoloError as e:
                    if _state.comm is None or isinstance(e, KoloUsageError) or attempt + 1 == _REBUILD_ATTEMPTS:
                        raise e from cause  # no world here any more, or no end to the failures
                    # Another worker died while the new world was made or its runtime started: again.
                    failed, cause = True, e
            state.on_reset()

    return wrapper
