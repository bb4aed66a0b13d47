"""Horovod's collectives over kolo's runtime (named asynchronous operations, fused and
ordered alike on every rank by a background thread: engine/runtime). CPU and CUDA
tensors, handed over through their data pointers (contiguous ones without a copy). A
CUDA tensor is read once the work torch's current stream on its device holds at the call
is done (the runtime waits for an event recorded there), as Horovod does; outputs are
ready for any stream once synchronize() returns. A handle is an int; synchronize() waits
for it and returns the output."""
import ctypes

import torch

from kolo import _capi
from kolo.torch._requests import (  # noqa: F401 - also kolo.torch's and _optimizer's names
    Average, Sum, Adasum, Min, Max, Product, _DTYPES, _KOLO_OPS, _check_reducible, _check_tensor,
    _contiguous, _enqueue, _name, _ptr, _register, _register_composite, _resolve_op, _root_in_set,
    _scaled, _set_rank, _set_size, _source, _state_rank, _stream, _widened, as_bytes, kolo_dtype,
    poll, synchronize, waited, wire_for)
from kolo.torch import _state

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
    waited()
    return last.value


def barrier(process_set=None):
    _capi.check(_capi.lib.kolo_barrier(_state.comm_of(process_set)))
    waited()
