#!/usr/bin/env bash
# A short KOLO_TIMEOUT is the whole start-up's: with KOLO_TIMEOUT=1, a rank that starts 0.3 s
# after the others still joins (the start-up kept a fixed second for its error's diagnosis,
# and the store's gather half of what was left, so this failed), and one that never starts
# is named within a few seconds.
set -u
worker=$1
out=$(mktemp -d)
fail() { echo "FAIL: $*"; rm -rf "$out"; exit 1; }

source "$(dirname "$0")/ranks_lib.sh"
export KOLO_TIMEOUT=1
LATE_RANK=2 LATE_S=0.3 run_ranks "$worker" quick 3 60 "$out" >/dev/null
for r in 0 1 2; do
  [ "${codes[$r]}" -eq 0 ] || { cat "$out"/rank*.log; fail "rank $r exit ${codes[$r]} with rank 2 0.3 s late"; }
done
echo "rank 2 0.3 s late under KOLO_TIMEOUT=1: every rank ran"

# Rank 2 comes after the others gave up (its own start then fails: the store, rank 0's, is
# gone). Rank 0 names it; rank 1 may find rank 0's store closed before it asks who is missing.
LATE_RANK=2 LATE_S=1.5 run_ranks "$worker" quick 3 8 "$out" >/dev/null
grep -q "rank 2 is not alive" "$out/rank0.log" || { cat "$out"/rank*.log; fail "rank 0 did not name rank 2, which never came"; }
for r in 0 1; do
  [ "${codes[$r]}" -ne 0 ] && [ "${codes[$r]}" -ne 124 ] || { cat "$out"/rank*.log; fail "rank $r exit ${codes[$r]} (124 = hung)"; }
done
[ "$elapsed" -lt 8 ] || fail "took ${elapsed}s"
echo "rank 2 too late: ranks 0 and 1 failed, rank 0 naming it"
rm -rf "$out"
