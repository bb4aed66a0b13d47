#!/usr/bin/env bash
# The test program must load kolo's libnccl.so.2 (not NVIDIA's from /usr/local/cuda*/lib),
# and kolo's libnccl.so.2 must find libkolo by its own RUNPATH.
#   ldd_check.sh TEST_PROGRAM DROPIN_LIBRARY            linked with -lnccl against kolo's:
#                                                        found with no LD_LIBRARY_PATH at all
#   ldd_check.sh TEST_PROGRAM DROPIN_LIBRARY keep-env   linked against NVIDIA's: found through
#                                                        the LD_LIBRARY_PATH the caller set
set -uo pipefail
program=$1 expected=$(readlink -f "$2") mode=${3:-}
run_ldd() { if [[ "$mode" == keep-env ]]; then ldd "$1"; else env -u LD_LIBRARY_PATH ldd "$1"; fi; }
line=$(run_ldd "$program" | grep 'libnccl\.so\.2') || { echo "FAIL: $program does not load libnccl.so.2"; exit 1; }
echo "$line"
loaded=$(readlink -f "$(awk '{print $3}' <<<"$line")")
if [[ "$loaded" != "$expected" ]]; then
  echo "FAIL: libnccl.so.2 resolves to $loaded, expected kolo's drop-in $expected"
  exit 1
fi
# Not `ldd | grep -q`: grep -q stops reading, ldd dies of SIGPIPE, and pipefail fails the test.
deps=$(env -u LD_LIBRARY_PATH ldd "$2")
grep -q 'libkolo\.so\.0 => /' <<<"$deps" || { echo "FAIL: the drop-in does not find libkolo"; exit 1; }
echo "PASS: libnccl.so.2 is $loaded"
