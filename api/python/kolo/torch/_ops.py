"""Horovod's collectives over kolo's runtime (named asynchronous operations, fused and
ordered alike on every rank by a background thread: engine/runtime). CPU and CUDA
tensors, handed over through their data pointers (contiguous ones without a copy). A
CUDA tensor is read once the work torch's current stream on its device holds at the call
is done (the runtime waits for an event recorded there), as Horovod does; outputs are
ready for any stream once synchronize() returns. A handle is an int; synchronize() waits
for it and returns the output."""
import ctypes
import itertools
import threading

import torch

from kolo import _capi
from kolo.torch import _state

# Horovod's reduction ops.
Average, Sum, Adasum, Min, Max, Product = "Average", "Sum", "Adasum", "Min", "Max", "Product"
_KOLO_OPS = {Average: _capi.OP_AVG, Sum: _capi.OP_SUM, Min: _capi.OP_MIN, Max: _capi.OP_MAX,
             Product: _capi.OP_PROD}

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
    if op == Adasum:
        raise NotImplementedError("kolo.torch: op=Adasum is not supported by kolo; use Average or Sum")
    if op not in _KOLO_OPS:
        raise ValueError(f"kolo.torch: {what}: op {op!r} is not Average, Sum, Min, Max or Product")
    return op


_counters = {}
_counter_lock = threading.Lock()


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
    the runtime uses, the allocator callback, and how to produce the output."""

    def __init__(self, request, keep, finish):
        self.request = request
        self.keep = keep
        self.finish = finish


_pending = {}
_handles = itertools.count(1)
_pending_lock = threading.Lock()


def _register(request, keep, finish):
    with _pending_lock:
        h = next(_handles)
        _pending[h] = _Pending(request, keep, finish)
    return h


def _enqueue(fn, *args):
    request = ctypes.c_void_p()
    _capi.check(fn(*args, ctypes.byref(request)))
    return request


_composites = {}  # handle -> (the handles of its parts, how to make the output of theirs)


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
    return _capi.lib.kolo_test(p.request) != _capi.IN_PROGRESS


_unfinished = []  # operations that failed to complete in time: kolo may still use their buffers


def synchronize(handle):
    """Waits for the operation of `handle` and returns its output."""
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


# ---- allreduce -----------------------------------------------------------------------

def _allreduce_into(tensor, output, name, op, prescale_factor, postscale_factor, comm, wire=None):
    src = _contiguous(_widened(tensor))
    dst = (output if output.is_contiguous() and output.dtype == src.dtype
           else torch.empty(output.shape, dtype=src.dtype, device=output.device))
    opts = _capi.enqueue_options(prescale_factor, postscale_factor, stream=_stream(src), wire=wire,
                                 shape=src.shape)  # every rank's shape alike (kolo checks)
    request = _enqueue(_capi.lib.kolo_enqueue_allreduce, name, _ptr(src), _ptr(dst), src.numel(), kolo_dtype(src),
                       _KOLO_OPS[op], ctypes.byref(opts), comm)

    def finish():
        if dst is not output:
            output.copy_(dst)
        return output
    return _register(request, (src, dst, opts), finish)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                    process_set=None, wire=None):
    """wire (kolo's): a wire type from wire_for(), compressing on the wire."""
    _check_reducible(tensor, "allreduce_async")
    op = _resolve_op(op, average, "allreduce_async")
    return _allreduce_into(tensor, torch.empty_like(tensor), _name("allreduce", name, process_set), op,
                           prescale_factor, postscale_factor, _state.comm_of(process_set), wire)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                     process_set=None, wire=None):
    _check_reducible(tensor, "allreduce_async_")
    op = _resolve_op(op, average, "allreduce_async_")
    return _allreduce_into(tensor, tensor, _name("allreduce", name, process_set), op, prescale_factor,
                           postscale_factor, _state.comm_of(process_set), wire)


