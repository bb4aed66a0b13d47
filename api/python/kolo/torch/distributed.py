"""kolo as a torch.distributed backend: `import kolo.torch.distributed` registers "kolo",
then `torch.distributed.init_process_group("kolo", ...)` (any init_method: env:// under
torchrun, file://, tcp://) and DDP run their collectives on kolo.

The process group is a Python subclass of torch's ProcessGroup over kolo's direct C API:
rank 0 makes a kolo unique id and hands it to the others through torch's store (it holds
the job's secret: the store must be one the job trusts, as for NCCL's unique id). CPU and
CUDA tensors: CUDA collectives are enqueued on torch's current stream of the tensor's
device (kolo's device path), so later work on that stream sees their results. Allreduces of one contiguous tensor (DDP's buckets) go through kolo's runtime and
return at once, their futures completing on the runtime's thread; the other collectives
run to completion when called (kolo's host calls block), returning finished work. Sends
and receives wait until their Work is waited on (or the next collective), then run together
(_P2PWork); a receive from any source finds its sender through counts in torch's store.

`kolo.torch.distributed.init_process_group()` does the same for a script started by
kolorun, mpirun (Open MPI), srun or torchrun: the rank and size from whichever launcher set
them (`launched()`), the meeting through env:// where MASTER_ADDR and MASTER_PORT are set,
else through a store file in a private folder, removed at exit."""
import atexit
import ctypes
import datetime
import inspect
import os
import re
import stat
import sys
import tempfile
import time
import weakref

import torch
import torch.distributed as dist
from torch.distributed.constants import default_pg_timeout
from torch._C._distributed_c10d import ProcessGroup, Work, _create_work_from_future

from kolo import _capi
from kolo.torch._launch import Launch, launched  # noqa: F401 - kolo.torch.distributed.launched
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


def _raise_failure(future):
    """The value of the future a runtime allreduce's Work wraps: its tensors, or its failure
    raised, so that the future torch's C++ side sees completes with an error (see
    _allreduce_async)."""
    value = future.value()
    if isinstance(value, BaseException):
        raise value
    return value


class _RuntimeWork(Work):
    """A runtime allreduce as torch.distributed's Python functions get it (dist.all_reduce
    waits on it in Python, or hands it to the script with async_op=True): wait() raises the
    KoloError of a failed allreduce, where a Work made from a future returns as if it had
    succeeded (torch 1.13), leaving the tensor unreduced. Given to Python callers only: a
    Python Work handed to C++ (DDP) outlives its Python half, and C++ would then call
    Work's own methods, which never complete."""

    def __init__(self, outcome, future):
        super().__init__()
        self._outcome, self._future = outcome, future

    def wait(self, timeout=None):
        value = self._outcome.wait()
        if isinstance(value, BaseException):
            raise value
        return True

    def is_completed(self):
        return self._outcome.done()

    def is_success(self):
        return self._outcome.done() and not isinstance(self._outcome.value(), BaseException)

    def result(self):
        self.wait()
        return self._outcome.value()

    def get_future(self):
        return self._future


# The file of torch.distributed's collective functions (all_reduce, ...): a call from there
# is made in Python, and its Work stays in Python.
_C10D_FILE = os.path.join("distributed", "distributed_c10d.py")


def _Done(result):
    """A finished collective as torch's C++ side sees it (DDP waits on it there, so a
    Python subclass of Work would not do): a work made from a future already holding the
    outputs."""
    future = torch.futures.Future()
    future.set_result(result)
    return _create_work_from_future(future)


def _ptr(t):
    return ctypes.c_void_p(t.data_ptr())


