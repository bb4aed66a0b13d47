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


def poll(handle):
    """True once the operation of `handle` has completed (its result is then ready)."""
    with _pending_lock:
        p = _pending.get(handle)
    if p is None:
        raise ValueError(f"kolo.torch: poll of unknown handle {handle}")
    return _capi.lib.kolo_test(p.request) != _capi.IN_PROGRESS


_unfinished = []  # operations that failed to complete in time: kolo may still use their buffers


def synchronize(handle):
    """Waits for the operation of `handle` and returns its output."""
    with _pending_lock:
        p = _pending.pop(handle, None)
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
    src = _contiguous(tensor)
    dst = output if output.is_contiguous() else torch.empty_like(output, memory_format=torch.contiguous_format)
    opts = _capi.enqueue_options(prescale_factor, postscale_factor, stream=_stream(src), wire=wire)
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
    _check_tensor(tensor, "allreduce_async")
    op = _resolve_op(op, average, "allreduce_async")
    return _allreduce_into(tensor, torch.empty_like(tensor), _name("allreduce", name, process_set), op,
                           prescale_factor, postscale_factor, _state.comm_of(process_set), wire)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                     process_set=None, wire=None):
    _check_tensor(tensor, "allreduce_async_")
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
    _check_tensor(tensor, "allreduce")
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
        _check_tensor(t, "grouped_allreduce")
    if len({t.dtype for t in tensors}) != 1:
        raise TypeError("kolo.torch: grouped_allreduce takes tensors of one dtype, got "
                        f"{sorted(str(d) for d in {t.dtype for t in tensors})}")
    srcs = [_contiguous(t) for t in tensors]
    dsts = [o if o.is_contiguous() else torch.empty_like(o, memory_format=torch.contiguous_format) for o in outputs]
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


