#!/usr/bin/env bash
# Where the job secret goes and where it must not: started by kolorun and outside it, with
# every log on (KOLO_DEBUG=TRACE), the secret must appear in no output and no command line
# (secret_probe checks /proc/*/cmdline from inside each rank); each kolorun job gets its
# own; a rank with another secret is refused in words while the real ranks still meet; a
# missing or short secret is refused before anything listens.
# Usage: secret_exposure_test.sh KOLORUN SECRET_PROBE
set -u
KOLORUN=$1
PROBE=$2
DIR=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$DIR"' EXIT
failed=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failed=1; }
export KOLO_TIMEOUT=30

# Output of a job must not hold any secret in $DIR/secret.* (as hex, as the rank saw it).
no_secret_in() {
  local file=$1 what=$2 s
  for s in "$DIR"/secret.* "$DIR"/given.*; do
    [ -s "$s" ] || continue
    if grep -qF -f "$s" "$file"; then fail "$what: a secret appears in the output"; return; fi
  done
  pass "$what: no secret in the output ($(wc -l <"$file") lines)"
}

# 1. kolorun, two ranks over TCP links, every log on.
mkdir "$DIR/job1"
if SEC_DIR="$DIR/job1" KOLO_DEBUG=TRACE KOLO_TRANSPORTS=tcp "$KOLORUN" -np 2 "$PROBE" --store-loopback \
    >"$DIR/job1.out" 2>&1; then
  pass "kolorun job: ranks met, no secret on a command line, no listener left, store on 127.0.0.1"
else
  fail "kolorun job failed: $(cat "$DIR/job1.out" | grep -E 'FAIL|rror' | head -5)"
fi
grep -q "over tcp" "$DIR/job1.out" || fail "TRACE logs did not show the tcp links (were logs on?)"
cp "$DIR/job1/secret.0" "$DIR/secret.job1" 2>/dev/null
no_secret_in "$DIR/job1.out" "kolorun job with KOLO_DEBUG=TRACE"

# 2. A second job gets a secret of its own.
mkdir "$DIR/job2"
SEC_DIR="$DIR/job2" "$KOLORUN" -np 2 "$PROBE" >"$DIR/job2.out" 2>&1 || fail "second kolorun job failed"
if [ -s "$DIR/job1/secret.0" ] && [ -s "$DIR/job2/secret.0" ] && ! cmp -s "$DIR/job1/secret.0" "$DIR/job2/secret.0"; then
  pass "each kolorun job has its own secret"
else
  fail "two kolorun jobs had the same (or no) secret"
fi
cmp -s "$DIR/job1/secret.0" "$DIR/job1/secret.1" || fail "the ranks of one job had different secrets"

# 3. Outside kolorun: rank 0 hosts the store; an intruder with another secret is refused
#    with a clear error, then the real rank 1 joins and the allreduce runs.
good=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
bad=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
printf '%s' "$good" >"$DIR/given.good"
printf '%s' "$bad" >"$DIR/given.bad"
# A port below the ephemeral range, free now (ranks_lib.sh): one up to 39999 could fall in
# it, where the suite's loopback connections in TIME_WAIT make a port unbindable.
source "$(dirname "$0")/../multiproc/ranks_lib.sh"
port=$(free_port)
export KOLO_SIZE=2 KOLO_ADDR=127.0.0.1:$port KOLO_DEBUG=TRACE
mkdir "$DIR/job3"
# (KOLO_ADDR is a literal address of this machine, so rank 0's store listens there alone.)
SEC_DIR="$DIR/job3" KOLO_RANK=0 KOLO_SECRET=$good "$PROBE" --store-loopback >"$DIR/rank0.out" 2>&1 &
rank0=$!
sleep 1
if SEC_DIR="$DIR/job3" KOLO_RANK=1 KOLO_SECRET=$bad timeout 20 "$PROBE" >"$DIR/intruder.out" 2>&1; then
  fail "a rank with another secret joined"
elif grep -q "is KOLO_SECRET the same on every rank?" "$DIR/intruder.out"; then
  pass "a rank with another secret is refused: $(grep -m1 -o 'refused this rank[^(]*' "$DIR/intruder.out")"
else
  fail "the refused rank did not say why: $(tail -3 "$DIR/intruder.out")"
fi
if SEC_DIR="$DIR/job3" KOLO_RANK=1 KOLO_SECRET=$good "$PROBE" --store-loopback >"$DIR/rank1.out" 2>&1 && wait $rank0; then
  pass "after the refusal the real ranks still met; rank 0's stores listened on 127.0.0.1 alone"
else
  fail "the real ranks did not meet after the refusal: $(tail -3 "$DIR/rank0.out" "$DIR/rank1.out")"
fi
grep -q "dropped connection" "$DIR/rank0.out" && pass "rank 0's store logged the dropped connection" ||
  fail "rank 0's store did not log the dropped connection"
cat "$DIR/rank0.out" "$DIR/intruder.out" "$DIR/rank1.out" >"$DIR/job3.out"
no_secret_in "$DIR/job3.out" "ranks outside kolorun with KOLO_DEBUG=TRACE, one refused"

# 4. A missing or short secret is refused with a message that says how to set it.
unset KOLO_DEBUG
msg=$(env -u KOLO_SECRET KOLO_RANK=1 timeout 20 "$PROBE" 2>&1)
echo "$msg" | grep -q "KOLO_SECRET is not set" && pass "a missing KOLO_SECRET is refused" ||
  fail "a missing KOLO_SECRET was not refused clearly: $msg"
msg=$(KOLO_SECRET=abcd KOLO_RANK=1 timeout 20 "$PROBE" 2>&1)
echo "$msg" | grep -q "at least 32 hex digits" && pass "a short KOLO_SECRET is refused" ||
  fail "a short KOLO_SECRET was not refused clearly: $msg"

exit $failed