class _AllreduceFunction(torch.autograd.Function):
    """Allreduce as autograd sees it: the gradient is the same allreduce of the gradient."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        ctx.op, ctx.pre, ctx.post, ctx.ps = op, prescale_factor, postscale_factor, process_set
        return synchronize(allreduce_async(tensor, name=name, op=op, prescale_factor=prescale_factor,
                                           postscale_factor=postscale_factor, process_set=process_set))

    @staticmethod
    def backward(ctx, grad):
        out = allreduce(grad, op=ctx.op, prescale_factor=ctx.pre, postscale_factor=ctx.post, process_set=ctx.ps)
        return out, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
              process_set=None):
    _check_reducible(tensor, "allreduce")
    op = _resolve_op(op, average, "allreduce")
    if compression is not None:
        wire = wire_for(compression, tensor, op, _state.comm_of(process_set))
        if wire is not None and not tensor.requires_grad:
            return synchronize(allreduce_async(tensor, name=name, op=op, prescale_factor=prescale_factor,
                                               postscale_factor=postscale_factor, process_set=process_set, wire=wire))
        compressed, ctx = compression.compress(tensor)
        out = allreduce(compressed, name=name, op=op, prescale_factor=prescale_factor,
                        postscale_factor=postscale_factor, process_set=process_set)
        return compression.decompress(out, ctx)
    if tensor.requires_grad:
        return _AllreduceFunction.apply(tensor, name, op, prescale_factor, postscale_factor, process_set)
    return synchronize(allreduce_async(tensor, name=name, op=op, prescale_factor=prescale_factor,
                                       postscale_factor=postscale_factor, process_set=process_set))


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor, process_set))


def _grouped(tensors, outputs, name, op, prescale_factor, postscale_factor, comm):
    if not tensors:
        raise ValueError("kolo.torch: grouped_allreduce of no tensors")
    for t in tensors:
        _check_reducible(t, "grouped_allreduce")
    if len({t.dtype for t in tensors}) != 1:
        raise TypeError("kolo.torch: grouped_allreduce takes tensors of one dtype, got "
                        f"{sorted(str(d) for d in {t.dtype for t in tensors})}")
    srcs = [_contiguous(_widened(t)) for t in tensors]
    dsts = [o if o.is_contiguous() and o.dtype == s.dtype else torch.empty(o.shape, dtype=s.dtype, device=o.device)
            for o, s in zip(outputs, srcs)]
    n = len(srcs)
    sends = (ctypes.c_void_p * n)(*[s.data_ptr() for s in srcs])
    recvs = (ctypes.c_void_p * n)(*[d.data_ptr() for d in dsts])
    counts = (ctypes.c_size_t * n)(*[s.numel() for s in srcs])
    opts = _capi.enqueue_options(prescale_factor, postscale_factor, stream=_stream(srcs[0]))
    request = _enqueue(_capi.lib.kolo_enqueue_allreduce_group, name, n, sends, recvs, counts, kolo_dtype(srcs[0]),
                       _KOLO_OPS[op], ctypes.byref(opts), comm)

    def finish():
        for d, o in zip(dsts, outputs):
            if d is not o:
                o.copy_(d)
        return list(outputs)
    return _register(request, (srcs, dsts, sends, recvs, counts, opts), finish)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                            process_set=None):
    op = _resolve_op(op, average, "grouped_allreduce_async")
    return _grouped(tensors, [torch.empty_like(t) for t in tensors], _name("grouped_allreduce", name, process_set),
                    op, prescale_factor, postscale_factor, _state.comm_of(process_set))


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                             process_set=None):
    op = _resolve_op(op, average, "grouped_allreduce_async_")
    return _grouped(tensors, list(tensors), _name("grouped_allreduce", name, process_set), op, prescale_factor,
                    postscale_factor, _state.comm_of(process_set))


class _GroupedAllreduceFunction(torch.autograd.Function):
    """Grouped allreduce as autograd sees it: each tensor's gradient is the same grouped
    allreduce of the gradients (as allreduce's)."""

    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.op, ctx.pre, ctx.post, ctx.ps = op, prescale_factor, postscale_factor, process_set
        return tuple(synchronize(grouped_allreduce_async(list(tensors), name=name, op=op,
                                                         prescale_factor=prescale_factor,
                                                         postscale_factor=postscale_factor,
                                                         process_set=process_set)))

    @staticmethod
    def backward(ctx, *grads):
        grads = [g.contiguous() for g in grads]
        out = grouped_allreduce(grads, op=ctx.op, prescale_factor=ctx.pre, postscale_factor=ctx.post,
                                process_set=ctx.ps)
        return (None, None, None, None, None, *out)


def _wants_grad(tensors):
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def grouped_allreduce(tensors, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=None):
    if compression is not None:
        pairs = [compression.compress(t) for t in tensors]
        outs = grouped_allreduce([c for c, _ in pairs], average, name, None, op, prescale_factor, postscale_factor,
                                 process_set)
        return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, pairs)]
    op = _resolve_op(op, average, "grouped_allreduce")
    if _wants_grad(tensors):
        return list(_GroupedAllreduceFunction.apply(name, op, prescale_factor, postscale_factor, process_set,
                                                    *tensors))
    return synchronize(grouped_allreduce_async(tensors, None, name, op, prescale_factor, postscale_factor,
                                               process_set))


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                       process_set=None):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor, postscale_factor,
                                                process_set))


