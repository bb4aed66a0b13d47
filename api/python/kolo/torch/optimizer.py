"""Horovod's horovod.torch.optimizer on kolo."""
from kolo.torch._optimizer import DistributedOptimizer  # noqa: F401
