#!/usr/bin/env bash
# A host unreachable from the start (its link to the bridge is down, so its packets go
# nowhere): the job must fail with an error naming its rank within KOLO_TIMEOUT,
# not hang until kolorun's --timeout (the outer guard, exit 124).
#   unreachable_test.sh KOLORUN WORKER PREFIX
set -euo pipefail
kolorun=$1 worker=$2 prefix=$3
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
hosts_up "$prefix" 2
ip link set "$prefix-v1" down   # host 1's cable pulled

start=$(date +%s)
rc=0
out=$(KOLO_TIMEOUT=20 timeout 300 "$kolorun" --timeout 200 --launcher "$LAUNCHER" \
      -H "$(host_list 2 1)" "$worker" quick 2>&1) || rc=$?
elapsed=$(( $(date +%s) - start ))
tail -5 <<< "$out"
[ "$rc" -ne 0 ] || fail "the job succeeded although host 1 was unreachable"
[ "$rc" -ne 124 ] || fail "hung until kolorun's --timeout"
# KOLO_TIMEOUT (20 s) plus room for a loaded machine.
[ "$elapsed" -lt 120 ] || fail "took ${elapsed}s to fail"
# Whichever side times out first: rank 0 waiting for rank 1, or rank 1 unable to reach
# the store; either names rank 1.
grep -qE "rank 1 is not alive|rank 1: cannot reach the store" <<< "$out" ||
  fail "the error does not name the rank that never joined"
echo "ok: unreachable host reported in ${elapsed}s, kolorun exit $rc"
