#!/usr/bin/env bash
# Diagnosis (issue 49), on one host: a stuck rank named by every survivor within
# KOLO_TIMEOUT + 1 s and by kolorun's kolo-trace summary in one line, on host and device
# buffers; a straggler found with
# its lag; a dump folder that cannot be written (a warning, the job's own error still
# comes); truncated and foreign dumps reported, not guessed at; no secret in a dump.
#   diagnosis_test.sh KOLORUN WORKER KOLO_TRACE
set -uo pipefail
kolorun=${1:?usage: diagnosis_test.sh KOLORUN WORKER KOLO_TRACE}
worker=${2:?}
kolo_trace=${3:?}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }
timeout_s=2

# 1. Rank 2 of 4 stops calling after 5 allreduces and stays alive.
out=$(KOLO_TIMEOUT=$timeout_s DIAG_STUCK_RANK=2 DIAG_STUCK_AFTER=5 DIAG_STUCK_SECONDS=20 \
      timeout 60 "$kolorun" -np 4 "$worker" 2>&1)
for r in 0 1 3; do
  line=$(grep "^\[$r\] rank $r: call 6 failed after" <<< "$out" | head -n 1)
  [ -n "$line" ] || { fail "rank $r reported no failed call 6"; continue; }
  grep -q "rank 2 " <<< "$line" || fail "rank $r's error does not name rank 2: $line"
  grep -q "collective call 6 " <<< "$line" || fail "rank $r's error does not name collective call 6: $line"
  waited=$(sed -E 's/.*failed after ([0-9.]+) s:.*/\1/' <<< "$line")
  awk -v w="$waited" -v t="$timeout_s" 'BEGIN { exit !(w <= t + 1) }' ||
    fail "rank $r's error came after $waited s, past KOLO_TIMEOUT + 1 s"
done
grep -q "the ranks part at call 6 (allreduce of 1024 x float): rank 2 never entered it" <<< "$out" ||
  fail "kolorun's summary does not say that rank 2 never entered call 6"
grep -q "signal: rank 2" <<< "$out" || fail "the stuck rank 2 did not dump on kolorun's signal"

# 1b. The same on device buffers (the emulated device; each allreduce followed by a barrier,
# so the user's call 6 is collective call 11): the queued device call's failure is the cause.
out=$(KOLO_DEVICE=emulated KOLO_TIMEOUT=$timeout_s DIAG_DEVICE=1 DIAG_STUCK_RANK=2 DIAG_STUCK_AFTER=5 \
      DIAG_STUCK_SECONDS=20 timeout 60 "$kolorun" --no-trace -np 4 "$worker" 2>&1)
for r in 0 1 3; do
  line=$(grep "^\[$r\] rank $r: call 6 failed after" <<< "$out" | head -n 1)
  grep -q "rank 2 did not fail with the other.*collective call 11 (allreduce" <<< "$line" ||
    fail "device path: rank $r's error does not name rank 2 and collective call 11: ${line:-$out}"
done

# 2. Rank 1 of 3 20 ms late to every call: named the straggler, its lag within 20 %.
mkdir "$work/late"
KOLO_TRACE_DIR=$work/late DIAG_LATE_RANK=1 DIAG_LATE_MS=20 DIAG_CALLS=25 DIAG_DUMP=1 \
  timeout 60 "$kolorun" -np 3 "$worker" || fail "the straggler job failed"
report=$("$kolo_trace" "$work/late") || fail "kolo-trace failed on the straggler's dumps: $report"
lag=$(sed -nE 's/.*straggler: rank 1 enters calls ([0-9.]+) ms after the others.*/\1/p' <<< "$report")
[ -n "$lag" ] || fail "kolo-trace named no straggler rank 1: $report"
[ -n "$lag" ] && { awk -v l="$lag" 'BEGIN { exit !(l >= 16 && l <= 24) }' || fail "straggler lag $lag ms is not 20 ms +- 20 %"; }
# No secret, no data: a job with a known secret; its hex never appears in a dump.
secret=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
for f in "$work"/late/kolo-trace.*.json; do
  grep -q "$secret" "$f" && fail "$f holds the store secret"
done
mkdir "$work/secret"
KOLO_SECRET=$secret KOLO_TRACE_DIR=$work/secret DIAG_CALLS=3 DIAG_DUMP=1 timeout 60 "$kolorun" -np 2 "$worker" >/dev/null 2>&1
ls "$work"/secret/kolo-trace.*.json >/dev/null 2>&1 || fail "no dump written by kolo_comm_dump"
if grep -qi "$secret\|\"secret\"" "$work"/secret/kolo-trace.*.json 2>/dev/null; then fail "a dump holds the secret"; fi

# 3. A dump folder that cannot be written: a warning, and the job's own error still comes.
out=$(KOLO_TIMEOUT=$timeout_s KOLO_TRACE_DIR=$work/no/such/folder DIAG_STUCK_RANK=1 DIAG_STUCK_AFTER=2 DIAG_STUCK_SECONDS=10 \
      timeout 60 "$kolorun" --no-trace -np 2 "$worker" 2>&1)
grep -q "cannot write the flight recorder's dump" <<< "$out" || fail "no warning about the unwritable dump folder: $out"
grep -q "^\[0\] rank 0: call 3 failed after .*rank 1" <<< "$out" || fail "rank 0's own error did not come through: $out"

# 4. A truncated dump and a foreign file: reported by name, the rest still read.
cp "$work"/late/kolo-trace.world0.rank0.json "$work/late/kolo-trace.copy.rank9.json"
truncate -s 200 "$work/late/kolo-trace.copy.rank9.json"
echo '{"format": "something else"}' > "$work/late/kolo-trace.foreign.json"
report=$("$kolo_trace" "$work/late"); rc=$?
[ $rc = 1 ] || fail "kolo-trace exited $rc on a folder with bad files (want 1)"
grep -q "skipped .*kolo-trace.copy.rank9.json: not JSON, or cut short" <<< "$report" || fail "truncated dump not reported: $report"
grep -q "skipped .*kolo-trace.foreign.json: not a kolo flight-recorder dump" <<< "$report" || fail "foreign file not reported: $report"
grep -q "straggler: rank 1" <<< "$report" || fail "the good dumps were not read beside the bad ones: $report"
"$kolo_trace" "$work/empty-nothing-here" >/dev/null 2>&1; [ $? = 1 ] || fail "kolo-trace on a missing folder did not exit 1"

[ $status = 0 ] && echo "diagnosis: stuck rank named by every survivor and by kolo-trace; straggler found (lag $lag ms); bad folders and dumps reported"
exit $status
