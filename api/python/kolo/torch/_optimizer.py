"""Horovod's DistributedOptimizer and the broadcast helpers, over kolo.torch's collectives.

The optimizer allreduces each gradient as soon as autograd has accumulated it (a hook on
the parameter's gradient accumulator), so communication overlaps the rest of the backward
pass; step() waits for them all, then steps. Names are the parameters' names, so every
rank's runtime matches the same tensors whatever order their hooks fire in."""

import contextlib
import pickle
import warnings

import torch

from kolo.torch import _ops, _state
from kolo.torch._adasum_optimizer import _DistributedAdasumOptimizer
from kolo.torch._params import parameter_names
from kolo.torch.compression import Compression


class _DistributedOptimizer(torch.optim.Optimizer):
    _kolo_distributed = True  # marks the classes DistributedOptimizer makes (copies of this one's dict)

    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, groups, sparse_as_dense, process_set):
        super(self.__class__, self).__init__(params)
        self._process_set = process_set
        # A rank outside the process set takes no part: no hooks, no allreduces, step()
        # with its own gradients (as Horovod).
        self._included = process_set is None or process_set.included()
        self._should_synchronize = True
        self._synchronized = False  # synchronize() ran since the last step()
        self._compression = compression
        self._op = op
        self._sparse_as_dense = sparse_as_dense
        if op != _ops.Average and gradient_predivide_factor != 1.0:
            raise ValueError("kolo.torch: gradient_predivide_factor applies to op=Average only")
        self._prescale = 1.0 / gradient_predivide_factor
        self._postscale = gradient_predivide_factor
        all_params = [p for group in self.param_groups for p in group["params"]]
        self._parameter_names = parameter_names(self.param_groups, named_parameters, "allreduce.noname")
        self._passes = backward_passes_per_step
        self._delay = {p: backward_passes_per_step for p in all_params}
        self._handles = {}  # parameter -> (handle, ctx) or (None, None) when not yet enqueued
        self._groups = self._group_of(groups, all_params)
        if self._groups and compression is not Compression.none:
            raise ValueError("kolo.torch: DistributedOptimizer: compression with num_groups/groups is not supported "
                             "yet; use one or the other")
        self._group_ready = {}    # group index -> its members whose gradient is ready
        self._group_handles = {}  # group index -> the handle of its fused allreduce
        self._hooks = []
        self._accumulators = []
        self._densified = set()  # parameters whose sparse gradient goes dense (sparse_as_dense)
        for p in all_params:
            if p.requires_grad and self._included:
                self._register_hook(p)

    @staticmethod
    def _group_of(groups, params):
        """groups: None (every gradient alone), an int (that many groups, by order), or
        lists of parameters; each group is allreduced as one fused call once all of its
        gradients are ready."""
        if groups is None:
            return {}
        if isinstance(groups, int):
            if groups < 1:
                raise ValueError(f"kolo.torch: num_groups must be at least 1, not {groups}")
            trainable = [p for p in params if p.requires_grad]
            size = -(-len(trainable) // groups) if trainable else 1
            lists = [trainable[i:i + size] for i in range(0, len(trainable), size)]
        else:
            lists = [list(g) for g in groups]
        # Frozen parameters have no gradient to carry; a group left empty is dropped.
        lists = [m for m in ([p for p in g if p.requires_grad] for g in lists) if m]
        out = {}
        for index, members in enumerate(lists):
            for p in members:
                if p in out:
                    raise ValueError("kolo.torch: a parameter is in two groups")
                out[p] = (index, members)
        return out

    def _register_hook(self, p):
        # The accumulator of p's gradient, reached through a view of p (as Horovod does):
        # its hook runs once p.grad holds this backward pass's gradient.
        accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
        self._hooks.append(accumulator.register_hook(self._make_hook(p)))
        self._accumulators.append(accumulator)

    def _make_hook(self, p):
        def hook(*_):
            group = self._groups[p][0] if p in self._groups else None
            pending = (self._handles.get(p, (None, None))[0] is not None if group is None else
                       group in self._group_handles or p in self._group_ready.get(group, ()))
            if pending and self._delay[p] <= 0:
                raise RuntimeError("kolo.torch: a gradient was computed twice before step(); with gradient "
                                   "accumulation, give backward_passes_per_step")
            self._delay[p] -= 1
            if self._delay[p] > 0:
                return
            if p in self._groups:
                self._group_gradient_ready(p)
            else:
                self._handles[p] = self._allreduce_grad(p)
        return hook

    def _grad_for_allreduce(self, p):
        """The dense gradient to allreduce in place (a sparse one, under sparse_as_dense or in a
        group, made dense here and sparse again once synchronize() has it allreduced)."""
        if p.grad.is_sparse:
            p.grad = p.grad.to_dense()
            self._densified.add(p)
        return p.grad

    def _allreduce_grad(self, p):
        if p.grad.is_sparse and not self._sparse_as_dense:
            # Horovod's way: every rank's entries, allgathered (a callable waits for them).
            return _ops.sparse_allreduce_async(p.grad, self._parameter_names[p], self._op, self._process_set), None
        grad = self._grad_for_allreduce(p)
        # Where kolo compresses on the wire (FLOAT32 sums within one host), the gradient goes
        # as it is and is encoded once, summed in FLOAT32; elsewhere the compressor casts.
        wire = _ops.wire_for(self._compression, grad, self._op, _state.comm_of(self._process_set))
        compressed, ctx = (grad, None) if wire is not None else self._compression.compress(grad)
        handle = _ops.allreduce_async_(compressed, name=self._parameter_names[p], op=self._op,
                                       prescale_factor=self._prescale, postscale_factor=self._postscale,
                                       process_set=self._process_set, wire=wire)
        return handle, (compressed, ctx)

    def _group_gradient_ready(self, p):
        index, members = self._groups[p]
        ready = self._group_ready.setdefault(index, set())
        ready.add(p)
        self._handles[p] = (None, None)
        if len(ready) == len([m for m in members if m.requires_grad]):
            self._enqueue_group(index, members)

    def _enqueue_group(self, index, members):
        """One fused allreduce of the group's gradients (in place; a member without a
        gradient this step contributes zeros, as it does on every rank)."""
        grads = []
        for m in members:
            if not m.requires_grad:
                continue
            if m.grad is None:
                m.grad = torch.zeros_like(m)
            grads.append(self._grad_for_allreduce(m))
        self._group_handles[index] = _ops.grouped_allreduce_async_(
            grads, name=f"group.{index}." + self._parameter_names[members[0]], op=self._op,
            prescale_factor=self._prescale, postscale_factor=self._postscale, process_set=self._process_set)
        self._group_ready[index] = set()

    def synchronize(self):
        """Waits for every gradient's allreduce, first enqueuing those whose hook did not run
        (a parameter without a gradient this step contributes zeros, on every rank alike)."""
        self._synchronized = True
        if not self._included:
            return
        for p in self._delay:
            if not p.requires_grad or p in self._groups or p in self._handles:
                continue
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            self._handles[p] = self._allreduce_grad(p)
        for p, (index, members) in self._groups.items():
            if index not in self._group_handles:
                self._enqueue_group(index, members)
        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                continue
            if callable(handle):  # a sparse gradient's allgathers
                p.grad = handle()
                continue
            output = _ops.synchronize(handle)
            compressed, cctx = ctx
            if compressed is not p.grad:
                p.grad.copy_(self._compression.decompress(output, cctx))
        for handle in self._group_handles.values():
            _ops.synchronize(handle)
        for p in self._densified:
            p.grad = p.grad.to_sparse()
        self._densified.clear()
        self._handles.clear()
        self._group_handles.clear()
        for p in self._delay:
            self._delay[p] = self._passes

    def step(self, closure=None):
        # After an explicit synchronize() (to clip gradients, say) step() runs inside
        # skip_synchronize(), as Horovod's: the gradients are not allreduced twice.
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("kolo.torch: optimizer.step() called without optimizer.skip_synchronize() after "
                              "optimizer.synchronize(): the gradients are allreduced again (they were already); "
                              "run step() inside `with optimizer.skip_synchronize():`")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    @contextlib.contextmanager
    def skip_synchronize(self):
        """step() inside this block does not synchronize (it was done explicitly)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def zero_grad(self, *args, **kwargs):
        if self._group_handles or any(h is not None for h, _ in self._handles.values()):
            raise RuntimeError("kolo.torch: zero_grad() while gradients are being allreduced; call step() or "
                               "synchronize() first")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none, backward_passes_per_step=1,
                         op=_ops.Average, gradient_predivide_factor=1.0, num_groups=0, groups=None,
                         sparse_as_dense=False, process_set=None):
    """Wraps `optimizer` so that step() uses the gradients averaged (op) over all ranks."""
    if op == _ops.Adasum:
        if gradient_predivide_factor != 1.0 or num_groups or groups is not None or sparse_as_dense:
            raise ValueError("kolo.torch: op=Adasum takes none of gradient_predivide_factor, num_groups, groups "
                             "and sparse_as_dense")
        cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
                   dict(_DistributedAdasumOptimizer.__dict__))
        return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step, process_set)
    if num_groups and groups is not None:
        raise ValueError("kolo.torch: give num_groups or groups, not both")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step, op,
               gradient_predivide_factor, groups if groups is not None else (num_groups or None), sparse_as_dense,
               process_set)


def broadcast_parameters(params, root_rank):
    """Every rank gets root_rank's values: a state_dict, or (name, tensor) pairs."""
    items = sorted(params.items()) if isinstance(params, dict) else list(params)
    handles = []
    for name, p in items:
        if not isinstance(p, torch.Tensor):
            raise TypeError(f"kolo.torch: broadcast_parameters: {name} is a {type(p).__name__}, not a tensor")
        handles.append(_ops.broadcast_async_(p.data if p.requires_grad else p, root_rank, name=f"param.{name}"))
    for h in handles:
        _ops.synchronize(h)


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """Any picklable object, from root_rank to every rank (of the process set)."""
    me = _ops._state_rank(process_set)
    payload = pickle.dumps(obj) if me == root_rank else b""
    length = _ops.broadcast(torch.tensor([len(payload)], dtype=torch.int64), root_rank,
                            name=f"{name or 'object'}.length", process_set=process_set)
    buf = torch.zeros(int(length[0]), dtype=torch.uint8)
    if me == root_rank:
        buf.copy_(torch.frombuffer(bytearray(payload), dtype=torch.uint8))
    buf = _ops.broadcast(buf, root_rank, name=f"{name or 'object'}.data", process_set=process_set)
    return obj if me == root_rank else pickle.loads(buf.numpy().tobytes())


def allgather_object(obj, name=None, process_set=None):
    """Every rank's object (of the process set), in rank order."""
    payload = pickle.dumps(obj)
    lengths = _ops.allgather(torch.tensor([len(payload)], dtype=torch.int64), name=f"{name or 'object'}.lengths",
                             process_set=process_set)
    data = _ops.allgather(torch.frombuffer(bytearray(payload), dtype=torch.uint8) if payload
                          else torch.zeros(0, dtype=torch.uint8), name=f"{name or 'object'}.data",
                          process_set=process_set)
    out, at = [], 0
    for n in lengths.tolist():
        out.append(pickle.loads(data[at:at + n].numpy().tobytes()))
        at += n
    return out


def broadcast_optimizer_state(optimizer, root_rank, model=None):
    """Every rank gets root_rank's optimizer state (hyper-parameters and per-parameter
    state such as momentum), as Horovod's does. An optimizer that has not stepped yet has
    no per-parameter state: as Horovod, its trainable parameters get zero gradients (sparse
    ones for SparseAdam and for sparse embeddings of `model` under SGD) and it steps once
    locally (the wrapped optimizer's step: no allreduce) to create that state."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("kolo.torch: broadcast_optimizer_state cannot carry torch.optim.LBFGS state")
    if not optimizer.state_dict()["state"]:
        sparse = set()
        if model is not None:
            for m in model.modules():
                if isinstance(m, torch.nn.Embedding) and m.sparse:
                    sparse.update(id(p) for p in m.parameters())
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    p.grad = torch.zeros_like(p.data)
                    if isinstance(optimizer, torch.optim.SparseAdam) or (
                            isinstance(optimizer, torch.optim.SGD) and id(p) in sparse):
                        p.grad = p.grad.to_sparse()
        if getattr(optimizer, "_kolo_distributed", False):
            super(optimizer.__class__, optimizer).step()  # the wrapped optimizer's step
        else:
            optimizer.step()
    state = broadcast_object(optimizer.state_dict(), root_rank, name="optimizer_state")
    if _ops._state_rank() != root_rank:
        optimizer.load_state_dict(state)

