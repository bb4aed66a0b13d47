"""Horovod's horovod.common.exceptions on kolo: a collective that fails because a peer
failed raises HorovodInternalError (kolo's KoloError); elastic jobs raise
HostsUpdatedInterrupt when hosts come or go (kolo.torch.elastic)."""
from kolo._capi import KoloError as HorovodInternalError  # noqa: F401
from kolo.torch.elastic import HostsUpdatedInterrupt  # noqa: F401
