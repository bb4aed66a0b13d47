#!/usr/bin/env bash
# tools/ci_phases.sh's report, run the way tools/run-tests.sh runs it (errexit, pipefail):
# with ctest logs of thousands of tests it must still exit with the suite's status, print
# exactly 20 slowest tests per log, and fail a run past KOLO_CI_LIMIT_S.
set -euo pipefail
src=${1:?usage: ci_phases_test.sh SOURCE_DIR}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# One run of a script that sources ci_phases.sh; prints its output, returns its status.
run_suite() {  # LIMIT BODY
  ( cd "$src" && KOLO_CI_LOGS="$work/logs" KOLO_CI_LIMIT_S=$1 bash -c "
      set -euo pipefail; source tools/ci_phases.sh; $2" ) 2>&1
}
big_log='for i in $(seq 1 5000); do printf "%d/5000 Test #%d: t_%d ......   Passed    %d.%02d sec\n" $i $i $i $((i % 97)) $((i % 100)); done'

for tag in a b c; do
  out=$(run_suite 3000 "phase fake ctest_logged $tag bash -c '$big_log'") || fail "a passing suite with big logs exited $? (the report itself failed)"
done
n=$(grep -c '^ *[0-9.]* s  t_' <<<"$out" || true)
[ "$n" -eq 60 ] || fail "expected 20 slowest tests for each of 3 logs (60 lines), got $n"
grep -q '^ *96.[0-9] s  t_' <<<"$out" || fail "the slowest test (96.x s) is not listed first"

rc=0; out=$(run_suite 3000 "phase broken false") || rc=$?
[ "$rc" -eq 1 ] || fail "a failing phase must fail the run with its status (1), got $rc"
grep -q 'FAILED (exit 1)' <<<"$out" || fail "the table does not mark the failed phase"

rc=0; out=$(run_suite 0 "sleep 1") || rc=$?
[ "$rc" -ne 0 ] || fail "a run past KOLO_CI_LIMIT_S passed"
grep -q 'past its limit of 0 s' <<<"$out" || fail "the limit failure is not named"
echo "PASS"
