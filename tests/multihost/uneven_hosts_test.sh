#!/usr/bin/env bash
# Hosts of unequal size (2 + 1 ranks): every rank must plan the same. Rank 1 has no peer of
# its local index on the other host; it skipped the network measurement and planned with
# other figures than ranks 0 and 2, which then ran other algorithms ("rank 0 sent 10920
# bytes ... but rank 1 expects 32768"). The worker's quick scenario on host buffers, and
# kolo-perf allreduce and reduce_scatter on the emulated device (staged), results checked.
#   uneven_hosts_test.sh KOLORUN WORKER KOLO_PERF PREFIX
set -euo pipefail
kolorun=$1 worker=$2 perf=$3 prefix=$4
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
hosts_up "$prefix" 2 --rate 2gbit
hosts="$PREFIX-h0:2,$PREFIX-h1:1"
export KOLO_TIMEOUT=60
out=$(timeout 500 "$kolorun" --timeout 400 --launcher "$LAUNCHER" -H "$hosts" "$worker" quick 2>&1) ||
  { tail -20 <<< "$out"; fail "quick on $hosts"; }
grep -q "rank 0: quick: [0-9]* checks, 0 failed" <<< "$out" || { tail -20 <<< "$out"; fail "quick: no verdict"; }
echo "ok: quick on $hosts"
for coll in allreduce reduce_scatter; do
  out=$(KOLO_DEVICE=emulated timeout 300 "$kolorun" --launcher "$LAUNCHER" -H "$hosts" "$perf" "$coll" -G \
        -b 8 -e 4M -f 8 -n 2 -w 1 2>&1) || { tail -20 <<< "$out"; fail "$coll -G on $hosts"; }
  grep -q "# Out of bounds values : 0 OK" <<< "$out" || { tail -20 <<< "$out"; fail "$coll -G: wrong results"; }
  echo "ok: $coll -G (staged) on $hosts"
done
