#!/usr/bin/env bash
# Many ranks on many test hosts (issue 46's scale scenario): H hosts of S ranks each,
#   1. the start-up probe (bench/scale): the first allreduce right, and per rank at most
#      2 log2 N + S + 4 sockets (lazy links: ring and tree neighbours, not every peer; the 4:
#      the stores' connections and the shared memory's socket);
#   2. every collective (the worker's "every_collective": each once, checked);
#   3. a 200-call soak (random collectives, dtypes, ops, counts, roots; bit for bit).
#   scale_test.sh KOLORUN WORKER SOAK PROBE PREFIX H S
set -euo pipefail
kolorun=$1 worker=$2 soak=$3 probe=$4 prefix=$5 n=$6 slots=$7
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
hosts_up "$prefix" "$n"
hosts=$(host_list "$n" "$slots")
np=$((n * slots))
ulimit -n 65536 2>/dev/null || true
run() { # run WHAT COMMAND...: kolorun over the hosts, its output in $out
  local what=$1 start rc=0
  shift
  start=$(date +%s)
  out=$(KOLO_TIMEOUT=120 timeout 600 "$kolorun" --timeout 500 --launcher "$LAUNCHER" -H "$hosts" "$@" 2>&1) || rc=$?
  [ "$rc" -eq 0 ] || { tail -30 <<< "$out"; fail "$what on $np ranks ($n hosts): kolorun exited $rc"; }
  echo "ok: $what, $np ranks on $n hosts, $(( $(date +%s) - start )) s"
}

run "start-up probe" "$probe"
line=$(grep -o '{"ranks".*}' <<< "$out") || fail "the probe printed no figures"
echo "$line"
sockets=$(sed -n 's/.*"sockets_max": \([0-9]*\).*/\1/p' <<< "$line")
limit=$(awk -v n="$np" -v s="$slots" 'BEGIN { printf "%d", 2 * log(n) / log(2) + s + 4 }')
[ "$sockets" -le "$limit" ] || fail "a rank holds $sockets sockets at $np ranks (at most $limit: 2 log2 N + $slots + 4)"

run "every collective" "$worker" every_collective
grep -q "rank 0: every_collective: [0-9]* checks, 0 failed" <<< "$out" || { tail -20 <<< "$out"; fail "every_collective: no verdict"; }

run "200-call soak" "$soak" 200
