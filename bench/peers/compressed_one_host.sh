#!/usr/bin/env bash
# Compressed allreduce on one host (shared memory: the staging slots carry the wire type):
# kolo-perf's busbw (fp32 bytes) with no wire type and with fp16, bf16 and fp8, alternating
# in rounds, the median per size and placement, and the ratio to the uncompressed busbw.
# Prints the machine's memcpy rate first: this comparison moves with memory bandwidth.
#   bench/peers/compressed_one_host.sh [build-dir] [ranks] [rounds]   (defaults: build 2 5)
set -euo pipefail
build=${1:-build} np=${2:-2} rounds=${3:-5}
source "$(dirname "$0")/hosts_lib.sh"  # MEDIAN_AWK
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
memcpy=$("$build/bench/kernels/kolo_kernels_bench" --benchmark_filter='BM_Memcpy/16777216' --benchmark_min_time=0.1 2>/dev/null |
  awk '/BM_Memcpy/ { for (i = 1; i <= NF; ++i) if ($i ~ /bytes_per_second=/) { sub(/.*=/, "", $i); print $i } }')
echo "# $(lscpu | awk -F: '/Model name/ { gsub(/^ +/, "", $2); print $2 }'), memcpy of 16 MB: $memcpy; $np ranks, $rounds rounds"
for round in $(seq 1 "$rounds"); do
  for wire in none half bfloat16 f8e4m3; do
    flag=()
    [ "$wire" = none ] || flag=(--wire "$wire")
    "$build/tools/kolorun/kolorun" -np "$np" "$build/bench/perf/kolo-perf" allreduce -b 1M -e 64M -f 4 -n 20 -w 3 "${flag[@]}" |
      grep -v '#' | sed 's/^\[0\] *//' >>"$tmp/$wire"
  done
done
printf "%10s %5s  %7s  %7s  %7s  %7s  %8s  %8s  %8s\n" size place none half bf16 fp8 half/x bf16/x fp8/x
awk "$MEDIAN_AWK"'
  { name = FILENAME; sub(/.*\//, "", name); o[name, $1] = o[name, $1] " " $8; i[name, $1] = i[name, $1] " " $12; sizes[$1] = 1 }
  END {
    for (s in sizes) {
      for (p = 0; p < 2; ++p) {
        n = median(p ? i["none", s] : o["none", s]); h = median(p ? i["half", s] : o["half", s])
        b = median(p ? i["bfloat16", s] : o["bfloat16", s]); f = median(p ? i["f8e4m3", s] : o["f8e4m3", s])
        printf "%10d %5s  %7.2f  %7.2f  %7.2f  %7.2f  %8.2f  %8.2f  %8.2f\n", s, p ? "in" : "out", n, h, b, f, h / n, b / n, f / n
      }
    }
  }' "$tmp/none" "$tmp/half" "$tmp/bfloat16" "$tmp/f8e4m3" | sort -k1,1n -k2,2r
