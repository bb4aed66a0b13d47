#!/usr/bin/env bash
# SIGKILL the last of 3 ranks while the others have device allreduces queued on a stream
# (emulated device): every survivor's stream must be released, and the peer's death
# reported as an async error, well within KOLO_TIMEOUT. Through device_ipc with its
# barriers as kernels and waited for on the host (KOLO_DEVICE_BARRIER), and staged
# (KOLO_DEVICE_IPC=0: the streams wait on the device for words the host plans release).
set -u
worker=$1
out=$(mktemp -d)
fail() { echo "FAIL: $*"; cat "$out"/* 2>/dev/null; rm -rf "$out"; exit 1; }
source "$(dirname "$0")/ranks_lib.sh"
export KOLO_TIMEOUT=30 KOLO_DEVICE=emulated
for barrier in kernel host staged; do
  if [ $barrier = staged ]; then export KOLO_DEVICE_IPC=0; else export KOLO_DEVICE_BARRIER=$barrier; fi
  run_ranks "$worker" device_kill 3 120 "$out"
  [ "${codes[2]}" -eq 137 ] || fail "$barrier barriers: rank 2 should have died of SIGKILL (137), got ${codes[2]}"
  for r in 0 1; do
    [ "${codes[$r]}" -eq 0 ] || fail "$barrier barriers: rank $r exit ${codes[$r]} (124 = hung)"
    grep -q "rank $r: stream released" "$out/rank$r.log" || fail "$barrier barriers: rank $r did not report its stream"
  done
  # Well under KOLO_TIMEOUT (30 s): the death is noticed, not waited out.
  [ "$elapsed" -lt 20 ] || fail "$barrier barriers: took ${elapsed}s"
  echo "$barrier barriers: survivors' streams released and the error reported in ${elapsed}s"
done
rm -rf "$out"
