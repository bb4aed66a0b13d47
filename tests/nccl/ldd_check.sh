#!/usr/bin/env bash
# The test program, linked with -lnccl, must load kolo's libnccl.so.2 (not NVIDIA's from
# /usr/local/cuda*/lib), with nothing on LD_LIBRARY_PATH.
#   ldd_check.sh TEST_PROGRAM DROPIN_LIBRARY
set -uo pipefail
program=$1 expected=$(readlink -f "$2")
line=$(env -u LD_LIBRARY_PATH ldd "$program" | grep 'libnccl\.so\.2') || { echo "FAIL: $program does not load libnccl.so.2"; exit 1; }
echo "$line"
loaded=$(readlink -f "$(awk '{print $3}' <<<"$line")")
if [[ "$loaded" != "$expected" ]]; then
  echo "FAIL: libnccl.so.2 resolves to $loaded, expected kolo's drop-in $expected"
  exit 1
fi
# And libkolo through the drop-in's RUNPATH.
env -u LD_LIBRARY_PATH ldd "$2" | grep -q 'libkolo\.so\.0 => /' || { echo "FAIL: the drop-in does not find libkolo"; exit 1; }
echo "PASS: libnccl.so.2 is $loaded"
