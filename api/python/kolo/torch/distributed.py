"""kolo as a torch.distributed backend: `import kolo.torch.distributed` registers "kolo",
then `torch.distributed.init_process_group("kolo", ...)` (any init_method: env:// under
torchrun, file://, tcp://) and DDP run their collectives on kolo.

The process group is a Python subclass of torch's ProcessGroup over kolo's direct C API:
rank 0 makes a kolo unique id and hands it to the others through torch's store (it holds
the job's secret: the store must be one the job trusts, as for NCCL's unique id). CPU and
CUDA tensors: CUDA collectives are enqueued on torch's current stream of the tensor's
device (kolo's device path), so later work on that stream sees their results. Allreduces of one contiguous tensor (DDP's buckets) go through kolo's runtime and
return at once, their futures completing on the runtime's thread; the other collectives
run to completion when called (kolo's host calls block), returning finished work."""
import atexit
import ctypes
import datetime
import weakref

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup, _create_work_from_future

from kolo import _capi
from kolo.torch._ops import _stream, as_bytes, kolo_dtype

_OPS = {dist.ReduceOp.SUM: _capi.OP_SUM, dist.ReduceOp.PRODUCT: _capi.OP_PROD, dist.ReduceOp.MIN: _capi.OP_MIN,
        dist.ReduceOp.MAX: _capi.OP_MAX}
if hasattr(dist.ReduceOp, "AVG"):
    _OPS[dist.ReduceOp.AVG] = _capi.OP_AVG


def _op(reduce_op):
    for k, v in _OPS.items():
        if reduce_op == k:
            return v
    raise ValueError(f"kolo backend: reduce op {reduce_op} is not supported (SUM, PRODUCT, MIN, MAX, AVG)")


def _carried(tensor, what, any_dtype=False):
    """Checks a tensor kolo can carry: CPU or CUDA memory, a dtype kolo knows."""
    if tensor.device.type not in ("cpu", "cuda"):
        raise ValueError(f"kolo backend: {what}: a {tensor.device.type} tensor; the kolo backend carries CPU and CUDA "
                         "tensors")
    if not any_dtype:
        kolo_dtype(tensor)
    return tensor


def _Done(result):
    """A finished collective as torch's C++ side sees it (DDP waits on it there, so a
    Python subclass of Work would not do): a work made from a future already holding the
    outputs."""
    future = torch.futures.Future()
    future.set_result(result)
    return _create_work_from_future(future)


def _ptr(t):
    return ctypes.c_void_p(t.data_ptr())


