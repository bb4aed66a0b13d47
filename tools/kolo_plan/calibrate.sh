#!/usr/bin/env bash
# Measures allreduce with kolo-perf (TCP between processes on this host) for 2-4 ranks at
# 1 KB, 1 MB and 64 MB, per algorithm, and prints it beside kolo-plan's prediction for
# the same case: the table docs/planner.md reports and engine/planner/params.cc is fitted
# to. Usage: tools/kolo_plan/calibrate.sh [build dir] (default build).
set -euo pipefail
build=${1:-build}
algos=${ALGOS:-"ring direct two_shot halving_doubling tree auto"}
printf "%-5s %-9s %-17s %12s %12s %8s\n" ranks bytes algorithm measured_us predicted_us error
for p in 2 3 4; do
  for bytes in 1024 1048576 67108864; do
    iters=20; [ "$bytes" -ge 67108864 ] && iters=3
    plan=$("$build/tools/kolo_plan/kolo-plan" --memory host --ranks-per-host "$p" --min-bytes "$bytes" --max-bytes "$bytes")
    for a in $algos; do
      algo_env=$a; [ "$a" = auto ] && algo_env=""
      out=$(KOLO_TRANSPORTS=tcp KOLO_ALGO=$algo_env timeout 300 "$build/tools/kolorun/kolorun" -np "$p" \
            "$build/bench/perf/kolo-perf" allreduce -b "$bytes" -e "$bytes" -n "$iters" -w 2 -c 0 2>&1)
      measured=$(echo "$out" | awk '/^\[0\] +[0-9]/ {print $7; exit}')
      if [ "$a" = auto ]; then
        chosen=$(echo "$plan" | awk '!/^#/ {print $3; exit}')
        predicted=$(echo "$plan" | awk -v c="$chosen" '!/^#/ {for (i=4;i<=NF;i++) if ($i==c) {split($(i+1),v,"/"); print v[1]}}')
        a="auto($chosen)"
      else
        predicted=$(echo "$plan" | awk -v c="$a" '!/^#/ {for (i=4;i<=NF;i++) if ($i==c) {split($(i+1),v,"/"); print v[1]}}')
      fi
      err=$(awk -v m="$measured" -v q="$predicted" 'BEGIN { if (m > 0) printf "%+.0f%%", (q - m) / m * 100; else print "?" }')
      printf "%-5s %-9s %-17s %12s %12s %8s\n" "$p" "$bytes" "$a" "$measured" "$predicted" "$err"
    done
  done
done