# ---- allgather, alltoall: outputs sized by the other ranks -----------------------------------

class _Output:
    """The allocator the runtime calls (on its own thread) once the output's size is known:
    a tensor of the rows every rank contributes, in rank order."""

    def __init__(self, like, row_shape):
        self.like = like
        self.row_shape = row_shape
        self.tensor = None
        self.rank_counts = None
        self.fn = _capi.ALLOC_FN(self._alloc)

    def _alloc(self, _data, total, rank_counts, nranks):
        try:
            self.rank_counts = [rank_counts[q] for q in range(nranks)]
            row = 1
            for d in self.row_shape:
                row *= d
            rows = total // row if row else sum(self.rank_counts)
            self.tensor = torch.empty((rows,) + tuple(self.row_shape), dtype=self.like.dtype, device=self.like.device)
            return self.tensor.data_ptr() if self.tensor.numel() else 1  # a non-null pointer for empty outputs
        except Exception:  # the runtime fails the operation on this rank
            return None


def _rows_of(src):
    """A tensor as (rows, elements per row) and the dtype kolo carries it as: dtypes kolo
    does not carry (int16, bool, ...) travel as their bytes (allgather and alltoall only
    move data)."""
    rows = src.shape[0]
    row_shape = tuple(src.shape[1:])
    row_count = 1
    for d in row_shape:
        row_count *= d
    if src.dtype in _DTYPES:
        return src, row_shape, row_count
    carried = src.reshape(rows, row_count).view(torch.uint8)
    return carried, (carried.shape[1],), carried.shape[1]


def _uncarried(out, like, row_shape):
    """The output tensor of carried rows back in like's dtype and row shape."""
    if out.dtype == like.dtype:
        return out
    rows = out.shape[0]
    return out.view(like.dtype).reshape((rows,) + tuple(row_shape))


def allgather_async(tensor, name=None, process_set=None):
    _check_tensor(tensor, "allgather_async", any_dtype=True)
    src = _contiguous(tensor if tensor.dim() > 0 else tensor.reshape(1))
    carried, carried_row_shape, row_count = _rows_of(src)
    out = _Output(carried, carried_row_shape)
    opts = _capi.enqueue_options(alloc=out.fn, stream=_stream(src), shape=src.shape[1:])  # rows alike
    ptr, keep = _source(carried)
    request = _enqueue(_capi.lib.kolo_enqueue_allgather, _name("allgather", name, process_set), ptr, src.shape[0],
                       row_count, kolo_dtype(carried), ctypes.byref(opts), _state.comm_of(process_set))
    return _register(request, (src, carried, keep, out, opts),
                     lambda: _uncarried(out.tensor, src, src.shape[1:]))


