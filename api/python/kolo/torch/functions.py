"""Horovod's horovod.torch.functions on kolo: broadcasting a model's state and objects."""
from kolo.torch._optimizer import (allgather_object, broadcast_object, broadcast_optimizer_state,  # noqa: F401
                                   broadcast_parameters)