class _P2PWork(Work):
    """An isend or irecv (torch's Python layer hands its Work to the script). kolo's send
    and recv block until the peer's call matches, so a posted call waits in its group's
    list and runs, with every call posted before it, as one kolo group (where a send and a
    receive do not wait for each other) when a Work of them is waited on or polled, when
    batch_isend_irecv ends, or before the group's next collective (kolo runs a rank's calls
    in program order): two ranks that each isend before they irecv do not deadlock."""

    def __init__(self, group, tensors):
        super().__init__()
        self._group, self._tensors = group, tensors
        self._done, self._error, self._source = False, None, -1

    def wait(self, timeout=None):
        if not self._done:
            self._group._run_p2p()
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self):
        self.wait()
        return True

    def is_success(self):
        return self.is_completed() and self._error is None

    def exception(self):
        return self._error

    def result(self):
        self.wait()
        return self._tensors

    def get_future(self):
        future = torch.futures.Future()
        try:
            self.wait()
            future.set_result(self._tensors)
        except Exception as e:
            future.set_exception(e)
        return future

    def _source_rank(self):
        """The sender of a receive from any source (torch's dist.recv(src=None) asks)."""
        self.wait()
        return self._source


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
        # A group's own timeout (init_process_group or new_group with timeout=) bounds each
        # wait of its calls; torch's default leaves KOLO_TIMEOUT (300 s unless set) in charge.
        if timeout is not None and timeout != default_pg_timeout:
            _capi.check(_capi.lib.kolo_comm_set_timeout(comm, timeout.total_seconds()))
        self._sequence = 0
        self._in_flight = []  # (request, tensor, callback, options) of runtime allreduces
        # Point-to-point: the calls posted and not yet run ([kind, peer, tensor, work]; peer
        # None: a receive from any source), and, for receives from any source, the messages
        # taken from each peer (the store counts those each peer sent: see _any_sender).
        self._store, self._timeout = store, timeout
        self._p2p = []
        self._taken = [0] * size
        _live.add(self)

    def dump_trace(self, folder=None):
        """Writes this group's flight recorder (its last KOLO_TRACE_CALLS calls) into `folder`
        (None: KOLO_TRACE_DIR); kolo-trace reads the files of all ranks. Not collective."""
        _capi.check(_capi.lib.kolo_comm_dump(self._comm, folder.encode() if folder else None))

    def shutdown(self):
        """Waits for the runtime's allreduces, then destroys the communicator (and its
        runtime thread). Also at interpreter exit: left to the garbage collector, the
        communicator could outlive the Python objects its runtime's callbacks use. The
        communicator is destroyed even when the wait is interrupted (Ctrl-C): its runtime
        must not call back into Python, nor write into tensors, once the process winds down."""
        comm, self._comm = getattr(self, "_comm", None), None
        if comm:
            in_flight = getattr(self, "_in_flight", [])
            try:
                for entry in in_flight:
                    if entry[0].value:
                        _capi.lib.kolo_wait(entry[0])
            finally:
                _capi.lib.kolo_comm_destroy(comm)  # fails what is still pending; its thread is gone after
                for entry in in_flight:
                    if entry[0].value:
                        _capi.lib.kolo_request_free(entry[0])
                self._in_flight = []

    def __del__(self):
        self.shutdown()

    def getBackendName(self):
        return "kolo"

    def _each(self, tensors, what, fn, any_dtype=False):
        """fn on each tensor, contiguous; any_dtype: fn only moves bytes (broadcast), so a
        dtype kolo does not carry (DDP's bool buffers) goes as its bytes."""
        self._run_p2p()
        for t in tensors:
            _carried(t, what, any_dtype)
            buf = t if t.is_contiguous() else t.contiguous()
            fn(as_bytes(buf) if any_dtype else buf)
            if buf is not t:
                t.copy_(buf)
        return _Done(tensors)

    # Every opts is optional: torch's Python layer passes one, a DDP communication hook may
    # not (process_group.allreduce(tensors)); torch's defaults then (SUM, root 0).
    def allreduce(self, tensors, opts=None):
        op = _op((opts or dist.AllreduceOptions()).reduceOp)
        if any(t.is_sparse for t in tensors):
            return self._sparse_allreduce(tensors, op)
        if len(tensors) == 1 and tensors[0].is_contiguous():
            from_python = sys._getframe(1).f_code.co_filename.endswith(_C10D_FILE)
            return self._allreduce_async(tensors[0], op, from_python)
        return self._each(tensors, "allreduce", lambda b: _capi.check(_capi.lib.kolo_allreduce(
            _ptr(b), _ptr(b), b.numel(), kolo_dtype(b), op, self._comm, _stream(b))))

    def _allreduce_async(self, tensor, op, from_python=False):
        """Through kolo's runtime (its background thread, on a communicator of its own):
        the call returns at once and its future completes when the allreduce has, so DDP's
        allreduces overlap the rest of the backward pass. Named by a per-group counter:
        DDP launches its buckets in the same order on every rank.

        A failure (a peer died or was interrupted: KOLO_ERR_ABORTED, ...) must complete the
        future torch's C++ side waits on with an error. torch's Future.set_exception does
        not: it stores the exception as the future's value, which only Python unwraps, and
        DDP's reducer (finalize_backward) would take it for its bucket's result, find no
        tensor in it and read past an empty list (a segfault). So the work wraps a future
        chained with .then(_raise_failure): the exception raised in that callback completes
        it with a C++ error, which DDP's backward raises. (Work.wait() of a Work made from
        a future does not raise in torch 1.13.) from_python: called by
        torch.distributed's Python functions, whose Work stays in Python: a _RuntimeWork,
        whose wait() raises."""
        self._run_p2p()
        self._reap()
        future = torch.futures.Future()
        result_future = future.then(_raise_failure)

        def done(_request, result, _data):
            if result == _capi.SUCCESS:
                future.set_result([tensor])
            else:
                future.set_result(_capi.KoloError(result, "allreduce through kolo's runtime failed (a peer died, "
                                                          "was interrupted or made another call; see the log)"))
        callback = _capi.COMPLETION_FN(done)
        options = _capi.enqueue_options(stream=_stream(tensor))
        options.callback = callback
        request = ctypes.c_void_p()
        name = f"pg.allreduce.{self._sequence}".encode()
        self._sequence += 1
        # Kept (the callback, the tensor the runtime writes) until the runtime is done with
        # the request; listed before the call, so that a KeyboardInterrupt raised as the
        # call returns cannot drop what the runtime was just given.
        entry = (request, tensor, callback, options)
        self._in_flight.append(entry)
        try:
            _capi.check(_capi.lib.kolo_enqueue_allreduce(name, _ptr(tensor), _ptr(tensor), tensor.numel(),
                                                         kolo_dtype(tensor), op, ctypes.byref(options), self._comm,
                                                         ctypes.byref(request)))
        except BaseException:
            if not request.value:  # not enqueued: nothing will call back
                self._in_flight.remove(entry)
            raise
        if from_python:
            return _RuntimeWork(future, result_future)
        return _create_work_from_future(result_future)

    def _reap(self):
        """Frees the requests the runtime has finished (each unlisted before it is freed, so
        an interruption leaks a request at worst, never frees one twice)."""
        for entry in list(self._in_flight):
            if entry[0].value and _capi.lib.kolo_test(entry[0]) == _capi.IN_PROGRESS:
                continue
            self._in_flight.remove(entry)
            if entry[0].value:
                _capi.lib.kolo_request_free(entry[0])

    def _sparse_allreduce(self, tensors, op):
        """As Gloo's: this rank's tensors summed and coalesced, every rank's indices and values
        gathered (their counts first), the whole coalesced again: each tensor becomes the sum.
        On the host, as Gloo's (a CUDA tensor's result is copied back to its device)."""
        if op != _capi.OP_SUM:
            raise ValueError("kolo backend: a sparse allreduce sums (ReduceOp.SUM), as Gloo's")
        mine = tensors[0].cpu()
        for t in tensors[1:]:
            mine = mine + t.cpu()
        mine = mine.coalesce()
        indices = mine._indices().t().contiguous()  # nnz x sparse_dim
        values = mine._values().contiguous()  # nnz x the dense dimensions
        nnz = torch.empty(self._size, dtype=torch.int64)
        self._allgather_base(nnz, torch.tensor([indices.shape[0]], dtype=torch.int64))
        nnz = nnz.tolist()
        every_index = self._allgatherv(indices, nnz).view(-1, indices.shape[1])
        every_value = self._allgatherv(values, nnz).view(-1, *values.shape[1:])
        total = torch.sparse_coo_tensor(every_index.t(), every_value, mine.shape).coalesce()
        for t in tensors:
            t.copy_(total.to(t.device))
        return _Done(tensors)

    def _allgatherv(self, mine, rows):
        """Every rank's rows of `mine` (a contiguous host tensor; rows[r] from rank r), one
        after the other; as bytes, any dtype."""
        row = torch.Size(mine.shape[1:]).numel() * mine.element_size()  # bytes
        counts = (ctypes.c_size_t * self._size)(*[r * row for r in rows])
        displs = (ctypes.c_size_t * self._size)(*[sum(rows[:r]) * row for r in range(self._size)])
        out = torch.empty((sum(rows),) + tuple(mine.shape[1:]), dtype=mine.dtype)
        src, dst = mine.reshape(-1).view(torch.uint8), out.reshape(-1).view(torch.uint8)
        _capi.check(_capi.lib.kolo_allgatherv(_ptr(src), src.numel(), _ptr(dst), counts, displs, _capi.UINT8,
                                              self._comm, None))
        return out

    def allreduce_coalesced(self, tensors, opts=None):
        return self.allreduce(tensors, opts)

    def broadcast(self, tensors, opts=None):
        root = (opts or dist.BroadcastOptions()).rootRank
        return self._each(tensors, "broadcast", lambda b: _capi.check(_capi.lib.kolo_broadcast(
            _ptr(b), _ptr(b), b.numel(), kolo_dtype(b), root, self._comm, _stream(b))), any_dtype=True)

    def reduce(self, tensors, opts=None):
        opts = opts or dist.ReduceOptions()
        op, root = _op(opts.reduceOp), opts.rootRank
        return self._each(tensors, "reduce", lambda b: _capi.check(_capi.lib.kolo_reduce(
            _ptr(b), _ptr(b), b.numel(), kolo_dtype(b), op, root, self._comm, _stream(b))))

    def _allgather_base(self, output, input, opts=None):
        self._run_p2p()
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

    def _reduce_scatter_base(self, output, input, opts=None):
        self._run_p2p()
        opts = opts or dist.ReduceScatterOptions()
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

    def reduce_scatter(self, outputs, input_lists, opts=None):
        for out, inputs in zip(outputs, input_lists):
            self._reduce_scatter_base(out, torch.stack([t.contiguous() for t in inputs]), opts)
        return _Done(outputs)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        self._run_p2p()
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

    def alltoall(self, outputs, inputs, opts=None):
        for o, i in zip(outputs, inputs):
            _carried(o, "alltoall")
            _carried(i, "alltoall")
        me = self._rank
        others = [q for q in range(self._size) if q != me]
        self._exchange([(q, inputs[q]) for q in others], [(q, outputs[q]) for q in others])
        outputs[me].copy_(inputs[me])
        return _Done(outputs)

    # Point-to-point (_P2PWork says when a posted call runs). Tags are not matched: kolo
    # has none, and the messages between two ranks arrive in the order they were sent.
    def send(self, tensors, dst, tag=0):
        work = self._post("send", dst, tensors)
        # Counted in the store, for a receive from any source on dst (_any_sender).
        self._store.add(f"kolo/sent/{self._rank}/{dst}", len(tensors))
        return work

    def recv(self, tensors, src, tag=0):
        work = self._post("recv", src, tensors)
        self._taken[src] += len(tensors)
        return work

    def recv_anysource(self, tensors, tag=0):
        return self._post("recv", None, tensors)

    def _post(self, kind, peer, tensors):
        work = _P2PWork(self, tensors)
        for t in tensors:
            _carried(t, kind, any_dtype=True)
            self._p2p.append([kind, peer, t, work])
        return work

    def _run_p2p(self):
        """Runs the point-to-point calls posted so far, in order, as kolo groups: one up to
        each receive from any source, whose sender is found (and counted) only then, since
        that sender may be waiting for the calls before it."""
        calls, self._p2p = self._p2p, []
        at = 0
        try:
            while at < len(calls):
                if calls[at][1] is None:
                    calls[at][1] = calls[at][3]._source = self._any_sender()
                    self._taken[calls[at][1]] += 1
                end = next((i for i in range(at + 1, len(calls)) if calls[i][1] is None), len(calls))
                self._exchange([(c[1], c[2]) for c in calls[at:end] if c[0] == "send"],
                               [(c[1], c[2]) for c in calls[at:end] if c[0] == "recv"])
                for c in calls[at:end]:
                    c[3]._done = True
                at = end
        except BaseException as e:
            for c in calls[at:]:
                c[3]._done, c[3]._error = True, e
            raise

    def _any_sender(self):
        """The first peer that has sent this rank more messages than it has taken from that
        peer (each send adds to a count in the store): waits for one, until the group's
        timeout."""
        deadline = time.monotonic() + self._timeout.total_seconds()
        pause = 1e-4
        while True:
            for q in range(self._size):
                if q != self._rank and self._store.add(f"kolo/sent/{q}/{self._rank}", 0) > self._taken[q]:
                    return q
            if time.monotonic() > deadline:
                raise _capi.KoloError(_capi.ERR_TIMEOUT, f"kolo backend: rank {self._rank}: no message from any "
                                                         f"rank within {self._timeout}")
            time.sleep(pause)
            pause = min(2 * pause, 0.01)

    # batch_isend_irecv: its calls run together when it ends.
    def _start_coalescing(self):
        pass

    def _end_coalescing(self, reqs=None):
        self._run_p2p()

    def barrier(self, opts=None):
        self._run_p2p()
        result = _capi.lib.kolo_barrier(self._comm)
        if result == _capi.RESULT_NAMES.index("ERR_TIMEOUT"):
            # torch's words for a barrier that ran out of time (its tests look for them).
            raise RuntimeError(f"kolo barrier: Timed out after {self._timeout.total_seconds():g} s: "
                               f"{_capi.last_error()}")
        _capi.check(result)
        return _Done([])

    # torch 2.x: the into-a-tensor collectives of a list of tensors (all_gather_into_tensor
    # and reduce_scatter_tensor under a coalescing manager, FSDP), each pair in turn.
    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        for o, i in zip(outputs, inputs):
            self._allgather_base(o, i, opts)
        return _Done(outputs)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        for o, i in zip(outputs, inputs):
            self._reduce_scatter_base(o, i, opts)
        return _Done(outputs)

    def allgather_coalesced(self, output_lists, inputs, opts=None):
        """torch's all_gather_coalesced: output_lists[r][i] is rank r's inputs[i] (allgather's
        lists are the other way round: outputs[i][r])."""
        if len(output_lists) != self._size or any(len(outs) != len(inputs) for outs in output_lists):
            raise ValueError(f"kolo backend: all_gather_coalesced wants {self._size} lists of {len(inputs)} tensors")
        for i, inp in enumerate(inputs):
            flat = torch.empty((self._size,) + tuple(inp.shape), dtype=inp.dtype, device=inp.device)
            self._allgather_base(flat, inp)
            for r in range(self._size):
                output_lists[r][i].copy_(flat[r])
        return _Done(output_lists)

    def _exchange(self, sends, recvs):
        """Point-to-point in one group: sends [(peer, tensor)], recvs [(peer, tensor)]; the
        received tensors filled when it returns. The sends and receives run at the group's
        end: their buffers live until then (contiguous copies kept here), and strided
        outputs are filled afterwards."""
        self._run_p2p()  # a no-op when it runs them
        srcs = [(q, t.contiguous()) for q, t in sends]
        dsts = [(q, t, t if t.is_contiguous() else torch.empty_like(t, memory_format=torch.contiguous_format))
                for q, t in recvs]
        _capi.check(_capi.lib.kolo_group_start())
        try:
            for q, s in srcs:
                b = as_bytes(s)
                _capi.check(_capi.lib.kolo_send(_ptr(b), b.numel(), kolo_dtype(b), q, self._comm, _stream(b)))
            for q, _, d in dsts:
                b = as_bytes(d)
                _capi.check(_capi.lib.kolo_recv(_ptr(b), b.numel(), kolo_dtype(b), q, self._comm, _stream(b)))
        finally:
            _capi.check(_capi.lib.kolo_group_end())
        for _, t, d in dsts:
            if d is not t:
                t.copy_(d)

    def _check_pieces(self, what, kind, pieces, like):
        """The root's list of a scatter or gather: one tensor per rank, each like `like`."""
        if len(pieces) != self._size:
            raise ValueError(f"kolo backend: {what} wants {self._size} {kind}, got {len(pieces)}")
        for t in pieces:
            if t.numel() != like.numel() or t.dtype != like.dtype:
                raise ValueError(f"kolo backend: {what}: {kind} of {t.numel()} {t.dtype} where this rank has "
                                 f"{like.numel()} {like.dtype}")

    def scatter(self, outputs, input_lists, opts=None):
        """torch's scatter: the root's input_lists[0][r] goes to rank r's outputs[0]."""
        root = (opts or dist.ScatterOptions()).rootRank
        if len(outputs) != 1:
            raise ValueError("kolo backend: scatter takes one output tensor")
        out = outputs[0]
        if self._rank == root:
            pieces = input_lists[0] if input_lists else []
            self._check_pieces(f"scatter from rank {root}", "inputs", pieces, out)
            self._exchange([(q, pieces[q]) for q in range(self._size) if q != root], [])
            out.copy_(pieces[root].view_as(out))
        else:
            self._exchange([], [(root, out)])
        return _Done(outputs)

    def gather(self, output_lists, inputs, opts=None):
        """torch's gather: rank r's inputs[0] goes to the root's output_lists[0][r]."""
        root = (opts or dist.GatherOptions()).rootRank
        if len(inputs) != 1:
            raise ValueError("kolo backend: gather takes one input tensor")
        inp = inputs[0]
        if self._rank == root:
            outs = output_lists[0] if output_lists else []
            self._check_pieces(f"gather to rank {root}", "outputs", outs, inp)
            self._exchange([], [(q, outs[q]) for q in range(self._size) if q != root])
            outs[root].copy_(inp.view_as(outs[root]))
        else:
            self._exchange([(root, inp)], [])
        return _Done(output_lists)

    # The names torch's C++ side looks up in a Python ProcessGroup (its trampoline) have
    # changed across 2.x: the newest call all_gather_single, reduce_scatter_single,
    # all_to_all_single and the *_single_coalesced ones, earlier ones _allgather_base,
    # _reduce_scatter_base, alltoall_base. Both sets, the same methods.
    all_gather_single = _allgather_base
    reduce_scatter_single = _reduce_scatter_base
    all_to_all_single = alltoall_base
    all_gather_single_coalesced = allgather_into_tensor_coalesced
    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced

    def abort(self):
        """torch 2.x's abort (destroy_process_group, a watchdog): what is pending fails at
        once on this rank (kolo_comm_abort), then the communicator goes as in shutdown()."""
        comm = getattr(self, "_comm", None)
        if comm:
            _capi.lib.kolo_comm_abort(comm)
        self.shutdown()