def _my_offsets(rows_list, process_set):
    """Per tensor: where this rank's rows start in the gathered tensor, from every rank's
    row counts (one allgather for all the tensors)."""
    counts = synchronize(allgather_async(torch.tensor([rows_list], dtype=torch.int64), process_set=process_set))
    return [int(x) for x in counts[:_set_rank(process_set)].sum(dim=0)]


class _AllgatherFunction(torch.autograd.Function):
    """The gradient of an allgather, as Horovod's: the output's gradient averaged over the
    ranks (they all use the gathered tensor), then this rank's rows."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows = tensor.shape[0] if tensor.dim() > 0 else 1
        ctx.ps = process_set
        return synchronize(allgather_async(tensor, name=name, process_set=process_set))

    @staticmethod
    def backward(ctx, grad):
        averaged = allreduce(grad.contiguous(), op=Average, process_set=ctx.ps)
        start, = _my_offsets([ctx.rows], ctx.ps)
        return averaged[start:start + ctx.rows], None, None


def allgather(tensor, name=None, process_set=None):
    _check_tensor(tensor, "allgather", any_dtype=True)
    if _wants_grad([tensor]):
        return _AllgatherFunction.apply(tensor, name, process_set)
    return synchronize(allgather_async(tensor, name=name, process_set=process_set))


def grouped_allgather_async(tensors, name=None, process_set=None):
    """Each tensor gathered as allgather_async does, under one name (one allgather a tensor:
    kolo fuses them)."""
    if not tensors:
        raise ValueError("kolo.torch: grouped_allgather of no tensors")
    for t in tensors:
        _check_tensor(t, "grouped_allgather", any_dtype=True)
    base = _name("grouped_allgather", name, process_set).decode()
    _state.comm_of(process_set)
    parts = [allgather_async(t, name=f"{base}.{i}", process_set=process_set) for i, t in enumerate(tensors)]
    return _register_composite(parts, list)


class _GroupedAllgatherFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.rows = [t.shape[0] if t.dim() > 0 else 1 for t in tensors]
        ctx.ps = process_set
        return tuple(synchronize(grouped_allgather_async(list(tensors), name=name, process_set=process_set)))

    @staticmethod
    def backward(ctx, *grads):
        averaged = grouped_allreduce([g.contiguous() for g in grads], op=Average, process_set=ctx.ps)
        starts = _my_offsets(ctx.rows, ctx.ps)
        return (None, None, *[a[s:s + r] for a, s, r in zip(averaged, starts, ctx.rows)])


def grouped_allgather(tensors, name=None, process_set=None):
    """Horovod's grouped_allgather: a list of allgathers (each tensor's rows from every rank,
    in rank order), with allgather's gradient per tensor."""
    if _wants_grad(tensors):
        return list(_GroupedAllgatherFunction.apply(name, process_set, *tensors))
    return synchronize(grouped_allgather_async(tensors, name=name, process_set=process_set))


