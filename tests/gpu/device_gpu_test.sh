#!/usr/bin/env bash
# The device-path tests of CI (every collective on device buffers, stream order) on a real
# GPU with the cuda device runtime, 2 and 3 ranks sharing it; and kolo-perf through NCCL
# (--backend nccl) with one rank. Skips (exit 77) where there is no GPU.
# usage: device_gpu_test.sh KOLORUN WORKER KOLO_PERF
set -uo pipefail
kolorun=$1 worker=$2 perf=$3
# The list captured first: `nvidia-smi | grep -q` under pipefail fails when grep stops reading.
gpus=$(command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null || true)
if ! grep -q GPU <<<"$gpus"; then
  echo "SKIP: no GPU here (nvidia-smi lists none)"
  exit 77
fi
export KOLO_DEVICE=cuda KOLO_TIMEOUT=${KOLO_TIMEOUT:-120}
fail=0
for np in 2 3; do
  for scenario in device_collectives device_stream; do
    echo "== $np ranks, $scenario"
    "$kolorun" -np $np "$worker" $scenario || { echo "FAILED: $np ranks, $scenario"; fail=1; }
  done
done
echo "== kolo-perf allreduce --backend nccl, 1 rank"
out=$("$perf" allreduce --backend nccl -b 8 -e 16M -f 4 -c 1 2>&1)
echo "$out"
if ! echo "$out" | grep -q "Out of bounds values : 0 OK"; then echo "FAILED: NCCL backend"; fail=1; fi
exit $fail
