"""The tables of kolo.torch's operations in flight, below both _requests (which fills them)
and _state (which empties them when the world goes): the handles' pending operations and
composites, those that failed to complete in time, and the counters of unnamed operations."""
import itertools
import threading

from kolo import _capi

_counters = {}  # (kind, process set id) -> how many unnamed operations of the kind were made
_counter_lock = threading.Lock()

_pending = {}  # handle -> _requests._Pending
_handles = itertools.count(1)
_pending_lock = threading.Lock()
_composites = {}  # handle -> (the handles of its parts, how to make the output of theirs)
_unfinished = []  # operations that failed to complete in time: kolo may still use their buffers


def forget():
    """Once the old world's communicators are destroyed, their runtimes have failed every
    request they held: free them, and start the per-kind counters of unnamed operations
    afresh (a joiner starts from 0)."""
    with _pending_lock:
        pending = list(_pending.values())
        _pending.clear()
        _composites.clear()
        for p in pending:
            if p.request is None:  # completed and freed already
                continue
            if _capi.lib.kolo_test(p.request) == _capi.IN_PROGRESS:
                _unfinished.append(p)  # kolo may still use its buffers: kept alive
            else:
                _capi.lib.kolo_request_free(p.request)
    with _counter_lock:
        _counters.clear()