def alltoall_async(tensor, splits=None, name=None, process_set=None):
    _check_tensor(tensor, "alltoall_async", any_dtype=True)
    src = _contiguous(tensor if tensor.dim() > 0 else tensor.reshape(1))
    comm = _state.comm_of(process_set)
    n = _capi.lib.kolo_comm_size(comm)
    rows = src.shape[0]
    if splits is None:
        if rows % n:
            raise ValueError(f"kolo.torch: alltoall of {rows} rows on {n} ranks: give splits, or rows divisible by "
                             "the number of ranks")
        splits = [rows // n] * n
    splits = [int(s) for s in (splits.tolist() if isinstance(splits, torch.Tensor) else splits)]
    if len(splits) != n or any(s < 0 for s in splits) or sum(splits) != rows:
        raise ValueError(f"kolo.torch: alltoall splits {splits}: need {n} non-negative counts summing to {rows} rows")
    carried, carried_row_shape, row_count = _rows_of(src)
    counts = (ctypes.c_size_t * n)(*[s * row_count for s in splits])
    out = _Output(carried, carried_row_shape)
    opts = _capi.enqueue_options(alloc=out.fn, stream=_stream(src), shape=src.shape[1:])  # rows alike
    ptr, keep = _source(carried)
    request = _enqueue(_capi.lib.kolo_enqueue_alltoall, _name("alltoall", name, process_set), ptr, counts,
                       kolo_dtype(carried), ctypes.byref(opts), comm)

    def finish():
        received = torch.tensor([c // row_count if row_count else 0 for c in out.rank_counts], dtype=torch.int32)
        return _uncarried(out.tensor, src, src.shape[1:]), received
    return _register(request, (src, carried, keep, counts, out, opts), finish)


class _AlltoallFunction(torch.autograd.Function):
    """The gradient of an alltoall: the output's gradient sent back where its rows came
    from (an alltoall with the received splits)."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.ps, ctx.received = process_set, received
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad, _received_grad):
        back, _ = synchronize(alltoall_async(grad.contiguous(), ctx.received, process_set=ctx.ps))
        return back, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=None):
    """The rows for each rank (splits[q] of them to rank q; equal shares when None). Returns
    the rows received, in rank order, and with splits given, also how many came from each
    rank (as Horovod)."""
    if isinstance(tensor, torch.Tensor) and _wants_grad([tensor]):
        output, received = _AlltoallFunction.apply(tensor, splits, name, process_set)
    else:
        output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
    return output if splits is None else (output, received)


# ---- broadcast, reducescatter ------------------------------------------------------------

def _broadcast_into(tensor, output, root_rank, name, process_set):
    """root_rank: a global rank (Horovod's numbering, in process sets too)."""
    root = _root_in_set(root_rank, process_set)
    comm = _state.comm_of(process_set)
    if output is not tensor:
        output.copy_(tensor)
    buf = _contiguous(output)
    carried = as_bytes(buf)
    opts = _capi.enqueue_options(stream=_stream(buf), shape=buf.shape)  # every rank's shape alike (kolo checks)
    ptr, keep = _source(carried)
    request = _enqueue(_capi.lib.kolo_enqueue_broadcast, name, ptr, carried.numel(), kolo_dtype(carried),
                       root, ctypes.byref(opts), comm)

    def finish():
        if buf is not output:
            output.copy_(buf)
        return output
    return _register(request, (buf, keep, opts), finish)


def broadcast_async(tensor, root_rank, name=None, process_set=None):
    _check_tensor(tensor, "broadcast_async", any_dtype=True)
    return _broadcast_into(tensor, tensor.detach().clone(), root_rank, _name("broadcast", name, process_set),
                           process_set)


def broadcast_async_(tensor, root_rank, name=None, process_set=None):
    _check_tensor(tensor, "broadcast_async_", any_dtype=True)
    return _broadcast_into(tensor, tensor, root_rank, _name("broadcast", name, process_set), process_set)


class _BroadcastFunction(torch.autograd.Function):
    """The gradient of a broadcast, as Horovod's: the output's gradient averaged over the
    ranks, on the root; zero elsewhere (their input did not reach the output)."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root, ctx.ps = int(root_rank), process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad):
        averaged = allreduce(grad.contiguous(), op=Average, process_set=ctx.ps)
        if _state_rank(ctx.ps) != ctx.root:
            averaged = torch.zeros_like(averaged)
        return averaged, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=None):
    if isinstance(tensor, torch.Tensor) and _wants_grad([tensor]):
        return _BroadcastFunction.apply(tensor, root_rank, name, process_set)
    return synchronize(broadcast_async(tensor, root_rank, name, process_set))


def broadcast_(tensor, root_rank, name=None, process_set=None):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def _reducescatter_shares(rows, n):
    """Horovod's shares of rows among n ranks: the first rows % n ranks get one more."""
    return [rows // n + (1 if q < rows % n else 0) for q in range(n)]


def _check_reducescatter(tensor, what):
    _check_reducible(tensor, what)
    if tensor.dim() == 0:
        raise ValueError(f"kolo.torch: {what} of a scalar: it scatters along the first dimension")


def _reducescatter_enqueue(tensor, name, op, process_set, prescale_factor, postscale_factor):
    """Enqueues one reducescatter (tensor checked, op resolved); returns the handle."""
    comm = _state.comm_of(process_set)
    n = _capi.lib.kolo_comm_size(comm)
    me = _capi.lib.kolo_comm_rank(comm)
    if op == Average and (prescale_factor != 1.0 or postscale_factor != 1.0):
        # Horovod averages by a postscale of 1/size after the sum (scaled as it scales).
        op, postscale_factor = Sum, postscale_factor / n
    # The runtime scales allreduces only: the scale factors are applied here, as Horovod does.
    src = _contiguous(_scaled(_widened(tensor), prescale_factor))
    rows = src.shape[0]
    row_shape = tuple(src.shape[1:])
    shares = _reducescatter_shares(rows, n)
    block = shares[0]  # the largest share: every rank's block is padded to it
    if rows != block * n:
        padded = torch.zeros((block * n,) + row_shape, dtype=src.dtype, device=src.device)
        at = 0
        for q, share in enumerate(shares):
            padded[q * block:q * block + share] = src[at:at + share]
            at += share
        src = padded
    row_count = 1
    for d in row_shape:
        row_count *= d
    out = torch.empty((block,) + row_shape, dtype=src.dtype, device=src.device)
    opts = _capi.enqueue_options(stream=_stream(src), shape=tensor.shape)  # the shape before padding, alike
    (send, keep_send), (recv, keep_recv) = _source(src), _source(out)
    request = _enqueue(_capi.lib.kolo_enqueue_reduce_scatter, name, send, recv, block * row_count, kolo_dtype(src),
                       _KOLO_OPS[op], ctypes.byref(opts), comm)

    def finish():
        result = _scaled(out[:shares[me]], postscale_factor)
        return result if result.dtype == tensor.dtype else result.to(tensor.dtype)
    return _register(request, (src, out, keep_send, keep_recv, opts), finish)


def reducescatter_async(tensor, name=None, op=None, process_set=None, prescale_factor=1.0, postscale_factor=1.0):
    """This rank's share of the reduction along the first dimension: Horovod's shares (with
    rows % size left over, the first ranks get one row more). The scale factors apply as
    Horovod's (Average is the sum scaled by 1/size)."""
    _check_reducescatter(tensor, "reducescatter_async")
    op = _resolve_op(op, None, "reducescatter_async")
    return _reducescatter_enqueue(tensor, _name("reducescatter", name, process_set), op, process_set,
                                  prescale_factor, postscale_factor)


def _reducescatter_grad(grad, op, process_set, prescale_factor, postscale_factor):
    """Horovod's reducescatter gradient before its allgather: scaled by size for Sum (not
    for Average) and by both scale factors."""
    if op == Sum:
        grad = grad * _set_size(process_set)
    if prescale_factor != 1.0:
        grad = grad * prescale_factor
    if postscale_factor != 1.0:
        grad = grad * postscale_factor
    return grad.contiguous()


class _ReducescatterFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.op, ctx.ps, ctx.pre, ctx.post = op, process_set, prescale_factor, postscale_factor
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, grad):
        grad = _reducescatter_grad(grad, ctx.op, ctx.ps, ctx.pre, ctx.post)
        return synchronize(allgather_async(grad, process_set=ctx.ps)), None, None, None, None, None


def reducescatter(tensor, name=None, compression=None, op=None, process_set=None, prescale_factor=1.0,
                  postscale_factor=1.0):
    if compression is not None:
        compressed, ctx = compression.compress(tensor)
        out = reducescatter(compressed, name, None, op, process_set, prescale_factor, postscale_factor)
        return compression.decompress(out, ctx)
    op = _resolve_op(op, None, "reducescatter")
    if isinstance(tensor, torch.Tensor) and _wants_grad([tensor]):
        return _ReducescatterFunction.apply(tensor, name, op, process_set, prescale_factor, postscale_factor)
    return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor, postscale_factor))


def grouped_reducescatter_async(tensors, name=None, op=None, process_set=None, prescale_factor=1.0,
                                postscale_factor=1.0):
    """Each tensor reduced and scattered as reducescatter_async does, under one name."""
    if not tensors:
        raise ValueError("kolo.torch: grouped_reducescatter of no tensors")
    for t in tensors:  # all checked before any is enqueued
        _check_reducescatter(t, "grouped_reducescatter")
    op = _resolve_op(op, None, "grouped_reducescatter")
    base = _name("grouped_reducescatter", name, process_set).decode()
    parts = [_reducescatter_enqueue(t, f"{base}.{i}".encode(), op, process_set, prescale_factor, postscale_factor)
             for i, t in enumerate(tensors)]
    return _register_composite(parts, list)


class _GroupedReducescatterFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.op, ctx.ps, ctx.pre, ctx.post = op, process_set, prescale_factor, postscale_factor
        return tuple(synchronize(grouped_reducescatter_async(list(tensors), name, op, process_set, prescale_factor,
                                                             postscale_factor)))

    @staticmethod
    def backward(ctx, *grads):
        grads = [_reducescatter_grad(g, ctx.op, ctx.ps, ctx.pre, ctx.post) for g in grads]
        return (None, None, None, None, None, *synchronize(grouped_allgather_async(grads, process_set=ctx.ps)))


def grouped_reducescatter(tensors, name=None, compression=None, op=None, process_set=None, prescale_factor=1.0,
                          postscale_factor=1.0):
    """Horovod's grouped_reducescatter: a list of reducescatters, with reducescatter's
    gradient per tensor."""
    if compression is not None:
        pairs = [compression.compress(t) for t in tensors]
        outs = grouped_reducescatter([c for c, _ in pairs], name, None, op, process_set, prescale_factor,
                                     postscale_factor)
        return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, pairs)]
    op = _resolve_op(op, None, "grouped_reducescatter")
    if _wants_grad(tensors):
        return list(_GroupedReducescatterFunction.apply(name, op, process_set, prescale_factor, postscale_factor,
                                                        *tensors))
    return synchronize(grouped_reducescatter_async(tensors, name, op, process_set, prescale_factor,
                                                   postscale_factor))


