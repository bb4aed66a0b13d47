#!/usr/bin/env bash
# Two builds of kolo side by side in one run: kolo-perf allreduce of each, alternating
# (before, after, before, ...), per size the median time over the rounds, and after/before.
# For a change that must not move performance (a refactor): both on this machine, now.
#   bench/perf/before_after.sh BEFORE_BUILD AFTER_BUILD [np] [min] [max] [rounds] [kolo-perf flags...]
# e.g. bench/perf/before_after.sh ../old/build-cpu build-cpu 2 8 256M 5
#      KOLO_DEVICE=emulated bench/perf/before_after.sh ../old/build-cpu build-cpu 2 8 16M 5 -G
# ITERS=20 WARMUP=5 in the environment change -n / -w. Ratios above 1: the after build is faster.
set -euo pipefail
before=$1 after=$2 np=${3:-2} min=${4:-8} max=${5:-256M} rounds=${6:-5}
shift $(($# < 6 ? $# : 6))
iters=${ITERS:-20} warmup=${WARMUP:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for round in $(seq 1 "$rounds"); do
  for which in before after; do
    build=${!which}
    "$build/tools/kolorun/kolorun" --no-prefix -np "$np" "$build/bench/perf/kolo-perf" allreduce -b "$min" -e "$max" \
      -f 4 -n "$iters" -w "$warmup" -c 1 "$@" >"$tmp/out"
    grep -q "Out of bounds values : 0 OK" "$tmp/out" || { echo "$which: wrong results in round $round" >&2; exit 1; }
    grep -v '^#' "$tmp/out" | awk 'NF >= 6' >>"$tmp/$which"
  done
done
echo "# kolo-perf allreduce ${*:-(host buffers)}, $np ranks, median of $rounds alternating rounds, -n $iters -w $warmup"
printf "%12s  %12s  %12s  %12s\n" bytes before_us after_us before/after
awk '
  function median(key,   n, i, j, v, a) {
    n = cnt[key]
    for (i = 1; i <= n; ++i) a[i] = t[key, i]
    for (i = 2; i <= n; ++i) { v = a[i]; for (j = i - 1; j >= 1 && a[j] > v; --j) a[j + 1] = a[j]; a[j + 1] = v }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  FNR == 1 { name = FILENAME; sub(/.*\//, "", name) }
  { key = name SUBSEP $1; t[key, ++cnt[key]] = $6; sizes[$1] = 1 }
  END {
    for (s in sizes) {
      bm = median("before" SUBSEP s); am = median("after" SUBSEP s)
      printf "%12d  %12.2f  %12.2f  %12.3f\n", s, bm, am, (am > 0 ? bm / am : 0)
    }
  }' "$tmp/before" "$tmp/after" | sort -n
