#!/usr/bin/env bash
# kolorun's elastic mode (--min-np/--max-np/--host-discovery-script) with the elastic worker:
# 1. 4 ranks, one killed: kolorun keeps the job, the discovery script's free slot gets a new
#    rank, the survivors rebuild with it, and the job exits 0.
# 2. 3 ranks with --min-np 3, one killed: kolorun stops the job, names the rank lost, and
#    exits with its status.
# 3. Bad bounds are usage errors.
set -u
kolorun=$1 worker=$2
out=$(mktemp -d)
fail() { echo "FAIL: $*"; cat "$out"/*.log 2>/dev/null; rm -rf "$out"; exit 1; }
export KOLO_TIMEOUT=20

printf '#!/bin/sh\necho localhost:4\n' >"$out/discover.sh"
chmod +x "$out/discover.sh"
timeout 120 "$kolorun" -np 4 --min-np 2 --host-discovery-script "$out/discover.sh" "$worker" rebuild >"$out/1.log" 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "1: kolorun exited $rc"
[ "$(grep -c ': ok rebuild: rank . of 4' "$out/1.log")" -eq 3 ] || fail "1: three survivors should have rebuilt to 4 ranks"
grep -q "joiner: ok: rank 3 of 4" "$out/1.log" || fail "1: the new rank was not let in"
grep -q "rank 3 on localhost killed by signal SIGKILL; 3 rank(s) run (--min-np 2)" "$out/1.log" || fail "1: no loss message"
grep -q "started rank 4 on localhost" "$out/1.log" || fail "1: kolorun did not start a rank in the free slot"
echo "1: a rank killed and one added: passed"

start=$(date +%s)
timeout 120 "$kolorun" -np 3 --min-np 3 "$worker" shrink >"$out/2.log" 2>&1
rc=$?
[ "$rc" -eq 137 ] || fail "2: kolorun exited $rc, not the lost rank's 137"
grep -q "fewer than --min-np 3 ranks run; stopping the job. Lost: rank 2" "$out/2.log" || fail "2: no message naming the lost rank"
[ $(( $(date +%s) - start )) -lt 30 ] || fail "2: took too long"
echo "2: below --min-np: passed"

"$kolorun" -np 3 --min-np 4 true >"$out/3.log" 2>&1
[ $? -eq 2 ] && grep -q "does not hold" "$out/3.log" || fail "3: --min-np above -np is not a usage error"
"$kolorun" -np 3 --max-np 2 true >"$out/3.log" 2>&1
[ $? -eq 2 ] || fail "3: --max-np below -np is not a usage error"
echo "kolorun elastic test passed"
rm -rf "$out"
