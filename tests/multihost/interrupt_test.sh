#!/usr/bin/env bash
# Ctrl-C to kolorun stops the ranks on the other hosts with it. A remote rank ran as a
# background job of the remote shell, which starts those with SIGINT ignored: the ranks on
# test hosts outlived kolorun by 1.5-2 s (until the watcher's SIGTERM), and a rank that
# ignores SIGTERM would have lived on. Here every rank must see SIGINT with its default
# action, and none may be alive once kolorun has returned (3 rounds).
#   interrupt_test.sh KOLORUN PREFIX
set -euo pipefail
kolorun=$1 prefix=$2
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
hosts_up "$prefix" 2
for round in 1 2 3; do
  rm -f "$WORK"/pid.* "$WORK"/ignored.*
  # Each rank notes its pid and whether SIGINT is ignored (bit 2 of SigIgn), then waits.
  "$kolorun" --launcher "$LAUNCHER" -H "$PREFIX-h0:1,$PREFIX-h1:2" /bin/sh -c \
    "grep SigIgn /proc/\$\$/status > $WORK/ignored.\$KOLO_RANK; echo \$\$ > $WORK/pid.\$KOLO_RANK; exec sleep 60" \
    >"$WORK/out" 2>&1 &
  BG_PID=$!
  for _ in $(seq 100); do [ "$(ls "$WORK"/pid.* 2>/dev/null | wc -l)" -eq 3 ] && break; sleep 0.1; done
  [ "$(ls "$WORK"/pid.* 2>/dev/null | wc -l)" -eq 3 ] || { cat "$WORK/out"; fail "round $round: the ranks did not start"; }
  sleep 0.3  # each rank's sleep has replaced its shell
  for r in 0 1 2; do
    mask=$(awk '{print $2}' "$WORK/ignored.$r")
    (( (16#$mask & 2) == 0 )) || fail "round $round: rank $r runs with SIGINT ignored (SigIgn $mask)"
  done
  kill -INT "$BG_PID"
  start=$(date +%s%N)
  wait "$BG_PID" || true
  BG_PID=
  for r in 0 1 2; do
    pid=$(cat "$WORK/pid.$r")
    if kill -0 "$pid" 2>/dev/null && [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = sleep ]; then
      fail "round $round: rank $r (pid $pid) is still alive after kolorun returned"
    fi
  done
  echo "ok: round $round: kolorun returned $(( ($(date +%s%N) - start) / 1000000 )) ms after Ctrl-C; none of the 3 ranks (2 hosts) is left"
done
