#!/usr/bin/env bash
# One rank exits in the middle of a 128 MB allreduce: every other rank must get an error
# well within KOLO_TIMEOUT (not a hang), and kolorun must exit non-zero.
set -u
kolorun=$1 worker=$2
out=$(mktemp)
start=$(date +%s)
KOLO_TIMEOUT=30 timeout 90 "$kolorun" -np 4 "$worker" fault >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
fail() { echo "FAIL: $*"; rm -f "$out"; exit 1; }
[ "$rc" -ne 0 ] || fail "kolorun exited 0 although rank 1 died"
[ "$rc" -ne 124 ] || fail "the job hung until the outer timeout"
for r in 0 2 3; do
  grep -q "rank $r: allreduce failed as expected" "$out" || grep -q "^\[$r\] rank $r: allreduce failed as expected" "$out" \
    || fail "rank $r did not report the error"
done
[ "$elapsed" -lt 30 ] || fail "took ${elapsed}s, not within KOLO_TIMEOUT"
echo "fault test passed in ${elapsed}s (kolorun exit $rc)"
rm -f "$out"
