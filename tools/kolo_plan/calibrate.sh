#!/usr/bin/env bash
# Measures allreduce with kolo-perf for 2-4 ranks at 1 KB, 1 MB and 64 MB and prints it
# beside kolo-plan's prediction for the same case: the table docs/planner.md reports and
# engine/planner/params.cc is fitted to. The machine is shared and noisy, so every case
# runs REPS times (alternating cases, not back to back) and the best and the median are
# printed; params.cc's shm_* are fitted to the best.
#
#   tools/kolo_plan/calibrate.sh [build dir]            shared-memory path (what one host runs):
#                                                       ALGOS="one_shot two_shot auto"
#   MODE=tcp tools/kolo_plan/calibrate.sh [build dir]   the schedules over TCP (KOLO_TRANSPORTS=tcp)
set -euo pipefail
build=${1:-build}
mode=${MODE:-shm}
reps=${REPS:-6}
if [ "$mode" = tcp ]; then
  algos=${ALGOS:-"ring direct two_shot halving_doubling tree auto"}
  export KOLO_TRANSPORTS=tcp
  prefix=""; chosen_field=5   # "SIZE chosen SHM tcp ALGO": the schedule that TCP runs
else
  algos=${ALGOS:-"one_shot two_shot auto"}
  prefix="shm_"; chosen_field=3
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$reps"); do
  for p in 2 3 4; do
    for a in $algos; do
      algo_env=$a; [ "$a" = auto ] && algo_env=""
      for bytes in 1K 64M; do   # -f 1024 from 1K gives 1 KB and 1 MB
        end=1M; iters=20; [ "$bytes" = 64M ] && end=64M && iters=10
        KOLO_ALGO=$algo_env timeout 300 "$build/tools/kolorun/kolorun" -np "$p" "$build/bench/perf/kolo-perf" \
          allreduce -b "$bytes" -e "$end" -f 1024 -n "$iters" -w 5 2>&1 |
          awk -v p="$p" -v a="$a" '/^\[0\] +[0-9]/ {print p, a, $2, $7}' >> "$tmp/all"
      done
    done
  done
done
printf "%-5s %-9s %-22s %10s %10s %10s %8s %8s\n" ranks bytes algorithm best_us median_us predicted error_b error_m
for p in 2 3 4; do
  plan=$("$build/tools/kolo_plan/kolo-plan" --memory host --ranks-per-host "$p" --min-bytes 1024 --max-bytes 67108864)
  for bytes in 1024 1048576 67108864; do
    for a in $algos; do
      label=$bytes; [ "$bytes" = 1024 ] && label=1K; [ "$bytes" = 1048576 ] && label=1M; [ "$bytes" = 67108864 ] && label=64M
      row=$(echo "$plan" | awk -v l="$label" '!/^#/ && $1 == l')
      name=$prefix$a
      [ "$a" = auto ] && name=$(echo "$row" | awk -v f=$chosen_field '{print $f}')
      predicted=$(echo "$row" | awk -v c="$name" '{for (i=6;i<=NF;i++) if ($i==c) {split($(i+1),v,"/"); print v[1]; exit}}')
      read -r best median < <(awk -v p="$p" -v a="$a" -v b="$bytes" '$1==p && $2==a && $3==b {print $4}' "$tmp/all" |
        sort -g | awk '{v[NR]=$1} END {if (NR) print v[1], (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2); else print "? ?"}')
      errs=$(awk -v m="$best" -v n="$median" -v q="$predicted" 'BEGIN {
        if (m > 0 && q > 0) printf "%+.0f%% %+.0f%%", (q-m)/m*100, (q-n)/n*100; else print "? ?" }')
      [ "$a" = auto ] && a="auto($name)"
      printf "%-5s %-9s %-22s %10s %10s %10s %8s %8s\n" "$p" "$bytes" "$a" "$best" "$median" "$predicted" $errs
    done
  done
done
