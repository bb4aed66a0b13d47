#!/usr/bin/env bash
# The DDP example (examples/pytorch_ddp.py) started by each launcher it supports, 2 ranks,
# 5 steps: kolorun, mpirun (Open MPI; skipped where it is not installed), torchrun's
# variables set by hand (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT on plain
# processes), torchrun itself (python -m torch.distributed.run; reported, not failed, where
# torchrun cannot start its workers at all), and one process with no launcher. Every
# multi-rank launch must follow kolorun's loss curve (the same ranks, the same sums), and
# leave no store file behind.
set -uo pipefail
kolorun=$1 python=$2 examples=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR=$tmp/tmp
mkdir -m 700 "$TMPDIR"
export KOLO_TIMEOUT=60
script=$examples/pytorch_ddp.py
args=(--steps 5)
fail() { echo "FAIL: $*"; exit 1; }
free_port() {
  "$python" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
}
same_curve() {  # same_curve NAME: its losses are kolorun's
  [ -s "$tmp/$1.json" ] || fail "$1: no losses from rank 0"
  "$python" - "$tmp/kolorun.json" "$tmp/$1.json" "$1" <<'PY' || exit 1
import json, sys
ref, got = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
worst = max(abs(a - b) for a, b in zip(ref, got))
print(f"{sys.argv[3]}: {len(got)} losses, largest difference from kolorun's {worst:.1e}")
assert len(got) == len(ref) and worst < 1e-6, "FAIL: not kolorun's loss curve"
PY
}

echo "== kolorun"
timeout 120 "$kolorun" -np 2 "$python" "$script" "${args[@]}" --losses "$tmp/kolorun.json" | tail -1 ||
  fail "kolorun: exit $?"
[ -s "$tmp/kolorun.json" ] || fail "kolorun: no losses from rank 0"

echo "== mpirun"
if command -v mpirun >/dev/null; then
  # Root may run it in a container (Open MPI refuses otherwise); more ranks than cores.
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 mpirun --oversubscribe -np 2 \
    -x KOLO_LIBRARY -x PYTHONPATH -x TMPDIR -x KOLO_TIMEOUT \
    "$python" "$script" "${args[@]}" --losses "$tmp/mpirun.json" 2>&1 | tail -1
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "mpirun: exit ${PIPESTATUS[0]}"
  same_curve mpirun
else
  echo "mpirun: not installed, skipped"
fi

echo "== torchrun's variables, plain processes"
port=$(free_port)
pids=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout 120 "$python" "$script" "${args[@]}" --losses "$tmp/env.json" >"$tmp/env$r.log" 2>&1 &
  pids+=($!)
done
for r in 0 1; do wait "${pids[$r]}" || { cat "$tmp/env$r.log"; fail "rank $r: exit $?"; }; done
tail -1 "$tmp/env0.log"
same_curve env

echo "== torchrun (python -m torch.distributed.run --standalone)"
# --redirects 9:1 --tee 9:1: torch 1.13's torchrun on Python 3.11 maps its default "0" to
# None (Std.from_str over an IntFlag) and fails before any worker runs; a setting for a local
# rank that does not exist leaves every worker the default. Newer torch takes it too.
timeout 120 "$python" -m torch.distributed.run --standalone --nproc_per_node 2 --redirects 9:1 --tee 9:1 \
  "$script" "${args[@]}" --losses "$tmp/torchrun.json" >"$tmp/torchrun.log" 2>&1
rc=$?
if [ "$rc" -eq 0 ]; then
  grep "done:" "$tmp/torchrun.log"
  same_curve torchrun
elif ! grep -q "^step 0:" "$tmp/torchrun.log" && grep -q "in start_processes" "$tmp/torchrun.log"; then
  # torch 1.13's torchrun on Python 3.11 fails in its own start_processes before any worker
  # runs (its Std flags map to None), whatever the script.
  echo "torchrun: cannot start its workers here (exit $rc), skipped:"
  grep -v "^ " "$tmp/torchrun.log" | tail -1
else
  cat "$tmp/torchrun.log"
  fail "torchrun: exit $rc"
fi

echo "== one process, no launcher"
timeout 120 "$python" "$script" "${args[@]}" | tail -1 || fail "one process: exit $?"

left=$(find "$TMPDIR" -mindepth 1 -maxdepth 1 -name 'kolo-*')
[ -z "$left" ] || { ls -laR "$TMPDIR"; fail "store files left behind"; }
echo "no store file left"
