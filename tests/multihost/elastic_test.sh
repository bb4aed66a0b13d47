#!/usr/bin/env bash
# Elastic jobs across test hosts (kolorun --launcher, 3 hosts x 1 rank, KOLO_ELASTIC=1):
# A. The rank on host 2 is killed: the others go on, kolorun starts a new rank in the slot
#    the discovery script still lists there, and the rebuild lets it in (3 ranks again).
# B. Host 2's link goes down mid-allreduce and the script stops listing it: the two ranks
#    left rebuild without it (its live key stays on a half-open connection, so after
#    KOLO_TIMEOUT), and the job ends with exit 0.
#   elastic_test.sh KOLORUN WORKER PREFIX
set -euo pipefail
kolorun=$1 worker=$2 prefix=$3
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
hosts_up "$prefix" 3
hosts=$WORK/hosts.txt
host_list 3 1 | tr ',' '\n' >"$hosts"
export KOLO_TIMEOUT=10

log=$WORK/a.log
rc=0
timeout 200 "$kolorun" --launcher "$LAUNCHER" -H "$(host_list 3 1)" --min-np 2 \
  --host-discovery-script "cat $hosts" "$worker" rebuild >"$log" 2>&1 || rc=$?
tail -12 "$log"
[ "$rc" -eq 0 ] || fail "A: kolorun exited $rc"
[ "$(grep -c ': ok rebuild: rank . of 3' "$log")" -eq 2 ] || fail "A: the two survivors did not rebuild to 3 ranks"
grep -q "started rank 3 on $prefix-h2" "$log" || fail "A: no new rank on host 2"
grep -q "joiner: ok: rank 2 of 3" "$log" || fail "A: the new rank was not let in"
echo "A: a rank killed, a new one on its host let in: passed"

log=$WORK/b.log
: >"$log"
timeout 300 "$kolorun" --launcher "$LAUNCHER" -H "$(host_list 3 1)" --min-np 2 \
  --host-discovery-script "cat $hosts" "$worker" survive >"$log" 2>&1 &
job=$!
BG_PID=$job
sleep 3
host_list 2 1 | tr ',' '\n' >"$hosts"
ip link set "$prefix-v2" down
cut=$(date +%s)
rc=0
wait "$job" || rc=$?
BG_PID=''
elapsed=$(( $(date +%s) - cut ))
tail -12 "$log"
[ "$rc" -eq 0 ] || fail "B: kolorun exited $rc"
[ "$(grep -c ': ok survive: rank . of 2' "$log")" -eq 2 ] || fail "B: the two ranks left did not rebuild"
[ "$elapsed" -lt 60 ] || fail "B: took ${elapsed}s after the cut"
echo "B: a host cut off: the others rebuilt without it in ${elapsed}s: passed"
