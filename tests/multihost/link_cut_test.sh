#!/usr/bin/env bash
# A link cut in the middle of a collective: 2 hosts x 2 ranks run large allreduces
# (kolo-perf, more iterations than could finish), host 1's link goes down, and every rank
# must error out (kolorun exits non-zero) within KOLO_TIMEOUT and some slack, instead of
# hanging until kolorun's --timeout (exit 124).
#   link_cut_test.sh KOLORUN KOLO_PERF PREFIX
set -euo pipefail
kolorun=$1 perf=$2 prefix=$3
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
hosts_up "$prefix" 2
log=$WORK/job.log
: >"$log"

KOLO_TIMEOUT=20 timeout 400 "$kolorun" --timeout 300 --launcher "$LAUNCHER" -H "$(host_list 2 2)" \
  "$perf" allreduce -b 16M -e 16M -n 1000000 -w 1 >"$log" 2>&1 &
job=$!
BG_PID=$job
# kolo-perf lists every rank once all are connected; the allreduces start right after.
for _ in $(seq 1 1200); do
  grep -q "Rank  3 .* on *$prefix-h1" "$log" && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
grep -q "Rank  3 .* on *$prefix-h1" "$log" || { cat "$log"; fail "the job did not start"; }
sleep 2
ip link set "$prefix-v1" down   # mid-allreduce
cut=$(date +%s)
rc=0
wait "$job" || rc=$?
# shellcheck disable=SC2034  # read by hosts_down (lib.sh)
BG_PID=''
elapsed=$(( $(date +%s) - cut ))
tail -8 "$log"
[ "$rc" -ne 0 ] || fail "the job succeeded across a cut link"
[ "$rc" -ne 124 ] || fail "hung until kolorun's --timeout"
[ "$elapsed" -lt 120 ] || fail "took ${elapsed}s after the cut to fail"
grep -qE "allreduce failed|timed out" "$log" || fail "no rank reported the failed allreduce"
echo "ok: ranks errored out ${elapsed}s after the cut, kolorun exit $rc"
