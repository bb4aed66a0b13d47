"""kolo's C API (api/include/kolo/kolo.h) through ctypes: the library, its prototypes and
its error convention. The library is KOLO_LIBRARY when set, else the libkolo.so beside this
package or in the library directory it is installed under, else the system's."""
import ctypes
import ctypes.util
import glob
import os

# kolo_result_t
SUCCESS, IN_PROGRESS, ERR_INVALID_ARGUMENT, ERR_INVALID_USAGE = 0, 1, 2, 3
RESULT_NAMES = ["SUCCESS", "IN_PROGRESS", "ERR_INVALID_ARGUMENT", "ERR_INVALID_USAGE", "ERR_MISMATCH",
                "ERR_REMOTE", "ERR_TIMEOUT", "ERR_ABORTED", "ERR_UNSUPPORTED", "ERR_SYSTEM", "ERR_INTERNAL"]
# kolo_dtype_t
(INT8, UINT8, INT32, UINT32, INT64, UINT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64, FLOAT8_E4M3,
 FLOAT8_E5M2, DTYPE_COUNT) = range(13)
# kolo_op_t
OP_SUM, OP_PROD, OP_MIN, OP_MAX, OP_AVG, OP_ADASUM = range(6)


class KoloError(RuntimeError):
    """A kolo call failed: `code` is the kolo_result_t, the message kolo_last_error()."""

    def __init__(self, code, message):
        self.code = code
        name = RESULT_NAMES[code] if 0 <= code < len(RESULT_NAMES) else str(code)
        super().__init__(f"kolo: KOLO_{name}: {message}")


class KoloUsageError(KoloError, ValueError):
    """A call refused for its arguments or its use (KOLO_ERR_INVALID_ARGUMENT or
    KOLO_ERR_INVALID_USAGE: a name already in flight, say), on this rank alone: also a
    ValueError, as Horovod raises for those."""


def error_for(code, message):
    """The exception for a failed kolo call."""
    cls = KoloUsageError if code in (ERR_INVALID_ARGUMENT, ERR_INVALID_USAGE) else KoloError
    return cls(code, message)


def _find_library():
    explicit = os.environ.get("KOLO_LIBRARY")
    if explicit:
        return explicit
    here = os.path.dirname(os.path.abspath(__file__))
    # Beside the package (pip install carries it), or where cmake --install put both:
    # <prefix>/lib/python3.X/dist-packages/kolo and <prefix>/lib[/<multiarch>]/libkolo.so.
    lib = os.path.join(here, "..", "..", "..")
    for pattern in (os.path.join(here, "libkolo.so*"), os.path.join(lib, "libkolo.so*"),
                    os.path.join(lib, "*-linux-gnu", "libkolo.so*")):
        beside = sorted(glob.glob(pattern))
        if beside:
            return beside[0]
    found = ctypes.util.find_library("kolo")
    if found:
        return found
    raise ImportError("kolo: libkolo.so not found: set KOLO_LIBRARY to its path, or install kolo "
                      "(the library is installed beside this package)")


def _load():
    path = _find_library()
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        where = "KOLO_LIBRARY=" + path if os.environ.get("KOLO_LIBRARY") else path
        raise ImportError(f"kolo: cannot load libkolo ({where}): {e}") from None


lib = _load()


class CollOptions(ctypes.Structure):
    _fields_ = [("prescale", ctypes.c_double), ("postscale", ctypes.c_double), ("wire_dtype", ctypes.c_int),
                ("algorithm", ctypes.c_int)]


COMPLETION_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)
ALLOC_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
                            ctypes.c_int)


class EnqueueOptions(ctypes.Structure):
    _fields_ = [("prescale", ctypes.c_double), ("postscale", ctypes.c_double), ("wire_dtype", ctypes.c_int),
                ("callback", COMPLETION_FN), ("callback_data", ctypes.c_void_p), ("alloc", ALLOC_FN),
                ("alloc_data", ctypes.c_void_p), ("stream", ctypes.c_void_p), ("ndim", ctypes.c_int),
                ("shape", ctypes.POINTER(ctypes.c_int64))]


def enqueue_options(prescale=1.0, postscale=1.0, alloc=None, stream=None, wire=None, shape=None):
    """stream: for device tensors, the stream producing them (the runtime waits for its
    work so far); wire: FLOAT16, BFLOAT16 or FLOAT8_* to compress a FLOAT32 allreduce;
    shape: dimensions every rank must give alike (the whole shape, or a row's for allgather
    and alltoall), a mismatch failing the operation on every rank."""
    o = EnqueueOptions()
    if shape is not None:
        o._shape = (ctypes.c_int64 * max(len(shape), 1))(*[int(d) for d in shape])  # kept alive by o
        o.ndim, o.shape = len(shape), o._shape
    o.prescale, o.postscale = prescale, postscale
    o.wire_dtype = DTYPE_COUNT if wire is None else wire
    o.callback = COMPLETION_FN()
    o.alloc = alloc if alloc is not None else ALLOC_FN()
    o.stream = stream
    return o


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


