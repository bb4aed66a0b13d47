#!/usr/bin/env bash
# kolo under a real Slurm: a 4-node cluster of test hosts on this machine
# (slurm_cluster.sh), jobs started by srun and sbatch as on a cluster, results checked.
#
#   slurm_test.sh BUILD_DIR|KOLO_PERF   # a build folder (bench/perf/kolo-perf in it) or the binary
#
# Exit 0 when every check passed, 1 when one failed, 77 (skipped) when Slurm cannot run
# here (not root, Slurm or munge not installed, no network namespaces). Each check prints
# one PASS or FAIL line. The cluster is always torn down, whatever happens.
#
# Scenarios: srun -N 4 -n 16 (hostname, then kolo-perf allreduce), --ntasks-per-node=2,
# an uneven -n 7 -N 4, an sbatch --wait script running srun, and scancel of a running
# kolo job (no rank may be left, nothing new in /dev/shm or /tmp).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLUSTER=$HERE/slurm_cluster.sh
# shellcheck source=tests/cluster/lib.sh
source "$HERE/lib.sh"
[ $# -eq 1 ] || { sed -n '5p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
if [ -d "$1" ]; then PERF=$(cd "$1" && pwd)/bench/perf/kolo-perf; else PERF=$(realpath "$1"); fi
[ -x "$PERF" ] || { echo "slurm_test: no $PERF (build kolo first)" >&2; exit 1; }

if ! why=$("$CLUSTER" check 2>&1); then
  echo "SKIP: $why"
  exit 77
fi

# A prefix of our own: other sets (another run of this test, testhosts users) may be up.
PREFIX=ksl$(($$ % 100000))
WORK=$(mktemp -d /tmp/kolo-slurm-test.XXXXXX)
STEP_TIMEOUT=60   # any one srun/sbatch; kolo itself gives up after KOLO_TIMEOUT
H="$PREFIX-h"
started=$SECONDS

teardown() {
  local rc=$?
  # A background srun of the scancel scenario, if a check failed before it ended.
  if [ -n "${bg_pid:-}" ] && kill -0 "$bg_pid" 2>/dev/null; then kill -KILL "$bg_pid" 2>/dev/null || true; fi
  "$CLUSTER" down "$PREFIX" || { echo "FAIL: slurm_cluster.sh down $PREFIX"; rc=1; }
  rm -rf "${WORK:?}"
  echo "slurm_test: $((SECONDS - started)) s"
  exit "$rc"
}
on_exit teardown
clear_launcher_env

SLURM_CONF=$("$CLUSTER" up 4 "$PREFIX")
export SLURM_CONF
# Every rank needs the same secret outside kolorun (engine/world.cc, job_secret); srun
# and sbatch pass the environment on. KOLO_TIMEOUT: a broken rendezvous fails in 20 s
# instead of hanging the test.
KOLO_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
export KOLO_SECRET KOLO_TIMEOUT=20

# expect_hosts NAME WANT SRUN-ARGS...: `srun ARGS hostname` puts WANT tasks on each host.
expect_hosts() {
  local name=$1 want=$2 got
  shift 2
  if ! got=$(timeout "$STEP_TIMEOUT" srun "$@" hostname 2>"$WORK/err" | per_host); then
    fail "$name: srun $* hostname failed: $(tr '\n' ' ' <"$WORK/err")"
    return 0
  fi
  echo "  srun $* hostname -> $got"
  if placement_ok "$got" "$want"; then pass "$name"; else fail "$name: want $want"; fi
}

# run_perf NAME NRANKS WANT SRUN-ARGS...: kolo-perf allreduce under srun, checked.
run_perf() {
  local name=$1 n=$2 want=$3 rc=0
  shift 3
  # -K: a rank that fails ends the step at once, not after the others' timeouts.
  timeout "$STEP_TIMEOUT" srun -K "$@" "$PERF" allreduce -b 8 -e 1M -f 8 -n 5 -w 1 >"$WORK/perf.out" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    failed_run "$name: srun $* kolo-perf" "$rc" "$WORK/perf.out"
    return 0
  fi
  check_perf "$name" "$WORK/perf.out" "$n" "$want"
}

echo "== srun -N 4 -n 16"
expect_hosts "srun -N 4 -n 16 hostname" "${H}0:4 ${H}1:4 ${H}2:4 ${H}3:4" -N 4 -n 16
run_perf "srun -N 4 -n 16 kolo-perf allreduce" 16 "${H}0:4 ${H}1:4 ${H}2:4 ${H}3:4" -N 4 -n 16

echo "== srun -N 4 --ntasks-per-node=2"
expect_hosts "srun --ntasks-per-node=2 hostname" "${H}0:2 ${H}1:2 ${H}2:2 ${H}3:2" -N 4 --ntasks-per-node=2
run_perf "srun --ntasks-per-node=2 kolo-perf allreduce" 8 "${H}0:2 ${H}1:2 ${H}2:2 ${H}3:2" -N 4 --ntasks-per-node=2

echo "== srun -n 7 -N 4 (uneven)"
expect_hosts "srun -n 7 -N 4 hostname" any:7 -n 7 -N 4
run_perf "srun -n 7 -N 4 kolo-perf allreduce" 7 any:7 -n 7 -N 4

echo "== sbatch --wait (no KOLO_SECRET: the user's secret file)"
# As a user would: no secret in the environment; each step's comes from the secret file
# (KOLO_SECRET_FILE; \$HOME/.kolo/secret by default), made by the first task that needs it.
# The batch script's own process is one process, not rank 0 of the job's tasks; two steps
# of the job run at once (each its own store port).
cat >"$WORK/batch.sh" <<EOF
#!/bin/bash
set -e
unset KOLO_SECRET
export KOLO_SECRET_FILE="$WORK/home/.kolo/secret"
echo "batch on \$(hostname) job \$SLURM_JOB_ID nodes \$SLURM_JOB_NODELIST"
"$PERF" allreduce -b 8 -e 8 -n 1 -w 0 >"$WORK/single.out" 2>&1
srun -K --exact -N 4 -n 4 --ntasks-per-node=1 "$PERF" allreduce -b 8 -e 64K -f 8 -n 5 -w 1 >"$WORK/step_a.out" 2>&1 &
a=\$!
srun -K --exact -N 4 -n 4 --ntasks-per-node=1 "$PERF" allreduce -b 8 -e 64K -f 8 -n 5 -w 1 >"$WORK/step_b.out" 2>&1 &
b=\$!
wait \$a
wait \$b
srun -K "$PERF" allreduce -b 8 -e 64K -f 8 -n 5 -w 1
EOF
rc=0
timeout "$STEP_TIMEOUT" sbatch --wait -N 4 --ntasks-per-node=2 -o "$WORK/batch.out" "$WORK/batch.sh" >"$WORK/sbatch.out" 2>&1 || rc=$?
echo "  $(cat "$WORK/sbatch.out" 2>/dev/null)"
sed -n 1p "$WORK/batch.out" 2>/dev/null | sed 's/^/  /'
if [ "$rc" -eq 0 ]; then
  pass "sbatch --wait exited 0"
  check_perf "sbatch: kolo-perf in the batch script itself" "$WORK/single.out" 1 any1
  check_perf "sbatch: step A of two at once" "$WORK/step_a.out" 4 "${H}0:1 ${H}1:1 ${H}2:1 ${H}3:1"
  check_perf "sbatch: step B of two at once" "$WORK/step_b.out" 4 "${H}0:1 ${H}1:1 ${H}2:1 ${H}3:1"
  check_perf "sbatch: srun kolo-perf allreduce" "$WORK/batch.out" 8 "${H}0:2 ${H}1:2 ${H}2:2 ${H}3:2"
  mode=$(stat -c %a "$WORK/home/.kolo/secret" 2>/dev/null || echo none)
  if [ "$mode" = 600 ]; then pass "the secret file was made, mode 600"; else fail "the secret file: mode $mode"; fi
else
  fail "sbatch --wait exited $rc"
  for out in batch single step_a step_b; do
    [ -f "$WORK/$out.out" ] && sed "s/^/  | $out: /" "$WORK/$out.out" | tail -n 15
  done
fi

echo "== scancel of a running kolo job"
# kolo-perf processes in our test hosts (other kolo runs on this machine are in other
# namespaces or in none).
n_ranks() { procs_named kolo-perf | wc -l; }
ls -A /dev/shm | sort >"$WORK/shm.before"
ls -A /tmp | sort >"$WORK/tmp.before"
# Many iterations: it runs until cancelled (the timeout only guards against a hang).
timeout "$STEP_TIMEOUT" srun -N 4 -n 16 -J kolo-cancel "$PERF" allreduce -b 64K -e 64K -n 1000000 -w 1 \
  >"$WORK/cancel.out" 2>&1 &
bg_pid=$!
job=''
job_seen() { job=$(squeue -h -n kolo-cancel -t R -o %i 2>/dev/null | sed -n 1p); [ -n "$job" ]; }
ranks_running() { [ "$(n_ranks)" -eq 16 ]; }
if wait_until 30 job_seen && wait_until 30 ranks_running; then
  pass "job $job running, 16 kolo-perf ranks in the test hosts"
  sleep 2
  scancel "$job"
  srun_gone() { ! kill -0 "$bg_pid" 2>/dev/null; }
  if wait_until 30 srun_gone; then
    rc=0
    wait "$bg_pid" || rc=$?
    # srun of a cancelled step ends with a failure status (not 0, not timeout's 124).
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; then pass "srun ended after scancel (status $rc)"; else fail "srun ended with $rc after scancel"; fi
    grep -E 'CANCELLED|error' "$WORK/cancel.out" | sed -n 1,3p | sed 's/^/  /'
  else
    fail "srun still runs 30 s after scancel $job"
  fi
  bg_pid=''
  no_ranks() { [ "$(n_ranks)" -eq 0 ]; }
  if wait_until 15 no_ranks; then pass "no kolo-perf rank left"; else fail "kolo-perf ranks left: $(procs_named kolo-perf | tr '\n' ' ')"; fi
  job_gone() { [ -z "$(squeue -h -j "$job" -o %i 2>/dev/null)" ]; }
  if wait_until 15 job_gone; then pass "job $job gone from squeue"; else fail "job $job still in squeue: $(squeue -h -j "$job")"; fi
  # slurmd's files of the step (its socket NODE_JOB.STEP, hwloc_topo_JOB.STEP.xml) in
  # the nodes' spool folders: removed when the step really ended on every node.
  step_files() { find "$(dirname "$SLURM_CONF")/spool" -name "*_$job.*" 2>/dev/null; }
  no_step_files() { [ -z "$(step_files)" ]; }
  if wait_until 15 no_step_files; then pass "no step files of job $job left in slurmd's spool"; else fail "left in spool: $(step_files | tr '\n' ' ')"; fi
else
  fail "the job did not run 16 ranks within 30 s (ranks: $(n_ranks))"
  sed 's/^/  | /' "$WORK/cancel.out" | tail -n 20
fi
new_shm=$(ls -A /dev/shm | sort | comm -13 "$WORK/shm.before" - | tr '\n' ' ')
# /tmp is shared with whatever else runs here: only names of ours count (kolo itself
# writes nothing to /tmp on the CPU path).
new_tmp_all=$(ls -A /tmp | sort | comm -13 "$WORK/tmp.before" - | tr '\n' ' ')
# kolo-slurm-*: other clusters and runs of this test, which may start meanwhile.
new_tmp=$(echo "$new_tmp_all" | tr ' ' '\n' | grep -i -E 'kolo|slurm|munge' | grep -v '^kolo-slurm-' | tr '\n' ' ' || true)
if [ -z "$new_shm" ]; then pass "nothing new in /dev/shm"; else fail "new in /dev/shm: $new_shm"; fi
others=''
[ -z "$new_tmp_all" ] || others=" (new there, not ours: $new_tmp_all)"
if [ -z "$new_tmp" ]; then pass "nothing of kolo/Slurm new in /tmp$others"; else fail "new in /tmp: $new_tmp"; fi

echo "== $failures failed"
[ "$failures" -eq 0 ]
