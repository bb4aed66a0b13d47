#!/usr/bin/env bash
# A job that needs more file descriptors than the process may open fails at start-up with
# the limit and the setting to change (issue 46), on every rank, within its deadline:
# two ranks (KOLO_RANK/SIZE/ADDR) under a hard limit of 60, then kolorun starting more ranks
# than its own limit allows.
#   fd_limit_test.sh PROBE KOLORUN
set -uo pipefail
probe=$1 kolorun=$2
fail() { echo "FAIL: $*"; exit 1; }
command -v prlimit >/dev/null || { echo "SKIP: no prlimit"; exit 77; }
export KOLO_SECRET
KOLO_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
port=$((20000 + RANDOM % 20000))
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for r in 0 1; do
  KOLO_RANK=$r KOLO_SIZE=2 KOLO_ADDR=127.0.0.1:$port KOLO_TIMEOUT=20 timeout 60 \
    prlimit --nofile=60:60 "$probe" >"$dir/out.$r" 2>&1 &
done
wait
for r in 0 1; do
  grep -q "rank $r: a communicator of 2 ranks .* file descriptors here .* the limit is 60 (hard 60): raise it with \`ulimit -n\`" \
    "$dir/out.$r" || { cat "$dir/out.$r"; fail "rank $r did not name the descriptor limit"; }
done
out=$(bash -c "ulimit -Sn 80 && ulimit -Hn 80 && KOLO_TIMEOUT=20 timeout 60 '$kolorun' -np 64 '$probe'" 2>&1) && fail "64 ranks under a limit of 80 started"
grep -q "the limit is 80 (hard 80): raise it with \`ulimit -n\`" <<< "$out" || { echo "$out" | tail -5; fail "kolorun did not name its limit"; }
echo "ok: the descriptor limit is named at start-up, by the ranks and by kolorun"