# ---- sparse allreduce ------------------------------------------------------------------------

def sparse_allreduce_async(tensor, name, op, process_set=None):
    """Horovod's allreduce of a sparse COO tensor: every rank's indices and values gathered
    (the sum of duplicates is left to the uncoalesced result), the values divided by the
    set's size for Average. Returns a function that waits and returns the sparse result."""
    if not isinstance(tensor, torch.Tensor) or not tensor.is_sparse:
        raise TypeError("kolo.torch: sparse_allreduce_async takes a sparse COO torch.Tensor")
    op = _resolve_op(op, None, "sparse_allreduce_async")
    if op not in (Average, Sum):
        raise ValueError(f"kolo.torch: sparse_allreduce_async: op {op!r} is not Average or Sum")
    base = _name("sparse_allreduce", name, process_set).decode()
    n = _set_size(process_set)
    values_h = allgather_async(tensor._values().contiguous(), name=f"{base}.values", process_set=process_set)
    indices_h = allgather_async(tensor._indices().t().contiguous(), name=f"{base}.indices", process_set=process_set)

    def handle():
        values = synchronize(values_h)
        indices = synchronize(indices_h)
        if op == Average:
            values = values / n
        return torch.sparse_coo_tensor(indices.t(), values, tensor.size())
    return handle


# ---- join, barrier ---------------------------------------------------------------------------

def join(device=-1):
    """This rank has no more data: it contributes zeros to the others' allreduces until
    every rank has joined. Returns the rank that joined last."""
    last = ctypes.c_int(-1)
    _capi.check(_capi.lib.kolo_join(_state.require(), ctypes.byref(last)))
    return last.value


def barrier(process_set=None):
    _capi.check(_capi.lib.kolo_barrier(_state.comm_of(process_set)))
