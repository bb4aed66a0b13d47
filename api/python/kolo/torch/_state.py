"""The process's kolo world for kolo.torch: made by init(), destroyed by shutdown()."""
import atexit
import ctypes

from kolo import _capi

comm = None  # kolo_comm_t of the world, or None before init()


def require():
    if comm is None:
        raise ValueError("kolo.torch has not been initialised; call kolo.torch.init() first")
    return comm


def init():
    global comm
    if comm is not None:
        return
    out = ctypes.c_void_p()
    _capi.check(_capi.lib.kolo_init(ctypes.byref(out)))
    comm = out
    atexit.register(shutdown)


def shutdown():
    global comm
    if comm is None:
        return
    made, comm = comm, None
    _capi.check(_capi.lib.kolo_comm_destroy(made))