class KoloProcessGroup(ProcessGroup):
    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        uid = _capi.UniqueId()
        key = "kolo/unique_id"
        if rank == 0:
            _capi.check(_capi.lib.kolo_get_unique_id(ctypes.byref(uid)))
            store.set(key, ctypes.string_at(ctypes.byref(uid), ctypes.sizeof(uid)))  # all 128 bytes, NULs too
        raw = store.get(key)
        if len(raw) != ctypes.sizeof(uid):
            raise _capi.KoloError(_capi.ERR_INVALID_ARGUMENT,
                                  f"kolo backend: rank {rank}: the store's {key} holds {len(raw)} bytes, not a "
                                  f"{ctypes.sizeof(uid)}-byte kolo unique id")
        ctypes.memmove(ctypes.byref(uid), raw, ctypes.sizeof(uid))
        comm = ctypes.c_void_p()
        _capi.check(_capi.lib.kolo_comm_init_rank(ctypes.byref(comm), size, ctypes.byref(uid), rank))
        self._comm = comm
        self._sequence = 0
        self._in_flight = []  # (request, tensor, callback, options) of runtime allreduces
        _live.add(self)

    def shutdown(self):
        """Waits for the runtime's allreduces, then destroys the communicator (and its
        runtime thread). Also at interpreter exit: left to the garbage collector, the
        communicator could outlive the Python objects its runtime's callbacks use."""
        comm, self._comm = getattr(self, "_comm", None), None
        if comm:
            for entry in getattr(self, "_in_flight", []):
                _capi.lib.kolo_wait(entry[0])
                _capi.lib.kolo_request_free(entry[0])
            self._in_flight = []
            _capi.lib.kolo_comm_destroy(comm)

    def __del__(self):
        self.shutdown()

    def getBackendName(self):
        return "kolo"

    def _each(self, tensors, what, fn, any_dtype=False):
        """fn on each tensor, contiguous; any_dtype: fn only moves bytes (broadcast, send,
        recv), so a dtype kolo does not carry (DDP's bool buffers) goes as its bytes."""
        for t in tensors:
            _carried(t, what, any_dtype)
            buf = t if t.is_contiguous() else t.contiguous()
            fn(as_bytes(buf) if any_dtype else buf)
            if buf is not t:
                t.copy_(buf)
        return _Done(tensors)

    def allreduce(self, tensors, opts):
        op = _op(opts.reduceOp)
        if len(tensors) == 1 and tensors[0].is_contiguous():
            return self._allreduce_async(tensors[0], op)
        return self._each(tensors, "allreduce", lambda b: _capi.check(_capi.lib.kolo_allreduce(
            _ptr(b), _ptr(b), b.numel(), kolo_dtype(b), op, self._comm, _stream(b))))

    def _allreduce_async(self, tensor, op):
        """Through kolo's runtime (its background thread, on a communicator of its own):
        the call returns at once and its future completes when the allreduce has, so DDP's
        allreduces overlap the rest of the backward pass. Named by a per-group counter:
        DDP launches its buckets in the same order on every rank."""
        self._reap()
        future = torch.futures.Future()

        def done(_request, result, _data):
            if result == _capi.SUCCESS:
                future.set_result([tensor])
            else:
                future.set_exception(_capi.KoloError(result, "allreduce through kolo's runtime failed (a peer died or "
                                                             "made another call; see the log)"))
        callback = _capi.COMPLETION_FN(done)
        options = _capi.enqueue_options(stream=_stream(tensor))
        options.callback = callback
        request = ctypes.c_void_p()
        name = f"pg.allreduce.{self._sequence}".encode()
        self._sequence += 1
        _capi.check(_capi.lib.kolo_enqueue_allreduce(name, _ptr(tensor), _ptr(tensor), tensor.numel(),
                                                     kolo_dtype(tensor), op, ctypes.byref(options), self._comm,
                                                     ctypes.byref(request)))
        self._in_flight.append((request, tensor, callback, options))  # alive until the runtime is done
        return _create_work_from_future(future)

    def _reap(self):
        """Frees the requests the runtime has finished."""
        still = []
        for entry in self._in_flight:
            if _capi.lib.kolo_test(entry[0]) == _capi.IN_PROGRESS:
                still.append(entry)
            else:
                _capi.lib.kolo_request_free(entry[0])
        self._in_flight = still

    def allreduce_coalesced(self, tensors, opts):
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors, opts):
        root = opts.rootRank
        return self._each(tensors, "broadcast", lambda b: _capi.check(_capi.lib.kolo_broadcast(
            _ptr(b), _ptr(b), b.numel(), kolo_dtype(b), root, self._comm, _stream(b))), any_dtype=True)

    def reduce(self, tensors, opts):
        op, root = _op(opts.reduceOp), opts.rootRank
        return self._each(tensors, "reduce", lambda b: _capi.check(_capi.lib.kolo_reduce(
            _ptr(b), _ptr(b), b.numel(), kolo_dtype(b), op, root, self._comm, _stream(b))))

    def _allgather_base(self, output, input, opts=None):
        _carried(output, "allgather")
        _carried(input, "allgather")
        src = input.contiguous()
        if output.numel() != src.numel() * self._size:
            raise ValueError(f"kolo backend: allgather into {output.numel()} elements of {src.numel()} x {self._size}")
        dst = output if output.is_contiguous() else torch.empty_like(output, memory_format=torch.contiguous_format)
        _capi.check(_capi.lib.kolo_allgather(_ptr(src), _ptr(dst), src.numel(), kolo_dtype(src), self._comm,
                                              _stream(src)))
        if dst is not output:
            output.copy_(dst)
        return _Done([output])

    def allgather(self, output_lists, inputs, opts=None):
        for outs, inp in zip(output_lists, inputs):
            flat = torch.empty((self._size,) + tuple(inp.shape), dtype=inp.dtype, device=inp.device)
            self._allgather_base(flat, inp)
            for r, o in enumerate(outs):
                o.copy_(flat[r])
        return _Done(output_lists)

    def _reduce_scatter_base(self, output, input, opts):
        _carried(output, "reduce_scatter")
        _carried(input, "reduce_scatter")
        src = input.contiguous()
        if src.numel() != output.numel() * self._size:
            raise ValueError(f"kolo backend: reduce_scatter of {src.numel()} elements into {output.numel()} x "
                             f"{self._size}")
        dst = output if output.is_contiguous() else torch.empty_like(output, memory_format=torch.contiguous_format)
        _capi.check(_capi.lib.kolo_reduce_scatter(_ptr(src), _ptr(dst), dst.numel(), kolo_dtype(src),
                                                  _op(opts.reduceOp), self._comm, _stream(src)))
        if dst is not output:
            output.copy_(dst)
        return _Done([output])

    def reduce_scatter(self, outputs, input_lists, opts):
        for out, inputs in zip(outputs, input_lists):
            self._reduce_scatter_base(out, torch.stack([t.contiguous() for t in inputs]), opts)
        return _Done(outputs)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts):
        _carried(output, "alltoall")
        _carried(input, "alltoall")
        n = self._size
        src = input.contiguous()
        dst = output if output.is_contiguous() else torch.empty_like(output, memory_format=torch.contiguous_format)
        if not output_split_sizes and not input_split_sizes:
            if src.numel() % n or dst.numel() != src.numel():
                raise ValueError(f"kolo backend: alltoall of {src.numel()} elements on {n} ranks")
            _capi.check(_capi.lib.kolo_alltoall(_ptr(src), _ptr(dst), src.numel() // n, kolo_dtype(src), self._comm,
                                                _stream(src)))
        else:
            # Uneven splits (rows of the first dimension): a group of sends and receives.
            row_in = src[0].numel() if src.shape[0] else 0
            row_out = dst[0].numel() if dst.shape[0] else 0
            ins = list(input_split_sizes) or [src.shape[0] // n] * n
            outs = list(output_split_sizes) or [dst.shape[0] // n] * n
            es = src.element_size()
            _capi.check(_capi.lib.kolo_group_start())
            try:
                at_in = at_out = 0
                for q in range(n):
                    if q == self._rank:  # kolo has no send to oneself: a copy
                        dst[at_out:at_out + outs[q]].copy_(src[at_in:at_in + ins[q]])
                    else:
                        _capi.check(_capi.lib.kolo_send(ctypes.c_void_p(src.data_ptr() + at_in * row_in * es),
                                                        ins[q] * row_in, kolo_dtype(src), q, self._comm, _stream(src)))
                        _capi.check(_capi.lib.kolo_recv(ctypes.c_void_p(dst.data_ptr() + at_out * row_out * es),
                                                        outs[q] * row_out, kolo_dtype(dst), q, self._comm, _stream(dst)))
                    at_in += ins[q]
                    at_out += outs[q]
            finally:
                _capi.check(_capi.lib.kolo_group_end())
        if dst is not output:
            output.copy_(dst)
        return _Done([output])

    def alltoall(self, outputs, inputs, opts):
        for o, i in zip(outputs, inputs):
            _carried(o, "alltoall")
            _carried(i, "alltoall")
        # The sends and receives run at the group's end: their buffers must live until
        # then (contiguous copies kept here), and strided outputs are filled afterwards.
        srcs = [i.contiguous() for i in inputs]
        dsts = [o if o.is_contiguous() else torch.empty_like(o, memory_format=torch.contiguous_format)
                for o in outputs]
        _capi.check(_capi.lib.kolo_group_start())
        try:
            for q in range(self._size):
                src, dst = srcs[q], dsts[q]
                if q == self._rank:
                    dst.copy_(src)
                    continue
                _capi.check(_capi.lib.kolo_send(_ptr(src), src.numel(), kolo_dtype(src), q, self._comm, _stream(src)))
                _capi.check(_capi.lib.kolo_recv(_ptr(dst), dst.numel(), kolo_dtype(dst), q, self._comm, _stream(dst)))
        finally:
            _capi.check(_capi.lib.kolo_group_end())
        for d, o in zip(dsts, outputs):
            if d is not o:
                o.copy_(d)
        return _Done(outputs)

    def send(self, tensors, dst, tag):
        return self._each(tensors, "send", lambda b: _capi.check(_capi.lib.kolo_send(
            _ptr(b), b.numel(), kolo_dtype(b), dst, self._comm, _stream(b))), any_dtype=True)

    def recv(self, tensors, src, tag):
        return self._each(tensors, "recv", lambda b: _capi.check(_capi.lib.kolo_recv(
            _ptr(b), b.numel(), kolo_dtype(b), src, self._comm, _stream(b))), any_dtype=True)

    def barrier(self, opts=None):
        _capi.check(_capi.lib.kolo_barrier(self._comm))
        return _Done([])


_live = weakref.WeakSet()  # the groups made in this process, shut down at exit


@atexit.register
def _shutdown_all():
    for group in list(_live):
        group.shutdown()


def _create(store, rank, size, timeout=datetime.timedelta(seconds=300)):
    return KoloProcessGroup(store, rank, size, timeout)


if not hasattr(dist.Backend, "KOLO"):  # once per process
    dist.Backend.register_backend("kolo", _create)
