#!/usr/bin/env bash
# Elastic communicators with plain processes (rank 0 hosts the store, as under mpirun):
#   elastic_test.sh WORKER shrink NP       a rank is killed; the others shrink and go on
#   elastic_test.sh WORKER shrink_list NP  the last rank leaves; the others shrink it out
#   elastic_test.sh WORKER rebuild NP      KOLO_ELASTIC=1: a rank is killed, one comes late
#                                          (refused), a joiner is let in at the rebuild
#   elastic_test.sh WORKER decider_dies 4  KOLO_ELASTIC=1: a rank is killed, then rank 1,
#                                          deciding the rebuild, is killed by this script
# Every rank but the victim must pass its checks (elastic_worker.cc); none may hang.
set -u
worker=$1 scenario=$2 np=$3
out=$(mktemp -d)
fail() { echo "FAIL: $*"; tail -n 30 "$out"/* 2>/dev/null; rm -rf "$out"; exit 1; }
source "$(dirname "$0")/ranks_lib.sh"

export KOLO_TIMEOUT=${KOLO_TIMEOUT:-20}
export KOLO_SIZE=$np KOLO_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
export KOLO_ADDR=127.0.0.1:$(free_port)
victim=$((np - 1))
late=-1
[ "$scenario" = decider_dies ] && export KOLO_ELASTIC=1
if [ "$scenario" = rebuild ]; then
  export KOLO_ELASTIC=1
  # The late rank comes after the others agreed: they wait KOLO_TIMEOUT for it at most.
  [ "$np" -ge 4 ] && late=$((np - 2))
  export KOLO_TIMEOUT=4 KOLO_TEST_LATE=$late KOLO_TEST_LATE_SECONDS=8
fi
export KOLO_TEST_VICTIM=$victim
pids=()
for r in $(seq 0 $((np - 1))); do
  KOLO_RANK=$r timeout 120 "$worker" "$scenario" >"$out/rank$r.log" 2>&1 &
  pids+=($!)
done
joiner=
if [ "$scenario" = rebuild ]; then
  sleep 1
  env -u KOLO_RANK -u KOLO_SIZE KOLO_ELASTIC=join timeout 120 "$worker" join >"$out/joiner.log" 2>&1 &
  joiner=$!
fi
if [ "$scenario" = decider_dies ]; then  # rank 1 decides, waiting for the others: kill it then
  for _ in $(seq 1 500); do grep -q "rank 1: rebuilding" "$out/rank1.log" && break; sleep 0.02; done
  sleep 0.5
  pkill -KILL -P "${pids[1]}" 2>/dev/null || kill -KILL "${pids[1]}"
fi
codes=()
for r in $(seq 0 $((np - 1))); do wait "${pids[$r]}"; codes+=($?); done
jcode=0
[ -n "$joiner" ] && { wait "$joiner"; jcode=$?; }
cat "$out"/*.log
for r in $(seq 0 $((np - 1))); do
  if [ "$scenario" = decider_dies ] && [ "$r" -eq 1 ]; then
    [ "${codes[$r]}" -eq 137 ] || fail "the decider (rank 1) exited ${codes[$r]}, not killed"
    continue
  fi
  if [ "$scenario" != shrink_list ] && [ "$r" -eq "$victim" ]; then
    [ "${codes[$r]}" -eq 137 ] || fail "the victim (rank $r) exited ${codes[$r]}, not killed"
    continue
  fi
  [ "${codes[$r]}" -eq 0 ] || fail "rank $r exited ${codes[$r]} (124 = hung)"
  grep -q "rank $r: ok $scenario" "$out/rank$r.log" || fail "rank $r did not pass its checks"
done
if [ -n "$joiner" ]; then
  [ "$jcode" -eq 0 ] || fail "the joiner exited $jcode"
  grep -q "joiner: ok" "$out/joiner.log" || fail "the joiner did not pass its checks"
fi
echo "elastic $scenario on $np ranks passed"
rm -rf "$out"
