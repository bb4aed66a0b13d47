#!/usr/bin/env bash
# One rank exits in the middle of a 128 MB allreduce.
# 1. Ranks started without kolorun (rank 0 hosts the store): every surviving rank must
#    return an error well within KOLO_TIMEOUT, not hang.
# 2. Under kolorun: kolorun must stop the job and exit non-zero within seconds.
set -u
kolorun=$1 worker=$2
out=$(mktemp -d)
fail() { echo "FAIL: $*"; cat "$out"/* 2>/dev/null; rm -rf "$out"; exit 1; }

source "$(dirname "$0")/ranks_lib.sh"
export KOLO_TIMEOUT=30
run_ranks "$worker" fault 4 90 "$out"
[ "${codes[1]}" -eq 7 ] || fail "rank 1 should have exited with 7, got ${codes[1]}"
check_survivors 4 "$out"
[ "$elapsed" -lt 30 ] || fail "took ${elapsed}s, not within KOLO_TIMEOUT"
echo "without kolorun: every surviving rank got an error in ${elapsed}s"

start=$(date +%s)
timeout 90 "$kolorun" -np 4 "$worker" fault >"$out/kolorun.log" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
tail -5 "$out/kolorun.log"
[ "$rc" -ne 0 ] || fail "kolorun exited 0 although rank 1 died"
[ "$rc" -ne 124 ] || fail "kolorun hung until the outer timeout"
[ "$elapsed" -lt 20 ] || fail "kolorun took ${elapsed}s to stop the job"
echo "kolorun stopped the job in ${elapsed}s with exit $rc"
echo "fault test passed"
rm -rf "$out"
