"""What every collective of kolo.torch shares: Horovod's op names and kolo's dtypes, the
checks of a tensor before it is handed over, process sets' ranks, operation names, and the
handles (enqueue, poll, synchronize) of operations running on kolo's runtime. _ops.py
builds the collectives on these."""
import ctypes

import torch

from kolo import _capi
from kolo.torch import _state
# The tables (shared with _state, which empties them when the world goes).
from kolo.torch._inflight import _composites, _counter_lock, _counters, _handles, _pending, _pending_lock, _unfinished

# Horovod's reduction ops.
Average, Sum, Adasum, Min, Max, Product = "Average", "Sum", "Adasum", "Min", "Max", "Product"
_KOLO_OPS = {Average: _capi.OP_AVG, Sum: _capi.OP_SUM, Min: _capi.OP_MIN, Max: _capi.OP_MAX,
             Product: _capi.OP_PROD, Adasum: _capi.OP_ADASUM}

_DTYPES = {torch.int8: _capi.INT8, torch.uint8: _capi.UINT8, torch.int32: _capi.INT32, torch.int64: _capi.INT64,
           torch.float16: _capi.FLOAT16, torch.bfloat16: _capi.BFLOAT16, torch.float32: _capi.FLOAT32,
           torch.float64: _capi.FLOAT64}


def kolo_dtype(tensor):
    try:
        return _DTYPES[tensor.dtype]
    except KeyError:
        raise TypeError(f"kolo.torch: tensors of {tensor.dtype} cannot be carried (kolo carries "
                        f"{', '.join(str(d) for d in _DTYPES)})") from None


