#!/usr/bin/env bash
# NCCL_DEBUG=INFO turns on kolo's INFO log and names the NCCL_* variables kolo ignores.
#   env_check.sh TEST_PROGRAM
set -uo pipefail
out=$(env -u KOLO_DEBUG NCCL_DEBUG=INFO NCCL_ALGO=ring NCCL_SOCKET_IFNAME=eth0 "$1" init_all 2>&1)
rc=$?
echo "$out" | tail -20
[[ $rc -eq 0 ]] || { echo "FAIL: init_all exited with $rc"; exit 1; }
grep -q 'ignoring NCCL_SOCKET_IFNAME NCCL_ALGO' <<<"$out" || { echo "FAIL: no INFO line naming the ignored variables"; exit 1; }
echo "PASS"
