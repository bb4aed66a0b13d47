"""DistributedOptimizer(op=Adasum): Horovod's delta optimizer, over kolo's Adasum.

Adasum combines what each rank would change, not the raw gradients: each parameter is
stepped by the wrapped optimizer on this rank's own gradient (alone, as soon as autograd
has its gradient), the change (delta = after - before) is allreduced with op=Adasum, and
step() sets the parameter to before + the combined delta. So the learning rate to use is
one rank's (Horovod's guide says the same)."""

import contextlib

import torch

from kolo.torch import _ops
from kolo.torch._params import parameter_names


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    _kolo_distributed = True

    def __init__(self, params, named_parameters, compression, backward_passes_per_step, process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self._process_set = process_set
        self._included = process_set is None or process_set.included()
        all_params = [p for group in self.param_groups for p in group["params"]]
        self._names = parameter_names(self.param_groups, named_parameters, "adasum.noname")
        self._passes = backward_passes_per_step
        self._trainable = [p for p in all_params if p.requires_grad]
        self._delay = {p: backward_passes_per_step for p in self._trainable}
        self._start = {p: torch.zeros_like(p, requires_grad=False) for p in self._trainable}
        self._handles = {}  # parameter -> (handle, ctx)
        self._accumulators = []
        if self._included:
            for p in self._trainable:
                if p.grad is None:  # a gradient to step on even where autograd gives none
                    p.grad = torch.zeros_like(p)
                accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
                accumulator.register_hook(self._make_hook(p))
                self._accumulators.append(accumulator)

    def set_backward_passes_per_step(self, passes):
        self._passes = passes
        for p in self._delay:
            self._delay[p] = passes

    def _make_hook(self, p):
        def hook(*_):
            if p in self._handles and self._delay[p] <= 0:
                raise RuntimeError("kolo.torch: a gradient was computed twice before step(); with gradient "
                                   "accumulation, give backward_passes_per_step")
            self._delay[p] -= 1
            if self._delay[p] == 0:
                self._handles[p] = self._delta_async(p)
        return hook

    def _delta_async(self, p):
        """Steps the wrapped optimizer on p alone and enqueues the Adasum of its change."""
        start = self._start[p]
        start.copy_(p.data)
        saved = [group["params"] for group in self.param_groups]
        try:
            for group in self.param_groups:
                group["params"] = [q for q in group["params"] if q is p]
            super(self.__class__, self).step()
        finally:
            for group, params in zip(self.param_groups, saved):
                group["params"] = params
        p.data.sub_(start)  # p holds the delta until step()
        compressed, ctx = self._compression.compress(p.data)
        handle = _ops.allreduce_async_(compressed, name=f"adasum.{self._names[p]}", op=_ops.Adasum,
                                       process_set=self._process_set)
        return handle, ctx, compressed

    def synchronize(self):
        pass  # the deltas are waited for in step(), where they are applied

    @contextlib.contextmanager
    def skip_synchronize(self):
        raise RuntimeError("kolo.torch: skip_synchronize() has no meaning with op=Adasum (step() applies the "
                           "combined deltas)")
        yield  # pragma: no cover

    def step(self, closure=None):
        if not self._included:
            return super(self.__class__, self).step(closure)
        loss = closure() if closure is not None else None
        for p in self._trainable:  # a parameter autograd did not reach, or step() before the last pass
            if p not in self._handles:
                self._handles[p] = self._delta_async(p)
        for p, (handle, ctx, compressed) in self._handles.items():
            delta = self._compression.decompress(_ops.synchronize(handle), ctx)
            start = self._start[p]
            start.add_(delta.to(start.dtype))
            p.data.copy_(start)
            self._delay[p] = self._passes
        self._handles.clear()
        return loss

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise RuntimeError("kolo.torch: zero_grad() between backward() and step(): the deltas are being "
                               "allreduced")
        return super(self.__class__, self).zero_grad(*args, **kwargs)
