#!/usr/bin/env bash
# Runs Horovod's own PyTorch test suite (test/parallel/test_torch.py of a Horovod checkout
# you fetched; never copied into kolo) against kolo.torch, with the thinnest shim: a
# `horovod.torch` package that is kolo.torch. Each test in its own kolorun job (a failure
# or hang costs one test), or the whole file in one job (--one-job). Prints each test's
# verdict and a summary line; exits 0 (a measurement, not a gate). -k PATTERN: the tests
# whose names match this extended regular expression ('test_horovod_allreduce$' for one;
# with --one-job, a pytest -k expression).
#   tools/horovod-suite.sh HOROVOD_DIR [-np N] [--one-job] [-k PATTERN] [--build DIR] [--timeout S]
# Needs python3-pytest and python3-cloudpickle (Debian) for /usr/bin/python3 (or KOLO_PYTHON),
# and a kolo build.
set -uo pipefail
hvd_dir=${1:?usage: horovod-suite.sh HOROVOD_DIR [-np N] [--one-job] [-k PATTERN] [--build DIR] [--timeout S]}
shift
np=2 one_job=0 pattern='' build=build limit=120
while [ $# -gt 0 ]; do
  case $1 in
    -np) np=$2; shift 2 ;;
    --one-job) one_job=1; shift ;;
    -k) pattern=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --timeout) limit=$2; shift 2 ;;
    *) echo "horovod-suite: unknown option '$1'" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$build" && pwd)
python=${KOLO_PYTHON:-/usr/bin/python3}
suite=$hvd_dir/test/parallel/test_torch.py
[ -f "$suite" ] || { echo "horovod-suite: no $suite" >&2; exit 2; }
"$python" -c "import pytest, cloudpickle" 2>/dev/null || { echo "horovod-suite: $python needs pytest and cloudpickle (apt-get install python3-pytest python3-cloudpickle)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/shim/horovod/torch"
# The suite's helpers (test/utils/common.py) import Horovod's pure-Python runner utilities:
# horovod.* other than horovod.torch comes from the checkout.
printf '__path__.append(%s)\n' "'$hvd_dir/horovod'" >"$work/shim/horovod/__init__.py"
cat >"$work/shim/horovod/torch/__init__.py" <<'PY'
# horovod.torch is kolo.torch: the module itself, not a copy.
import sys
import kolo.torch
sys.modules[__name__] = kolo.torch
PY
export PYTHONPATH=$work/shim:$root/api/python:$hvd_dir/test/utils${PYTHONPATH:+:$PYTHONPATH}
export KOLO_LIBRARY=$build/libkolo.so KOLO_TIMEOUT=${KOLO_TIMEOUT:-30}
kolorun=$build/tools/kolorun/kolorun
run() {  # run OUT PYTEST_ARGS...: one kolorun job, in the scratch folder (the suite writes files where it runs)
  local out=$1; shift
  # The suite checks hvd.rank()/size() against an MPI launcher's variables (PMI_RANK,
  # PMI_SIZE), and runs its shutdown/re-init tests (and a barrier and shutdown after each
  # test) only where horovodrun's Gloo mode set HOROVOD_RANK: kolorun plays that launcher.
  (cd "$work" && timeout -k 5 "$limit" "$kolorun" -np "$np" /bin/sh -c \
    'PMI_RANK=$KOLO_RANK PMI_SIZE=$KOLO_SIZE HOROVOD_RANK=$KOLO_RANK HOROVOD_SIZE=$KOLO_SIZE \
     exec "$@" ${REPORTS:+"--junitxml=$REPORTS/rank$KOLO_RANK.xml"}' sh \
    "$python" -m pytest -q -p no:cacheprovider --tb=line "$@" >"$out" 2>&1)
}
# Each test by its node id (test_torch.py::Class::test): a -k of its name would also run
# every test whose name contains it (test_horovod_allreduce would run the _prescale one).
tests=$(cd "$hvd_dir/test/parallel" && "$python" -m pytest --collect-only -q -p no:cacheprovider test_torch.py 2>/dev/null |
        grep '::' | { if [ -n "$pattern" ]; then grep -E "::[^:]*($pattern)"; else cat; fi; })
passed=0 failed=0 skipped=0
if [ "$one_job" -eq 1 ]; then
  # Each rank's verdicts in a report of its own (REPORTS: pytest's junit XML): the tests
  # that failed on each rank, and each rank's counts.
  limit=$((limit * 20))
  REPORTS=$work run "$work/all.log" "$suite" ${pattern:+-k "$pattern"}
  for r in $(seq 0 $((np - 1))); do
    [ -f "$work/rank$r.xml" ] || { echo "rank $r: no report (the job's end below)"; tail -20 "$work/all.log"; continue; }
    "$python" - "$work/rank$r.xml" "$r" <<'PY'
import sys, xml.etree.ElementTree as ET
cases = ET.parse(sys.argv[1]).getroot().iter("testcase")
counts = {"passed": 0, "failed": 0, "skipped": 0}
for c in cases:
    bad = c.find("failure") if c.find("failure") is not None else c.find("error")
    if bad is not None:
        counts["failed"] += 1
        why = (bad.get("message") or "").split("\n")[0][:120]
        print(f"FAIL  rank {sys.argv[2]} {c.get('name'):55} {why}")
    elif c.find("skipped") is not None:
        counts["skipped"] += 1
    else:
        counts["passed"] += 1
print(f"horovod test_torch.py on kolo.torch, one job, rank {sys.argv[2]}: {counts['passed']} passed, "
      f"{counts['failed']} failed, {counts['skipped']} skipped")
PY
  done
  exit 0
fi
for id in $tests; do
  t=${id##*::}
  run "$work/$t.log" "$hvd_dir/test/parallel/$id"
  rc=$?
  if grep -q "1 skipped" "$work/$t.log" && ! grep -qE "[0-9]+ (passed|failed)" "$work/$t.log"; then
    verdict=skip skipped=$((skipped + 1))
    why=$(grep -m1 -oE "SKIPPED.*" "$work/$t.log" | cut -c1-100)
  elif [ "$rc" -eq 0 ]; then
    verdict=pass passed=$((passed + 1)) why=
  else
    verdict=FAIL failed=$((failed + 1))
    why=$( { grep -m1 -E "Error|assert|Timeout|timed out" "$work/$t.log" || tail -1 "$work/$t.log"; } | cut -c1-140)
    [ "$rc" -eq 124 ] && why="hung ($limit s)"
  fi
  printf '%-5s %-60s %s\n' "$verdict" "$t" "$why"
done
echo "horovod test_torch.py on kolo.torch, $np ranks: $passed passed, $failed failed, $skipped skipped"