def _check_tensor(tensor, what, any_dtype=False):
    """any_dtype: the operation only moves bytes (broadcast), so any dtype will do."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"kolo.torch: {what} takes a torch.Tensor, not {type(tensor).__name__}")
    if tensor.device.type not in ("cpu", "cuda"):
        raise ValueError(f"kolo.torch: {what}: a {tensor.device.type} tensor; kolo.torch carries CPU and CUDA tensors")
    if not any_dtype:
        kolo_dtype(tensor)


def _stream(tensor):
    """The stream producing a CUDA tensor (torch's current one on its device), None for CPU."""
    return torch.cuda.current_stream(tensor.device).cuda_stream if tensor.is_cuda else None


def wire_for(compression, tensor, op, comm):
    """The kolo wire type for Compression.fp16/bf16 where kolo compresses on the wire
    (FLOAT32 sums and averages on a communicator within one host): each contribution is
    encoded once and summed in FLOAT32, unlike a cast followed by a 16-bit sum. None
    elsewhere: the compressor then casts, as Horovod does."""
    wire = getattr(compression, "kolo_wire", None)
    if wire is None or tensor.dtype != torch.float32 or op not in (Sum, Average):
        return None
    if _capi.lib.kolo_comm_local_size(comm) != _capi.lib.kolo_comm_size(comm):
        return None
    return wire


def as_bytes(tensor):
    """A contiguous tensor of a dtype kolo does not carry (bool, int16, complex, ...) as
    its bytes, sharing its memory: for operations that only move data."""
    return tensor if tensor.dtype in _DTYPES else tensor.reshape(-1).view(torch.uint8)


# Reductions of dtypes kolo does not carry, computed in a wider one it does (the result is
# narrowed back, wrapping as an int16 sum would).
_WIDER = {torch.int16: torch.int32}


def _widened(tensor):
    wide = _WIDER.get(tensor.dtype)
    return tensor if wide is None else tensor.to(wide)


def _check_reducible(tensor, what):
    _check_tensor(tensor, what, any_dtype=True)
    if tensor.dtype not in _DTYPES and tensor.dtype not in _WIDER:
        kolo_dtype(tensor)  # raises the TypeError


def _scaled(tensor, factor):
    """tensor * factor as Horovod scales (ScaleBuffer): integers in float64 then truncated
    back, 16-bit floats in float32, float32 and float64 in their own precision."""
    if factor == 1.0:
        return tensor
    if tensor.dtype.is_floating_point:
        math = torch.float32 if tensor.dtype in (torch.float16, torch.bfloat16) else tensor.dtype
        f = torch.tensor(factor, dtype=torch.float64).to(math)
    else:
        math, f = torch.float64, torch.tensor(factor, dtype=torch.float64)
    return (tensor.to(math) * f.to(tensor.device)).to(tensor.dtype)


def _set_rank(process_set=None):
    """This rank within the process set (the world for None)."""
    return _capi.lib.kolo_comm_rank(_state.comm_of(process_set))


def _set_size(process_set=None):
    return _capi.lib.kolo_comm_size(_state.comm_of(process_set))


def _state_rank(process_set=None):
    """This rank in the WORLD, whatever the process set (it must be a member): Horovod
    numbers root_rank by global rank in process sets too (broadcast_object compares it)."""
    _state.comm_of(process_set)  # a member of the set
    return _capi.lib.kolo_comm_rank(_state.require())


def _root_in_set(root_rank, process_set):
    """The rank within the process set's communicator of the global rank root_rank."""
    root_rank = int(root_rank)
    if process_set is None or process_set is _state.global_process_set:
        n = _capi.lib.kolo_comm_size(_state.require())
        if not 0 <= root_rank < n:
            raise ValueError(f"kolo.torch: broadcast root_rank {root_rank} is not a rank of {n}")
        return root_rank
    _state.comm_of(process_set)
    if root_rank not in process_set.ranks:
        raise ValueError(f"kolo.torch: broadcast root_rank {root_rank} is not in {process_set!r} (root_rank is a "
                         "global rank)")
    return process_set.ranks.index(root_rank)


def _resolve_op(op, average, what):
    if average is not None:
        if op is not None:
            raise ValueError(f"kolo.torch: {what}: give op or average, not both")
        op = Average if average else Sum
    op = Average if op is None else op
    # Adasum (kolo's KOLO_ADASUM) on any number of ranks and any process set, where Horovod
    # takes powers of two and the global set; float tensors, on CPU or CUDA (staged through
    # host memory).
    if op == Adasum and not what.startswith(("allreduce", "grouped_allreduce")):
        # A RuntimeError, as Horovod's (its C++ core refuses it).
        raise NotImplementedError(f"kolo.torch: {what}: op=Adasum is for allreduce only")
    if op not in _KOLO_OPS:
        raise ValueError(f"kolo.torch: {what}: op {op!r} is not Average, Sum, Min, Max or Product")
    return op


def _name(kind, name, process_set=None):
    """Horovod names unnamed operations by a counter per kind (and process set, whose
    operations only its members make), alike on every rank that makes the same calls in
    the same order."""
    if name is not None:
        return str(name).encode()
    key = (kind, _state.set_id(process_set))
    with _counter_lock:
        n = _counters.get(key, 0)
        _counters[key] = n + 1
    return f"{kind}.noname.{n}".encode()


class _Pending:
    """What a handle keeps alive until it completes: the request, the tensors whose memory
    the runtime uses, the allocator callback, and how to produce the output. Once the
    operation has completed and its request is freed (_free_completed), `request` is None
    and `result`/`error` hold its outcome for synchronize()."""

    def __init__(self, request, keep, finish):
        self.request = request
        self.keep = keep
        self.finish = finish
        self.result = None
        self.error = None
        self.waits = _waits[0]


# How many times this rank has waited on the job (synchronize, barrier, join): see
# _free_completed.
_waits = [0]


def waited():
    _waits[0] += 1


def _free_completed():
    """Frees the requests of operations that have completed, keeping their outcome: kolo's
    runtime keeps a name taken until its request is freed, Horovod frees it when the
    operation completes, and scripts (Horovod's suite among them) drop handles they never
    synchronize. Called when an enqueue is refused, not before each (a DistributedOptimizer
    step has hundreds in flight). Only operations enqueued before this rank last waited on
    the job (waited()), or seen complete by poll(): the same name enqueued twice in a row is
    Horovod's duplicate error,
    which Horovod raises because its background thread cannot have completed the first in
    between, where kolo's runtime may have (its peers were already waiting for it).
    (Caller holds no lock.)"""
    with _pending_lock:
        for p in _pending.values():
            if p.request is None or p.waits == _waits[0] or _capi.lib.kolo_test(p.request) == _capi.IN_PROGRESS:
                continue
            p.result = _capi.lib.kolo_wait(p.request)  # done: returns at once with its outcome
            p.error = _capi.last_error()
            _capi.lib.kolo_request_free(p.request)
            p.request = None


def _register(request, keep, finish):
    with _pending_lock:
        h = next(_handles)
        _pending[h] = _Pending(request, keep, finish)
    return h


def _enqueue(fn, *args):
    request = ctypes.c_void_p()
    result = fn(*args, ctypes.byref(request))
    if result == _capi.ERR_INVALID_USAGE:  # perhaps a name a completed, unsynchronized operation holds
        _free_completed()
        result = fn(*args, ctypes.byref(request))
    _capi.check(result)
    return request


def _register_composite(parts, finish):
    """A handle for several operations (grouped allgather, reducescatter): synchronize()
    waits for every part and returns finish(their outputs)."""
    with _pending_lock:
        h = next(_handles)
        _composites[h] = (parts, finish)
    return h


def poll(handle):
    """True once the operation of `handle` has completed (its result is then ready)."""
    with _pending_lock:
        p = _pending.get(handle)
        c = _composites.get(handle)
    if c is not None:
        return all(poll(h) for h in c[0])
    if p is None:
        raise ValueError(f"kolo.torch: poll of unknown handle {handle}")
    done = p.request is None or _capi.lib.kolo_test(p.request) != _capi.IN_PROGRESS
    if done:
        p.waits = -1  # its completion seen here: its name may be freed (_free_completed)
    return done


def synchronize(handle):
    """Waits for the operation of `handle` and returns its output."""
    waited()
    with _pending_lock:
        p = _pending.pop(handle, None)
        c = _composites.pop(handle, None)
    if c is not None:
        parts, finish = c
        outs, error = [], None
        for h in parts:  # every part, even after one failed: none is left pending
            try:
                outs.append(synchronize(h))
            except Exception as e:  # noqa: BLE001 (re-raised below)
                error = error or e
        if error is not None:
            raise error
        return finish(outs)
    if p is None:
        raise ValueError(f"kolo.torch: synchronize of unknown handle {handle}")
    if p.request is None:  # completed and freed before (_free_completed)
        if p.result != _capi.SUCCESS:
            raise _capi.KoloError(p.result, p.error)
        return p.finish()
    result = _capi.lib.kolo_wait(p.request)
    error = _capi.last_error()
    if result != _capi.SUCCESS and _capi.lib.kolo_test(p.request) == _capi.IN_PROGRESS:
        # Still running (KOLO_TIMEOUT passed; a late peer may yet arrive): its tensors, the
        # allocator callback and the request stay alive for the rest of the process.
        with _pending_lock:
            _unfinished.append(p)
        raise _capi.KoloError(result, error)
    _capi.lib.kolo_request_free(p.request)
    if result != _capi.SUCCESS:
        raise _capi.KoloError(result, error)
    return p.finish()


def _contiguous(tensor):
    return tensor if tensor.is_contiguous() else tensor.contiguous()


def _ptr(tensor):
    return ctypes.c_void_p(tensor.data_ptr())


def _source(tensor):
    """A pointer for the runtime and what keeps it alive: an empty CUDA tensor has no
    memory, but the runtime must still see a pointer of its device (kolo.h)."""
    if tensor.is_cuda and tensor.numel() == 0:
        stand_in = torch.empty(1, dtype=tensor.dtype, device=tensor.device)
        return _ptr(stand_in), stand_in
    return _ptr(tensor), tensor
