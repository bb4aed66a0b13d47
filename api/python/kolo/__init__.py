"""kolo: collective communication for GPU clusters and CPU hosts.

`import kolo.torch as hvd` gives Horovod's PyTorch API on kolo (kolo/torch). This module
holds what every adapter shares: the C library (kolo._capi) and its errors.
"""
from kolo._capi import KoloError  # noqa: F401

__all__ = ["KoloError"]
