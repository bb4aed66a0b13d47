#!/usr/bin/env bash
# Ctrl-C on one rank of the DDP example (examples/pytorch_ddp.py, the "kolo" backend), 10
# times, at a random moment of its training: the other rank must raise kolo's error (or
# have finished) and exit cleanly, never die by a signal (DDP's reducer segfaulted on a
# failed allreduce's future) nor hang; the interrupted rank must exit by its
# KeyboardInterrupt (1 or 130), not crash. Then no store file of the runs may be left (it
# holds kolo's unique id, and with it the job's secret).
#
# The ranks run as plain processes with kolorun's variables (KOLO_RANK, KOLO_SIZE,
# KOLO_ADDR), so that each one's exit is seen (kolorun would stop the survivor itself), each
# under `timeout`, which also gives it the default SIGINT action a background job lacks.
set -uo pipefail
python=$2 examples=$3
source "$(dirname "$0")/../multiproc/ranks_lib.sh"  # free_port
runs=${DDP_INTERRUPT_RUNS:-10}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp/tmp  # where the example's store goes: checked empty at the end
mkdir -m 700 "$TMPDIR"
export KOLO_TIMEOUT=30 KOLO_SIZE=2
fail() { echo "FAIL: $*"; for r in 0 1; do echo "-- rank $r:"; tail -25 "$tmp/rank$r.log"; done; exit 1; }
raised=0 finished=0
start_all=$(date +%s)
for i in $(seq 1 "$runs"); do
  victim=$((i % 2)) survivor=$(((i + 1) % 2))
  export KOLO_ADDR=127.0.0.1:$(free_port)  # the job's name here (no kolo_init); a port checked free
  start=$(date +%s.%N)
  pids=()
  for r in 0 1; do
    KOLO_RANK=$r timeout 90 "$python" "$examples/pytorch_ddp.py" --steps 300 >"$tmp/rank$r.log" 2>&1 &
    pids+=($!)
  done
  for _ in $(seq 1 600); do  # training has begun once rank 0 reports step 0
    grep -q "^step 0:" "$tmp/rank0.log" && break
    kill -0 "${pids[0]}" 2>/dev/null || break
    sleep 0.1
  done
  delay=$(printf "%d.%03d" $((RANDOM % 2)) $((RANDOM % 1000)))
  sleep "$delay"
  kill -INT "${pids[$victim]}" 2>/dev/null
  codes=()
  for r in 0 1; do wait "${pids[$r]}"; codes+=($?); done
  took=$(echo "$(date +%s.%N) - $start" | bc)
  v=${codes[$victim]} s=${codes[$survivor]}
  last=$(grep "^step " "$tmp/rank0.log" | tail -1 | cut -d: -f1)
  echo "run $i: SIGINT to rank $victim ${delay}s into training: rank $victim exit $v, rank $survivor exit $s" \
       "(rank 0 last reported ${last:-no step}; ${took%.*}s)"
  [ "$s" -ne 124 ] && [ "$v" -ne 124 ] || fail "run $i: a rank hung (timeout)"
  [ "$s" -lt 128 ] || fail "run $i: the surviving rank $survivor died by signal $((s - 128))"
  case $v in 0|1|130) ;; *) fail "run $i: the interrupted rank $victim exited $v (a crash?)";; esac
  if [ "$s" -eq 0 ]; then
    finished=$((finished + 1))  # the interrupt came too late for it: it had finished
  elif [ "$s" -eq 1 ] && grep -q "kolo: KOLO_ERR_" "$tmp/rank$survivor.log"; then
    raised=$((raised + 1))
  else
    fail "run $i: the surviving rank $survivor exited $s without kolo's error"
  fi
done
echo "$runs interrupts: the survivor raised kolo's error in $raised, had finished in $finished;" \
     "$(( $(date +%s) - start_all ))s"
[ "$raised" -gt 0 ] || { echo "FAIL: no interrupt landed mid-training"; exit 1; }
left=$(find "$TMPDIR" -mindepth 1 -maxdepth 1 -name 'kolo-*')
if [ -n "$left" ]; then
  ls -laR "$TMPDIR"
  find "$TMPDIR" -name 'kolo-*' -perm /o+r | grep -q . && echo "FAIL: a store others may read is left"
  echo "FAIL: the runs left store files behind"
  exit 1
fi
echo "no store file left"