def grouped_allreduce(tensors, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=None):
    if compression is not None:
        pairs = [compression.compress(t) for t in tensors]
        outs = synchronize(grouped_allreduce_async([c for c, _ in pairs], average, name, op, prescale_factor,
                                                   postscale_factor, process_set))
        return [compression.decompress(o, ctx) for o, (_, ctx) in zip(outs, pairs)]
    return synchronize(grouped_allreduce_async(tensors, average, name, op, prescale_factor, postscale_factor,
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


def allgather_async(tensor, name=None, process_set=None):
    _check_tensor(tensor, "allgather_async")
    src = _contiguous(tensor if tensor.dim() > 0 else tensor.reshape(1))
    rows = src.shape[0]
    row_shape = tuple(src.shape[1:])
    row_count = 1
    for d in row_shape:
        row_count *= d
    out = _Output(src, row_shape)
    opts = _capi.enqueue_options(alloc=out.fn, stream=_stream(src))
    ptr, keep = _source(src)
    request = _enqueue(_capi.lib.kolo_enqueue_allgather, _name("allgather", name, process_set), ptr, rows,
                       row_count, kolo_dtype(src), ctypes.byref(opts), _state.comm_of(process_set))
    return _register(request, (src, keep, out, opts), lambda: out.tensor)


class _AllgatherFunction(torch.autograd.Function):
    """The gradient of an allgather: this rank's rows of the summed gradient."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows = tensor.shape[0] if tensor.dim() > 0 else 1
        ctx.ps = process_set
        output = synchronize(allgather_async(tensor, name=name, process_set=process_set))
        return output

    @staticmethod
    def backward(ctx, grad):
        summed = allreduce(grad.contiguous(), op=Sum, process_set=ctx.ps)
        rows = synchronize(allgather_async(torch.tensor([ctx.rows], dtype=torch.int64), process_set=ctx.ps)).cpu()
        start = int(rows[:_state_rank(ctx.ps)].sum())
        return summed[start:start + ctx.rows], None, None


def _state_rank(process_set=None):
    return _capi.lib.kolo_comm_rank(_state.comm_of(process_set))


def allgather(tensor, name=None, process_set=None):
    _check_tensor(tensor, "allgather")
    if tensor.requires_grad:
        return _AllgatherFunction.apply(tensor, name, process_set)
    return synchronize(allgather_async(tensor, name=name, process_set=process_set))


def alltoall_async(tensor, splits=None, name=None, process_set=None):
    _check_tensor(tensor, "alltoall_async")
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
    row_shape = tuple(src.shape[1:])
    row_count = 1
    for d in row_shape:
        row_count *= d
    counts = (ctypes.c_size_t * n)(*[s * row_count for s in splits])
    out = _Output(src, row_shape)
    opts = _capi.enqueue_options(alloc=out.fn, stream=_stream(src))
    ptr, keep = _source(src)
    request = _enqueue(_capi.lib.kolo_enqueue_alltoall, _name("alltoall", name, process_set), ptr, counts,
                       kolo_dtype(src), ctypes.byref(opts), comm)

    def finish():
        received = torch.tensor([c // row_count if row_count else 0 for c in out.rank_counts], dtype=torch.int32)
        return out.tensor, received
    return _register(request, (src, keep, counts, out, opts), finish)


def alltoall(tensor, splits=None, name=None, process_set=None):
    """The rows for each rank (splits[q] of them to rank q; equal shares when None). Returns
    the rows received, in rank order, and with splits given, also how many came from each
    rank (as Horovod)."""
    output, received = synchronize(alltoall_async(tensor, splits, name, process_set))
    return output if splits is None else (output, received)


# ---- broadcast, reducescatter ------------------------------------------------------------

def _broadcast_into(tensor, output, root_rank, name, comm):
    n = _capi.lib.kolo_comm_size(comm)
    if not 0 <= root_rank < n:
        raise ValueError(f"kolo.torch: broadcast root_rank {root_rank} is not a rank of {n}")
    if output is not tensor:
        output.copy_(tensor)
    buf = _contiguous(output)
    carried = as_bytes(buf)
    opts = _capi.enqueue_options(stream=_stream(buf))
    ptr, keep = _source(carried)
    request = _enqueue(_capi.lib.kolo_enqueue_broadcast, name, ptr, carried.numel(), kolo_dtype(carried),
                       root_rank, ctypes.byref(opts), comm)

    def finish():
        if buf is not output:
            output.copy_(buf)
        return output
    return _register(request, (buf, keep, opts), finish)


def broadcast_async(tensor, root_rank, name=None, process_set=None):
    _check_tensor(tensor, "broadcast_async", any_dtype=True)
    return _broadcast_into(tensor, tensor.detach().clone(), root_rank, _name("broadcast", name, process_set),
                           _state.comm_of(process_set))


def broadcast_async_(tensor, root_rank, name=None, process_set=None):
    _check_tensor(tensor, "broadcast_async_", any_dtype=True)
    return _broadcast_into(tensor, tensor, root_rank, _name("broadcast", name, process_set),
                           _state.comm_of(process_set))


def broadcast(tensor, root_rank, name=None, process_set=None):
    return synchronize(broadcast_async(tensor, root_rank, name, process_set))


def broadcast_(tensor, root_rank, name=None, process_set=None):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def reducescatter_async(tensor, name=None, op=None, process_set=None, prescale_factor=1.0, postscale_factor=1.0):
    """This rank's share of the reduction along the first dimension, whose rows must divide
    evenly among the ranks (Horovod's uneven shares are not supported yet: refused)."""
    _check_tensor(tensor, "reducescatter_async")
    op = _resolve_op(op, None, "reducescatter_async")
    comm = _state.comm_of(process_set)
    n = _capi.lib.kolo_comm_size(comm)
    src = _contiguous(tensor if tensor.dim() > 0 else tensor.reshape(1))
    rows = src.shape[0]
    if rows % n:
        raise ValueError(f"kolo.torch: reducescatter of {rows} rows on {n} ranks: kolo needs the rows to divide "
                         "evenly (uneven shares are not supported yet)")
    share = rows // n
    row_count = src[0].numel() if rows else 0
    out = torch.empty((share,) + tuple(src.shape[1:]), dtype=src.dtype, device=src.device)
    opts = _capi.enqueue_options(prescale_factor, postscale_factor, stream=_stream(src))
    kop = _KOLO_OPS[op]
    (send, keep_send), (recv, keep_recv) = _source(src), _source(out)
    request = _enqueue(_capi.lib.kolo_enqueue_reduce_scatter, _name("reducescatter", name, process_set), send,
                       recv, share * row_count, kolo_dtype(src), kop, ctypes.byref(opts), comm)
    return _register(request, (src, out, keep_send, keep_recv, opts), lambda: out)


def reducescatter(tensor, name=None, compression=None, op=None, process_set=None, prescale_factor=1.0,
                  postscale_factor=1.0):
    if compression is not None:
        compressed, ctx = compression.compress(tensor)
        out = synchronize(reducescatter_async(compressed, name, op, process_set, prescale_factor, postscale_factor))
        return compression.decompress(out, ctx)
    return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor, postscale_factor))


# ---- join, barrier ---------------------------------------------------------------------------

def join(device=-1):
    """This rank has no more data: it contributes zeros to the others' allreduces until
    every rank has joined. Returns the rank that joined last."""
    last = ctypes.c_int(-1)
    _capi.check(_capi.lib.kolo_join(_state.require(), ctypes.byref(last)))
    return last.value


def barrier(process_set=None):
    _capi.check(_capi.lib.kolo_barrier(_state.comm_of(process_set)))
