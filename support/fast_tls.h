// KOLO_FAST_TLS: a thread-local variable that every call reads (a handle's last check, a
// group's depth, whether this thread runs a device host function), reached with one load
// from the thread pointer instead of a __tls_get_addr call through the shared library
// (the initial-exec model; about 5-10 ns a read saved on an 8-byte allreduce that takes a
// few hundred). A library loaded with dlopen (Python's ctypes) takes such variables from
// the small static TLS surplus glibc keeps for that, so only a few scalars use it: keep
// them few and small.
#pragma once

#define KOLO_FAST_TLS __attribute__((tls_model("initial-exec")))
