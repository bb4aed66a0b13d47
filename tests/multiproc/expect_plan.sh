#!/usr/bin/env bash
# Runs a command with the planner's INFO log on, and passes only when the command exits 0
# AND its log shows a plan matching the pattern: a test that forces an algorithm must see
# it run, not merely ask for it (a forced algorithm that has no schedule for a call falls
# back quietly).
set -uo pipefail
pattern=$1
shift
out=$(KOLO_DEBUG=INFO KOLO_DEBUG_SUBSYS=PLAN "$@" 2>&1)
rc=$?
echo "$out" | grep -v " INFO PLAN " | tail -20
if [ "$rc" -ne 0 ]; then
  echo "FAIL: exit status $rc"
  exit 1
fi
if ! grep -qE "INFO PLAN .*$pattern" <<< "$out"; then
  echo "FAIL: no plan matching '$pattern' ran; the plans were:"
  echo "$out" | grep " INFO PLAN " | sed 's/^\[[0-9]*\] kolo [0-9]*:[0-9]* //' | sort | uniq -c | head -20
  exit 1
fi
# EXPECT_PLAN_TOO: a second pattern some plan must match as well.
if [ -n "${EXPECT_PLAN_TOO:-}" ] && ! grep -qE "INFO PLAN .*$EXPECT_PLAN_TOO" <<< "$out"; then
  echo "FAIL: no plan matching '$EXPECT_PLAN_TOO' ran; the plans were:"
  echo "$out" | grep " INFO PLAN " | sed 's/^\[[0-9]*\] kolo [0-9]*:[0-9]* //' | sort | uniq -c | head -20
  exit 1
fi
# EXPECT_PLAN_ABSENT: a pattern no plan may match (a path that must not have run).
if [ -n "${EXPECT_PLAN_ABSENT:-}" ] && grep -qE "INFO PLAN .*$EXPECT_PLAN_ABSENT" <<< "$out"; then
  echo "FAIL: plans matching '$EXPECT_PLAN_ABSENT' ran:"
  echo "$out" | grep -E "INFO PLAN .*$EXPECT_PLAN_ABSENT" | sed 's/^\[[0-9]*\] kolo [0-9]*:[0-9]* //' | sort | uniq -c | head
  exit 1
fi
echo "plans matching '$pattern': $(echo "$out" | grep -cE "INFO PLAN .*$pattern")"
