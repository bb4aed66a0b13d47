# Sourced by tools/run-tests.sh: runs the suite as timed phases and prints, on exit (pass or
# fail), a table of each phase's seconds against its budget, the slowest tests of each ctest
# run, and fails the run when the total passes KOLO_CI_LIMIT_S.
#   phase NAME CMD...            run CMD as phase NAME (its budget from tests/README.md)
#   ctest_logged TAG CMD...      run a ctest command, keeping its output for the slowest list
ci_start=$(date +%s)
ci_limit=${KOLO_CI_LIMIT_S:-3000}
ci_logs=${KOLO_CI_LOGS:-build-ci-logs}
mkdir -p "$ci_logs"
: >"$ci_logs/phases.tsv"

# The budgets: rows "| phase | seconds | ..." of the table under "## Phase budgets".
ci_budget() {
  awk -v p="$1" '/^## Phase budgets/{on=1; next} /^## /{on=0}
    on && $0 ~ "^\\| *`?" p "`? *\\|" {split($0, f, "|"); gsub(/[ `]/, "", f[3]); print f[3]; exit}' tests/README.md
}

phase() {
  local name=$1; shift
  local t0; t0=$(date +%s)
  echo "=== phase $name: $*"
  local rc=0
  "$@" || rc=$?
  local took=$(( $(date +%s) - t0 ))
  local budget; budget=$(ci_budget "$name")
  printf '%s\t%s\t%s\t%s\n' "$name" "$took" "${budget:-?}" "$rc" >>"$ci_logs/phases.tsv"
  if [ -n "$budget" ] && [ "$took" -gt "$budget" ]; then
    echo "WARNING: phase $name took ${took} s, past its budget of ${budget} s (tests/README.md)"
  fi
  echo "=== phase $name: ${took} s (exit $rc)"
  return $rc
}

ctest_logged() {
  local tag=$1; shift
  "$@" 2>&1 | tee "$ci_logs/ctest-$tag.log"
  return "${PIPESTATUS[0]}"
}

ci_report() {
  local rc=$?
  # The report itself must not end the run early: no errexit, no pipefail (a reader that
  # stops early, like head, would kill its writer with SIGPIPE: exit 141).
  set +e +o pipefail
  local total=$(( $(date +%s) - ci_start ))
  echo
  echo "=== CI phases (seconds; budgets in tests/README.md)"
  printf '%-16s %8s %8s  %s\n' phase seconds budget result
  while IFS=$'\t' read -r name took budget prc; do
    local mark=ok
    [ "$prc" != 0 ] && mark="FAILED (exit $prc)"
    [ "$budget" != "?" ] && [ "$took" -gt "$budget" ] && mark="$mark, OVER BUDGET"
    printf '%-16s %8s %8s  %s\n' "$name" "$took" "$budget" "$mark"
  done <"$ci_logs/phases.tsv"
  printf '%-16s %8s %8s\n' total "$total" "$ci_limit"
  for log in "$ci_logs"/ctest-*.log; do
    [ -f "$log" ] || continue
    echo "--- 20 slowest tests of $(basename "$log" .log | sed 's/^ctest-//')"
    sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) .* \([0-9.]*\) sec$/\2 \1/p' "$log" |
      sort -rn | awk 'NR <= 20 {printf "  %8.1f s  %s\n", $1, $2}'
  done
  if [ "$total" -gt "$ci_limit" ]; then
    echo "FAILED: the suite took ${total} s, past its limit of ${ci_limit} s (KOLO_CI_LIMIT_S; tests/README.md)"
    [ "$rc" -eq 0 ] && rc=1
  fi
  exit "$rc"
}
trap ci_report EXIT