_live = weakref.WeakSet()  # the groups made in this process, shut down at exit


@atexit.register
def _shutdown_all():
    for group in list(_live):
        group.shutdown()


def _create(store, rank, size, timeout=datetime.timedelta(seconds=300)):
    return KoloProcessGroup(store, rank, size, timeout)


def _registration_options(register):
    """The keyword arguments for torch's Backend.register_backend, as far as the installed
    torch's takes them (feature detection, not version numbers): extended_api=False (the
    creator takes store, rank, size and timeout: torch 1.13 and 2.x alike) and, where torch
    asks for the devices a backend serves (2.x: without them it warns and assumes cpu and
    cuda), devices=["cpu", "cuda"]."""
    try:
        params = inspect.signature(register).parameters
    except (TypeError, ValueError):  # a builtin without a signature: the plain call
        return {}
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    options = {}
    if "extended_api" in params or accepts_any:
        options["extended_api"] = False
    if "devices" in params:
        options["devices"] = list(DEVICES)
    return options


DEVICES = ("cpu", "cuda")  # what the kolo backend carries

if not hasattr(dist.Backend, "KOLO"):  # once per process
    dist.Backend.register_backend("kolo", _create, **_registration_options(dist.Backend.register_backend))


def _private_store(launch, timeout):
    """torch's file store for ranks on one host, in <tmp>/kolo-pg-<uid>-<job>/store: a folder
    only this user may enter (mode 0700, checked: one made by someone else is refused), a
    file only it may read (0600), for the store holds kolo's unique id and with it the
    job's secret. The store object is never destroyed: its destructor, at exit, would count
    the ranks in the file and, should the folder be gone, retry opening it for the store's
    timeout (30 minutes by default); _at_exit removes the file instead."""
    if not launch.job:
        raise ValueError(f"kolo: {launch.launcher} gives this job no name to meet by; set MASTER_ADDR and "
                         "MASTER_PORT (rank 0's host and a free port) in every rank's environment")
    job = re.sub(r"[^A-Za-z0-9._-]", "-", launch.job)[:100]
    folder = os.path.join(tempfile.gettempdir(), f"kolo-pg-{os.getuid()}-{job}")
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PermissionError(f"kolo: {folder} is not a folder of this user's that only it may enter (mode 0700); "
                              "remove it, or set MASTER_ADDR and MASTER_PORT")
    path = os.path.join(folder, "store")
    os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600))
    store = dist.FileStore(path, launch.size)
    store.set_timeout(timeout)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(store))  # never destroyed (above)
    return folder, path, store


