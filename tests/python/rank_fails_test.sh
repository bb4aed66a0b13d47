#!/usr/bin/env bash
# A rank that raises mid-training: the others get an exception (kolo's error, not a hang)
# well within KOLO_TIMEOUT, and kolorun exits non-zero.
set -uo pipefail
kolorun=$1 python=$2 examples=$3
export KOLO_TIMEOUT=30
script=$(mktemp --suffix=.py)
trap 'rm -f "$script"' EXIT
cat >"$script" <<'PY'
import sys, time, torch
import kolo.torch as hvd
hvd.init()
model = torch.nn.Linear(100, 10)
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), named_parameters=model.named_parameters())
start = time.time()
try:
    for step in range(200):
        if hvd.rank() == 1 and step == 20:
            raise RuntimeError("rank 1 fails on purpose")
        opt.zero_grad()
        model(torch.randn(8, 100)).sum().backward()
        opt.step()
except hvd.HorovodInternalError as e:
    print(f"rank {hvd.rank()}: raised after {time.time() - start:.1f} s: {str(e)[:120]}", flush=True)
    sys.exit(3)
PY
start=$(date +%s)
out=$("$kolorun" -np 3 "$python" "$script" 2>&1)
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "$out" | grep -v "^\[.\]   " | tail -8
[ "$rc" -ne 0 ] || { echo "FAIL: kolorun exited 0"; exit 1; }
for r in 0 2; do
  grep -q "\[$r\] rank $r: raised after" <<< "$out" || { echo "FAIL: rank $r did not raise"; exit 1; }
done
[ "$elapsed" -lt 25 ] || { echo "FAIL: took ${elapsed}s"; exit 1; }
echo "the survivors raised and kolorun exited $rc after ${elapsed}s"