_c = ctypes.c_void_p
_sz = ctypes.c_size_t
_i = ctypes.c_int
_PROTOTYPES = {
    "kolo_last_error": (ctypes.c_char_p, []),
    "kolo_init": (_i, [ctypes.POINTER(_c)]),
    "kolo_comm_destroy": (_i, [_c]),
    "kolo_comm_abort": (_i, [_c]),
    "kolo_comm_split": (_i, [_c, _i, _i, ctypes.POINTER(_c)]),
    # Elastic jobs (kolo.torch.elastic).
    "kolo_comm_shrink": (_i, [_c, ctypes.POINTER(_i), _i, ctypes.POINTER(_c)]),
    "kolo_comm_rebuild": (_i, [_c, ctypes.POINTER(_c)]),
    "kolo_comm_epoch": (_i, [_c]),
    "kolo_comm_pending_joiners": (_i, [_c, ctypes.POINTER(_i)]),
    "kolo_comm_leaving": (_i, [_c, ctypes.POINTER(_i)]),
    "kolo_comm_worker_id": (_i, [_c, ctypes.c_char_p, _sz]),
    "kolo_comm_rank": (_i, [_c]),
    "kolo_comm_size": (_i, [_c]),
    "kolo_comm_local_rank": (_i, [_c]),
    "kolo_comm_local_size": (_i, [_c]),
    "kolo_comm_cross_rank": (_i, [_c]),
    "kolo_comm_cross_size": (_i, [_c]),
    "kolo_barrier": (_i, [_c]),
    "kolo_allreduce_ex": (_i, [_c, _c, _sz, _i, _i, ctypes.POINTER(CollOptions), _c, _c]),
    "kolo_broadcast": (_i, [_c, _c, _sz, _i, _i, _c, _c]),
    "kolo_get_unique_id": (_i, [ctypes.POINTER(UniqueId)]),
    "kolo_comm_init_rank": (_i, [ctypes.POINTER(_c), _i, ctypes.POINTER(UniqueId), _i]),
    "kolo_allreduce": (_i, [_c, _c, _sz, _i, _i, _c, _c]),
    "kolo_reduce": (_i, [_c, _c, _sz, _i, _i, _i, _c, _c]),
    "kolo_allgather": (_i, [_c, _c, _sz, _i, _c, _c]),
    "kolo_allgatherv": (_i, [_c, _sz, _c, ctypes.POINTER(_sz), ctypes.POINTER(_sz), _i, _c, _c]),
    "kolo_reduce_scatter": (_i, [_c, _c, _sz, _i, _i, _c, _c]),
    "kolo_alltoall": (_i, [_c, _c, _sz, _i, _c, _c]),
    "kolo_send": (_i, [_c, _sz, _i, _i, _c, _c]),
    "kolo_recv": (_i, [_c, _sz, _i, _i, _c, _c]),
    "kolo_group_start": (_i, []),
    "kolo_group_end": (_i, []),
    "kolo_enqueue_allreduce": (_i, [ctypes.c_char_p, _c, _c, _sz, _i, _i, ctypes.POINTER(EnqueueOptions), _c,
                                    ctypes.POINTER(_c)]),
    "kolo_enqueue_allreduce_group": (_i, [ctypes.c_char_p, _i, ctypes.POINTER(_c), ctypes.POINTER(_c),
                                          ctypes.POINTER(_sz), _i, _i, ctypes.POINTER(EnqueueOptions), _c,
                                          ctypes.POINTER(_c)]),
    "kolo_enqueue_allgather": (_i, [ctypes.c_char_p, _c, _sz, _sz, _i, ctypes.POINTER(EnqueueOptions), _c,
                                    ctypes.POINTER(_c)]),
    "kolo_enqueue_broadcast": (_i, [ctypes.c_char_p, _c, _sz, _i, _i, ctypes.POINTER(EnqueueOptions), _c,
                                    ctypes.POINTER(_c)]),
    "kolo_enqueue_alltoall": (_i, [ctypes.c_char_p, _c, ctypes.POINTER(_sz), _i, ctypes.POINTER(EnqueueOptions),
                                   _c, ctypes.POINTER(_c)]),
    "kolo_enqueue_reduce_scatter": (_i, [ctypes.c_char_p, _c, _c, _sz, _i, _i, ctypes.POINTER(EnqueueOptions), _c,
                                         ctypes.POINTER(_c)]),
    "kolo_test": (_i, [_c]),
    "kolo_wait": (_i, [_c]),
    "kolo_request_free": (_i, [_c]),
    "kolo_join": (_i, [_c, ctypes.POINTER(_i)]),
    "kolo_timeline_start": (_i, [_c, ctypes.c_char_p]),
    "kolo_timeline_stop": (_i, [_c]),
    "kolo_comm_dump": (_i, [_c, ctypes.c_char_p]),
    "kolo_comm_set_timeout": (_i, [_c, ctypes.c_double]),
}
for _name, (_res, _args) in _PROTOTYPES.items():
    _f = getattr(lib, _name)
    _f.restype, _f.argtypes = _res, _args


def last_error():
    text = lib.kolo_last_error()
    return text.decode(errors="replace") if text else ""


def check(result):
    """Raises KoloError for anything but KOLO_SUCCESS; returns the result otherwise."""
    if result != SUCCESS:
        raise error_for(result, last_error())
    return result
