#!/usr/bin/env bash
# Starts NP ranks of a program as plain processes, as torchrun does (RANK, WORLD_SIZE; no
# kolorun, no KOLO_ADDR: the program's rank 0 makes the unique id and hosts the store), with
# a fresh private folder for the id (it holds the job's secret), and waits for all.
#   run_ranks.sh NP PROGRAM SCENARIO [ARGS...]    runs PROGRAM SCENARIO DIR [ARGS...]
# Every rank must exit 0, except, for "watchdog DIR kill", the last rank, which must have
# died by SIGKILL. Each rank gets 240 s.
set -uo pipefail
np=$1 program=$2 scenario=$3
shift 3
dir=$(mktemp -d "${TMPDIR:-/tmp}/kolo_pg.XXXXXX") || exit 1
chmod 700 "$dir"
trap 'rm -rf "$dir"' EXIT
unset KOLO_RANK KOLO_SIZE KOLO_ADDR KOLO_SECRET KOLO_LOCAL_RANK KOLO_LOCAL_SIZE
pids=()
for r in $(seq 0 $((np - 1))); do
  RANK=$r WORLD_SIZE=$np timeout 240 "$program" "$scenario" "$dir" "$@" > "$dir/rank$r.log" 2>&1 &
  pids+=($!)
done
failed=0
for r in $(seq 0 $((np - 1))); do
  wait "${pids[$r]}"
  rc=$?
  sed "s/^/[$r] /" "$dir/rank$r.log"
  want=0
  if [ "$scenario" = watchdog ] && [ "${1:-}" = kill ] && [ "$r" -eq $((np - 1)) ] && [ "$np" -gt 1 ]; then want=137; fi
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL: rank $r exited $rc, not $want (124 = hung)"
    failed=1
  fi
done
exit $failed
