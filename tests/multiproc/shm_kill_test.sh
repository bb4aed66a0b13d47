#!/usr/bin/env bash
# SIGKILL one of 4 ranks in the middle of a 256 MB allreduce over shared memory: the
# others must return an error well within KOLO_TIMEOUT, and kolo must leave nothing
# behind in /dev/shm (its segments are memfds, which never have a name there).
set -u
worker=$1
out=$(mktemp -d)
fail() { echo "FAIL: $*"; cat "$out"/* 2>/dev/null; rm -rf "$out"; exit 1; }
before=$(ls -A /dev/shm 2>/dev/null | sort)

export KOLO_TIMEOUT=60 KOLO_SIZE=4 KOLO_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
export KOLO_ADDR=127.0.0.1:$(( 20000 + RANDOM % 20000 ))
start=$(date +%s)
pids=()
for r in 0 1 2 3; do
  KOLO_RANK=$r timeout 120 "$worker" kill >"$out/rank$r.log" 2>&1 &
  pids+=($!)
done
codes=()
for r in 0 1 2 3; do wait "${pids[$r]}"; codes+=($?); done
elapsed=$(( $(date +%s) - start ))
cat "$out"/rank*.log
[ "${codes[1]}" -eq 137 ] || fail "rank 1 should have died of SIGKILL (137), got ${codes[1]}"
for r in 0 2 3; do
  [ "${codes[$r]}" -eq 0 ] || fail "rank $r exit ${codes[$r]} (124 = hung)"
  grep -q "rank $r: allreduce failed as expected" "$out/rank$r.log" || fail "rank $r did not report the error"
done
[ "$elapsed" -lt 40 ] || fail "took ${elapsed}s; KOLO_TIMEOUT is 60"
after=$(ls -A /dev/shm 2>/dev/null | sort)
[ "$before" = "$after" ] || fail "/dev/shm changed: before [$before] after [$after]"
echo "every surviving rank got an error in ${elapsed}s; /dev/shm unchanged"
rm -rf "$out"
