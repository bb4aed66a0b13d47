#!/usr/bin/env bash
# A job that needs more file descriptors than the process may open fails at start-up with
# the limit and the setting to change (issue 46), within its deadline: rank 0 and rank 1
# (KOLO_RANK/SIZE/ADDR) under a hard limit of 60 (see below why in two runs), then kolorun
# starting more ranks than its own limit allows.
#   fd_limit_test.sh PROBE KOLORUN
set -uo pipefail
probe=$1 kolorun=$2
fail() { echo "FAIL: $*"; exit 1; }
command -v prlimit >/dev/null || { echo "SKIP: no prlimit"; exit 77; }
export KOLO_SECRET
KOLO_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
# free_port: rank 0's port, below the ephemeral range. (A random port up to 39999 landed in
# it, where the suite's thousands of loopback connections in TIME_WAIT can make the port
# unbindable: "bind: Address already in use", 3 in 60 runs under load.)
source "$(dirname "$0")/ranks_lib.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Each rank checks its limit once the ranks' hosts are known, after the host's ranks joined
# the host's store, which rank 0 (the host's first rank) serves. With both ranks limited,
# rank 0 finds its limit and exits, closing that store, sometimes before rank 1 has joined it
# (2 in 40 runs under two busy loops): rank 1 then fails with the store lost, never reaching
# its own check. So two runs: both ranks limited (both must fail; rank 0, which waits on no
# one once the hosts are known, must name the limit), then rank 1 alone limited (rank 0 stays
# up, so rank 1 reaches its check and must name the limit).
#   run_rank R LIMIT: rank R of 2 on $port under a hard limit of LIMIT ("none": the shell's
#   own), its output in $dir/out.R. It execs the rank: call it in a subshell, ( ) or &.
run_rank() {
  local prl=()
  [ "$2" = none ] || prl=(prlimit --nofile="$2:$2")
  exec env KOLO_RANK="$1" KOLO_SIZE=2 KOLO_ADDR="127.0.0.1:$port" KOLO_TIMEOUT=20 \
    timeout 60 "${prl[@]}" "$probe" >"$dir/out.$1" 2>&1
}
names_limit() {
  grep -q "rank $1: a communicator of 2 ranks .* file descriptors here .* the limit is 60 (hard 60): raise it with \`ulimit -n\`" \
    "$dir/out.$1" || { tail -n +1 "$dir"/out.*; fail "rank $1 did not name the descriptor limit ($2)"; }
}
port=$(free_port)
run_rank 0 60 & pid0=$!
(run_rank 1 60) && { cat "$dir/out.1"; fail "rank 1 started under a limit of 60 (both ranks limited)"; }
wait $pid0 && { cat "$dir/out.0"; fail "rank 0 started under a limit of 60 (both ranks limited)"; }
names_limit 0 "both ranks limited"
# Rank 0 unlimited, waiting for rank 1's shared-memory entry, sees rank 1 leave (its live
# key goes with its store connection) and says so within about a second, well before its
# KOLO_TIMEOUT of 20 s.
port=$(free_port)
SECONDS=0
run_rank 0 none & pid0=$!
(run_rank 1 60) && { cat "$dir/out.1"; fail "rank 1 started under a limit of 60 (rank 1 alone limited)"; }
names_limit 1 "rank 1 alone limited"
wait $pid0 && { cat "$dir/out.0"; fail "rank 0 started without rank 1"; }
grep -q "rank 1 left the job during start-up" "$dir/out.0" || { cat "$dir/out.0"; fail "rank 0 did not say that rank 1 left"; }
[ "$SECONDS" -lt 10 ] || fail "rank 0 took $SECONDS s to see that rank 1 left (its KOLO_TIMEOUT is 20 s)"
out=$(bash -c "ulimit -Sn 80 && ulimit -Hn 80 && KOLO_TIMEOUT=20 timeout 60 '$kolorun' -np 64 '$probe'" 2>&1) && fail "64 ranks under a limit of 80 started"
grep -q "the limit is 80 (hard 80): raise it with \`ulimit -n\`" <<< "$out" || { echo "$out" | tail -5; fail "kolorun did not name its limit"; }
echo "ok: the descriptor limit is named at start-up, by the ranks and by kolorun"
