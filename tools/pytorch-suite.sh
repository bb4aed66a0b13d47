#!/usr/bin/env bash
# Runs PyTorch's own distributed test suite (DistributedTest._DistTestBase of the installed
# torch; never copied into kolo) against kolo's torch.distributed backend and against Gloo,
# side by side, at each world size asked (2 and 3 by default): each test spawns its ranks
# as torch's test_distributed_spawn.py does (tools/pytorch_suite.py). Prints pass/fail/skip
# counts per backend and world size, and the tests kolo fails that Gloo passes. Exits 0
# (a measurement, not a gate; 2 and 3 ranks, both backends: about 40 minutes on 2 cores).
# -k PATTERN: only the tests whose names match this extended regular expression.
#   tools/pytorch-suite.sh [--build DIR] [--np "2 3"] [-k PATTERN] [--timeout S] [--keep DIR]
# --timeout: seconds per test (torch's default is 300; kolo's own deadline is KOLO_TIMEOUT).
# --keep DIR: leave each run's verdicts and log there.
set -uo pipefail
build=build nps="2 3" pattern='' limit=90 keep=''
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --np) nps=$2; shift 2 ;;
    -k) pattern=$2; shift 2 ;;
    --timeout) limit=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    *) echo "pytorch-suite: unknown option '$1'" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$build" && pwd)
python=${KOLO_PYTHON:-/usr/bin/python3}
driver=$root/tools/pytorch_suite.py
work=${keep:-$(mktemp -d)}
mkdir -p "$work"
[ -n "$keep" ] || trap 'rm -rf "$work"' EXIT
export PYTHONPATH=$root/api/python${PYTHONPATH:+:$PYTHONPATH}
export KOLO_LIBRARY=$build/libkolo.so KOLO_TIMEOUT=${KOLO_TIMEOUT:-30}
export BACKEND=gloo DISTRIBUTED_TESTS_DEFAULT_TIMEOUT=$limit
# The suite's tests by name (unittest's listing of the class), filtered by -k.
tests=$(cd "$work" && WORLD_SIZE=2 "$python" -c "
import sys, unittest; sys.argv = ['x']; sys.path.insert(0, '$root/tools')
import pytorch_suite
for t in unittest.TestLoader().loadTestsFromTestCase(pytorch_suite.TestDistBackendWithSpawn):
    print(t.id().rsplit('.', 1)[-1])" | { if [ -n "$pattern" ]; then grep -E "$pattern"; else cat; fi; })
[ -n "$tests" ] || { echo "pytorch-suite: no test to run (torch's test helpers importable?)" >&2; exit 2; }
ids=$(for t in $tests; do echo "TestDistBackendWithSpawn.$t"; done)
for np in $nps; do
  for backend in gloo kolo; do
    out=$work/$backend-np$np
    rm -f "$out.verdicts"
    # In a folder of its own: the suite's processes leave files in the working directory.
    mkdir -p "$out.d"
    (cd "$out.d" && SUITE_VERDICTS=$out.verdicts WORLD_SIZE=$np KOLO_INSTEAD_OF_GLOO=$([ $backend = kolo ] && echo 1 || echo 0) \
       timeout -k 10 $(( ($(wc -w <<<"$tests") + 1) * limit )) "$python" "$driver" $ids >"$out.log" 2>&1)
    touch "$out.verdicts"
    printf '%s, %d ranks: %d passed, %d failed, %d skipped\n' "$backend" "$np" \
      "$(grep -c '^pass ' "$out.verdicts")" "$(grep -c '^fail ' "$out.verdicts")" "$(grep -c '^skip ' "$out.verdicts")"
  done
  echo "kolo fails, gloo passes ($np ranks):"
  comm -12 <(sed -n 's/^fail //p' "$work/kolo-np$np.verdicts" | sort) <(sed -n 's/^pass //p' "$work/gloo-np$np.verdicts" | sort) |
    sed 's/^/  /'
done
