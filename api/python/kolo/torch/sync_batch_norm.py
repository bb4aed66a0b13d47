"""Horovod's SyncBatchNorm: batch normalisation whose statistics are those of the batch
over all ranks (of a process set), for models whose per-rank batches are too small.

Forward: every rank sums its count, sum and sum of squares per channel; one allreduce
gives the global mean and (biased) variance. Backward: the sums of dy and dy * x-hat per
channel are allreduced too, since every input's gradient depends on the whole batch; the
weight and bias gradients stay local (the optimizer's allreduce combines them)."""
import torch

from kolo.torch import _ops


class _SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, momentum, process_set):
        dims = [d for d in range(x.dim()) if d != 1]
        xd = x.double()
        local = torch.cat([torch.tensor([x.numel() / x.shape[1]], dtype=torch.float64), xd.sum(dims),
                           (xd * xd).sum(dims)])
        total = _ops.allreduce(local, op=_ops.Sum, name=None, process_set=process_set)
        c = x.shape[1]
        count, mean = total[0], total[1:1 + c] / total[0]
        var = (total[1 + c:] / count - mean * mean).clamp_min(0)
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(momentum * mean.to(running_mean.dtype))
            unbiased = var * count / max(count.item() - 1, 1)
            running_var.mul_(1 - momentum).add_(momentum * unbiased.to(running_var.dtype))
        shape = [1, c] + [1] * (x.dim() - 2)
        invstd = (var + eps).rsqrt()
        xhat = ((xd - mean.view(shape)) * invstd.view(shape)).to(x.dtype)
        y = xhat
        if weight is not None:
            y = xhat * weight.view(shape) + bias.view(shape)
        ctx.save_for_backward(xhat, weight, invstd.to(x.dtype), count)
        ctx.dims, ctx.shape, ctx.ps = dims, shape, process_set
        return y

    @staticmethod
    def backward(ctx, dy):
        xhat, weight, invstd, count = ctx.saved_tensors
        dims, shape = ctx.dims, ctx.shape
        sum_dy = dy.sum(dims)
        sum_dy_xhat = (dy * xhat).sum(dims)
        both = _ops.allreduce(torch.cat([sum_dy, sum_dy_xhat]).double(), op=_ops.Sum, name=None, process_set=ctx.ps)
        c = dy.shape[1]
        g_dy, g_dy_xhat = both[:c].to(dy.dtype), both[c:].to(dy.dtype)
        scale = invstd if weight is None else invstd * weight
        dx = scale.view(shape) * (dy - g_dy.view(shape) / count.to(dy.dtype) -
                                  xhat * g_dy_xhat.view(shape) / count.to(dy.dtype))
        dweight = sum_dy_xhat if weight is not None else None
        dbias = sum_dy if weight is not None else None
        return dx, dweight, dbias, None, None, None, None, None


class SyncBatchNorm(torch.nn.modules.batchnorm._BatchNorm):
    """A drop-in for torch.nn.BatchNorm{1,2,3}d that normalises with the statistics of
    the batch over all ranks while training (in eval mode with the running statistics, as
    BatchNorm; without running statistics, the batch's over all ranks in both)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_set=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_set = process_set

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"kolo.torch: SyncBatchNorm expects at least 2 dimensions, got {input.dim()}")

    def forward(self, input):
        self._check_input_dim(input)
        if not self.training and self.track_running_stats:
            return torch.nn.functional.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                                                  False, 0.0, self.eps)
        if self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
        momentum = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
        return _SyncBatchNormFunction.apply(input, self.weight, self.bias,
                                            self.running_mean if self.track_running_stats else None,
                                            self.running_var if self.track_running_stats else None, self.eps,
                                            momentum, self.process_set)
