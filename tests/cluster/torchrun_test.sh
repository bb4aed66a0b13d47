#!/usr/bin/env bash
# kolo under torchrun (torch.distributed.run, the elastic agent) on 2 test hosts
# (tools/testhosts.sh), one torchrun per host, 2 workers each: env:// rendezvous as on a
# cluster, every rank's outcome checked.
#
#   torchrun_test.sh BUILD_DIR    # the build folder holding libkolo.so
#
# Exit 0 when every check passed, 1 when one failed, 77 (skipped, saying why) when it cannot
# run here (not root, no network namespaces, /usr/bin/python3 without torch). One PASS or
# FAIL line per check. The test hosts are always torn down.
#
# Scenarios (the worker: torchrun_worker.py; results in one file per rank and attempt):
#   1. static rendezvous (--node_rank, --master_addr), /usr/bin/torchrun itself: a script
#      with dist.init_process_group(backend="kolo"): all_reduce, all_gather, broadcast,
#      reduce_scatter, barrier, values checked on every rank.
#   2. c10d rendezvous, kolo.torch (hvd.init, hvd.allreduce...) with torchrun's variables
#      alone: kolo.torch makes its world through torch's env:// store.
#   3. static rendezvous, kolo.torch as in 2 (torch's store is then the agent's), no
#      KOLO_SECRET: the secret travels in kolo's unique id through torch's store.
#   4. c10d, --max_restarts 1, the "kolo" backend: rank 1 raises on the first attempt after
#      kolo is up; the agents restart the group and the second attempt must pass everywhere.
#   5. the same with kolo.torch, rank 1 SIGKILLed (no exit handler runs).
#
# torch 1.13 on Python 3.11 (Debian 12): torchrun fails before any worker starts,
# "AttributeError: 'NoneType' object has no attribute 'get'" in start_processes (to_map):
# Std.from_str("0"), the default of --redirects/--tee, iterates the IntFlag Std, and 3.11
# iterates single-bit members only, so "0" maps to None. Worked around two ways: scenarios 1
# and 3 run /usr/bin/torchrun with --redirects 9:1 --tee 9:1 (a mapping for a local rank
# that does not exist: every worker gets Std.NONE), the others torchrun_launch.py (torchrun's
# main() with from_str fixed). Torch 1.13 spells its options with underscores only.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
TESTHOSTS=$ROOT/tools/testhosts.sh
# shellcheck source=tests/cluster/lib.sh
source "$HERE/lib.sh"
PY=/usr/bin/python3   # Debian's python3-torch: importable from this interpreter only
[ $# -eq 1 ] || { sed -n '6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
BUILD=$(cd "$1" 2>/dev/null && pwd) || { echo "torchrun_test: no folder $1" >&2; exit 1; }
[ -f "$BUILD/libkolo.so" ] || { echo "torchrun_test: no $BUILD/libkolo.so (build kolo first)" >&2; exit 1; }

if ! why=$("$TESTHOSTS" check 2>&1); then echo "SKIP: $why"; exit 77; fi
if ! why=$("$PY" -c "import torch.distributed.run" 2>&1); then
  echo "SKIP: $PY cannot import torch.distributed.run (install python3-torch): ${why##*$'\n'}"
  exit 77
fi

PREFIX=ktr$(($$ % 100000))
WORK=$(mktemp -d /tmp/kolo-torchrun-test.XXXXXX)
started=$SECONDS
hosts_up=''

teardown() {
  local rc=$? sig pid pids
  trap - EXIT TERM INT
  if [ -n "$hosts_up" ]; then
    # Whatever still runs on our hosts (a torchrun or worker of a check that failed): by
    # the pids of our own namespaces only.
    for sig in TERM KILL; do
      pids=$(ip netns pids "$PREFIX-h0" 2>/dev/null; ip netns pids "$PREFIX-h1" 2>/dev/null)
      [ -n "$pids" ] || break
      for pid in $pids; do kill -"$sig" "$pid" 2>/dev/null || true; done
      [ "$sig" = KILL ] || sleep 2   # torchrun's agents stop their workers on TERM
    done
    wait 2>/dev/null || true
    "$TESTHOSTS" --prefix "$PREFIX" down >/dev/null || { echo "FAIL: testhosts.sh --prefix $PREFIX down"; rc=1; }
  fi
  rm -rf "${WORK:?}"
  echo "torchrun_test: $((SECONDS - started)) s"
  exit "$rc"
}
on_exit teardown
info() { echo "  $*"; }
# The workers' ranks must come from torchrun, not from a launcher around us.
clear_launcher_env
export KOLO_LIBRARY=$BUILD/libkolo.so PYTHONPATH=$ROOT/api/python${PYTHONPATH:+:$PYTHONPATH}
# A broken rendezvous fails in 20 s rather than hanging; one thread a worker (2 cores).
export KOLO_TIMEOUT=20 OMP_NUM_THREADS=1
KOLO_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
export KOLO_SECRET   # torchrun hands its environment to its workers (scenarios 3 and 5 use it)

"$TESTHOSTS" --prefix "$PREFIX" up 2 >/dev/null
hosts_up=1
H0=$PREFIX-h0 H1=$PREFIX-h1

# --- torchrun as Debian ships it, unpatched: reported (exactly what breaks), never failed.
echo 'print("worker ran")' >"$WORK/trivial.py"
if out=$(cd "$WORK" && timeout 60 "$PY" -m torch.distributed.run --standalone --nproc_per_node 1 \
    --monitor_interval 1 trivial.py 2>&1); then
  info "plain torchrun works here: $(echo "$out" | grep -m1 'worker ran')"
else
  info "plain torchrun fails here: $(echo "$out" | grep -E '^[A-Za-z.]*(Error|Exception)' | tail -1)" \
    "(in $(echo "$out" | grep -o 'in [a-z_]*$' | tail -2 | cut -c4- | paste -sd/))"
fi
info "$("$PY" "$HERE/torchrun_launch.py" --check-fix)"

# run_pair NAME SECONDS LAUNCH... -- WORKER-ARGS...: torchrun LAUNCH on both hosts at once
# (node rank i: {i} in LAUNCH is replaced), each bounded by SECONDS; sets rc0 rc1, logs in
# $WORK/NAME.h0.log, NAME.h1.log, results in $WORK/NAME/.
run_pair() {
  local name=$1 limit=$2 i a pids=() t0=$SECONDS
  shift 2
  local launch=() worker=()
  while [ "$1" != -- ]; do launch+=("$1"); shift; done
  shift
  worker=("$@")
  mkdir -p "$WORK/$name"
  for i in 0 1; do
    local args=()
    for a in "${launch[@]}"; do args+=("${a//\{i\}/$i}"); done
    # From $ROOT: torchrun's failure reports name the script by its path as given.
    (cd "$ROOT" && exec timeout -k 5 "$limit" "$TESTHOSTS" exec "$PREFIX-h$i" "${args[@]}" \
       "$HERE/torchrun_worker.py" --out "$WORK/$name" "${worker[@]}") >"$WORK/$name.h$i.log" 2>&1 &
    pids+=($!)
  done
  set +e
  wait "${pids[0]}"; rc0=$?
  wait "${pids[1]}"; rc1=$?
  set -e
  elapsed=$((SECONDS - t0))
}

# show NAME: the lines of the workers' verdicts and of the agents' failures, both hosts.
show() {
  grep -hE "checks, [0-9]+ failed|FAIL |NOWORLD|on purpose|Error|exitcode|Restarting|restart" \
    "$WORK/$1.h0.log" "$WORK/$1.h1.log" | grep -v '^  File' | sed 's/^/    /' | sed -n 1,40p || true
}

# verdict NAME API WHAT: one PASS or FAIL line for a pair's first attempt: both torchruns
# exited 0 and every rank's result is "ok"; h0's log on a failure.
verdict() {
  local why
  why=$(results "$1" "$2" 0) || true
  if [ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ] && [ -z "$why" ]; then
    pass "$3 (${elapsed} s)"
  else
    fail "$3: torchrun exit $rc0/$rc1;${why:+ $why}"
    sed 's/^/    h0| /' "$WORK/$1.h0.log" | tail -25
  fi
}

# results NAME API ATTEMPT: "ok" on every rank (0-3) of ATTEMPT, else its failures listed.
results() {
  local name=$1 api=$2 at=$3 r f bad=''
  for r in 0 1 2 3; do
    f=$WORK/$name/$api.a$at.r$r
    if [ ! -f "$f" ]; then bad+=" rank $r: no result;"
    elif [ "$(cat "$f")" != ok ]; then bad+=" rank $r: $(head -c 300 "$f");"
    fi
  done
  [ -z "$bad" ] && return 0
  echo "${bad% ;}"
  return 1
}

TR_C10D=("$PY" "$HERE/torchrun_launch.py" --nnodes 2 --nproc_per_node 2 --rdzv_backend c10d
         --rdzv_endpoint "$H0:29400" --monitor_interval 1)

# --- 1. static rendezvous, /usr/bin/torchrun (or python -m torch.distributed.run), "kolo" backend
TORCHRUN=(/usr/bin/torchrun)
[ -x /usr/bin/torchrun ] || TORCHRUN=("$PY" -m torch.distributed.run)
run_pair static 60 "${TORCHRUN[@]}" --redirects 9:1 --tee 9:1 --nnodes 2 --nproc_per_node 2 --node_rank '{i}' \
  --master_addr "$H0" --master_port 29500 --monitor_interval 1 -- --api dist
show static
verdict static dist "torchrun static rendezvous, backend=\"kolo\": 4 ranks on 2 hosts, all_reduce/all_gather/broadcast/reduce_scatter checked on every rank"

# --- 2. kolo.torch with torchrun's variables alone
run_pair hvd 60 "${TR_C10D[@]}" --rdzv_id hvd -- --api hvd
show hvd
verdict hvd hvd "torchrun c10d, kolo.torch with torchrun's variables alone: hvd.init() made the 4-rank world, hvd.allreduce/allgather/broadcast checked on every rank"

# --- 3. static rendezvous, kolo.torch's world through torch's env:// store (the agent's
# store here), no KOLO_SECRET.
run_pair hvdstore 60 env -u KOLO_SECRET "${TORCHRUN[@]}" --redirects 9:1 --tee 9:1 --nnodes 2 --nproc_per_node 2 \
  --node_rank '{i}' --master_addr "$H0" --master_port 29500 --monitor_interval 1 -- --api hvd
show hvdstore
verdict hvdstore hvd "torchrun static rendezvous, kolo.torch's world made through torch's store (no KOLO_SECRET), checked on every rank"

# restart_check NAME API HOW: rank 1's planned death on attempt 0, both agents back with 0,
# attempt 1 ok on every rank, no third attempt.
restart_check() {
  local name=$1 api=$2 how=$3 r died=$WORK/$1/$2.a0.r1.died what
  what="torchrun --max_restarts 1, $api, rank 1 dies ($how) on the first attempt"
  run_pair "$name" 90 "${TR_C10D[@]}" --rdzv_id "$name" --max_restarts 1 -- --api "$api" --fail-rank 1 --fail-how "$how"
  show "$name"
  for r in 0 2 3; do  # how the others' first attempt ended (kolo's error, or stopped by their agent)
    info "attempt 0, rank $r:" \
      "$(head -c 200 "$WORK/$name/$api.a0.r$r" 2>/dev/null || echo 'no result (stopped by its agent)')"
  done
  why=$(results "$name" "$api" 1) || true
  if [ ! -f "$died" ]; then
    fail "$what: rank 1 never got to its planned death (torchrun exit $rc0/$rc1);" \
      "attempt 0: $(head -c 300 "$WORK/$name/$api.a0.r0" 2>/dev/null || echo 'rank 0: no result')"
  elif ls "$WORK/$name/$api.a2."* >/dev/null 2>&1; then
    fail "$what: a third attempt ran"
  elif [ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ] && [ -z "$why" ]; then
    pass "$what: the agents restarted the group, kolo came up again, attempt 1 passed on all 4 ranks (${elapsed} s)"
  else
    fail "$what: torchrun exit $rc0/$rc1;${why:+ $why}"
    sed 's/^/    h0| /' "$WORK/$name.h0.log" | grep -v '^    h0|   File' | tail -25
  fi
}

# --- 4./5. restarts
restart_check restartdist dist raise
restart_check restarthvd hvd kill

# Every torchrun and worker gone from the hosts once the scenarios are over (kolo keeps its
# shared memory in memfds: nothing to look for in /dev/shm).
left=$(ip netns pids "$H0"; ip netns pids "$H1")
if [ -z "$left" ]; then pass "no process left on the test hosts"
else fail "processes left on the test hosts: $(ps -o pid=,args= -p "$(paste -sd, <<<"$left")" | sed -n 1,5p)"; fi

[ "$failures" -eq 0 ] || { echo "torchrun_test: $failures check(s) failed"; exit 1; }
echo "torchrun_test: all checks passed"
