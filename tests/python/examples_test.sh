#!/usr/bin/env bash
# The PyTorch examples (examples/): 50 steps on 2 and 4 ranks follow the loss curve of one
# process on the whole batch (within 1 % : float32 sums in another order drift apart a
# little over 50 steps with momentum), the loss falls, and rank 0 checkpoints.
set -euo pipefail
kolorun=$1 python=$2 examples=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for ex in horovod ddp; do
  for np in 1 2 4; do
    echo "== $ex on $np ranks"
    "$kolorun" -np "$np" "$python" "$examples/pytorch_$ex.py" --steps 50 --losses "$tmp/$ex.$np.json" \
      --checkpoint "$tmp/$ex.$np.pt" | tail -1
    [ -s "$tmp/$ex.$np.pt" ] || { echo "FAIL: no checkpoint from rank 0"; exit 1; }
  done
  "$python" - "$tmp" "$ex" <<'PY'
import json, sys
tmp, ex = sys.argv[1], sys.argv[2]
one = json.load(open(f"{tmp}/{ex}.1.json"))
for np in (2, 4):
    many = json.load(open(f"{tmp}/{ex}.{np}.json"))
    worst = max(abs(a - b) / abs(a) for a, b in zip(one, many))
    print(f"{ex}: {np} ranks vs one process: largest relative loss difference {worst:.2e}")
    assert len(many) == len(one) == 50 and worst < 1e-2, "the loss curves differ"
first, last = sum(one[:5]) / 5, sum(one[-5:]) / 5
print(f"{ex}: loss {first:.3f} -> {last:.3f}")
assert last < 0.9 * first, "the loss did not fall"
PY
done