def _at_exit(folder, path, store, size):
    """At exit, on every rank, after an error or Ctrl-C too: kolo's runtime threads stop
    (before the interpreter winds down: they write into tensors and call into Python),
    then the store's file and folder go, removed by the last rank out, or by the first one
    that ends with an uncaught exception (KeyboardInterrupt included): that rank's job is
    over, and the other ranks, which fail with it (or are stopped by the launcher), need
    the store no more."""
    _shutdown_all()
    if hasattr(sys, "last_value"):  # the script ended with an uncaught exception
        last = True
    else:
        try:
            store.set_timeout(datetime.timedelta(seconds=5))  # an open of a removed folder retries as long
            last = os.path.exists(path) and store.add("kolo/exited", 1) >= size
        except Exception:  # removed meanwhile
            last = True
    if last:
        for remove, what in ((os.unlink, path), (os.rmdir, folder)):
            try:
                remove(what)
            except OSError:
                pass


def init_process_group(backend="kolo", timeout=None, **kwargs):
    """torch.distributed.init_process_group for a script started by kolorun, mpirun, srun or
    torchrun (or as one process): rank and world_size from launched(), unless given. The
    ranks meet through init_method or store when given; else env:// where MASTER_ADDR and
    MASTER_PORT are set (torchrun sets them; set them under the others for ranks on several
    hosts: its store is torch's TCPStore, which trusts whoever connects, as NCCL's unique id
    does); else, on one host, a file store in a private folder (_private_store) that the
    ranks remove at exit, after an error or Ctrl-C too. Returns the Launch."""
    launch = launched()
    kwargs.setdefault("rank", launch.rank)
    kwargs.setdefault("world_size", launch.size)
    if timeout is None:
        timeout = default_pg_timeout
    kwargs["timeout"] = timeout
    if "init_method" not in kwargs and "store" not in kwargs:
        if os.environ.get("MASTER_ADDR") and os.environ.get("MASTER_PORT"):
            kwargs["init_method"] = "env://"
        elif kwargs["world_size"] == 1:
            kwargs["store"] = dist.HashStore()
        else:
            if launch.local_size and launch.local_size != launch.size:
                raise ValueError(f"kolo: {launch.size} ranks on several hosts ({launch.local_size} on this one): set "
                                 "MASTER_ADDR and MASTER_PORT (rank 0's host and a free port) in every rank's "
                                 "environment")
            folder, path, store = _private_store(launch, timeout)
            atexit.register(_at_exit, folder, path, store, kwargs["world_size"])
            kwargs["store"] = store
    dist.init_process_group(backend, **kwargs)
    return launch
