#!/usr/bin/env bash
# libkolo and the NCCL drop-in load with dlopen, as Python's ctypes and a program linked
# against NVIDIA's libnccl load them: neither may be marked STATIC_TLS (an initial-exec
# thread-local does that, and a dlopen then needs the library's whole TLS segment in glibc's
# small surplus; the CUDA build's 4 KiB-aligned TLS did not fit), and each must open.
# usage: dlopen_test.sh LIBRARY...
set -euo pipefail
python=/usr/bin/python3
for lib in "$@"; do
  [ -f "$lib" ] || { echo "FAIL: no library at $lib"; exit 1; }
  if readelf -dW "$lib" | grep -q STATIC_TLS; then
    echo "FAIL: $(basename "$lib") is marked STATIC_TLS (an initial-exec thread-local?):"
    readelf -lW "$lib" | grep -w TLS
    exit 1
  fi
  "$python" -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1])' "$lib"
  echo "ok: $(basename "$lib") opens with dlopen, no STATIC_TLS"
done
