#!/usr/bin/env bash
# Compressed allreduce across test hosts (tools/testhosts.sh: network namespaces on a
# bridge, links shaped with tc): kolo-perf's busbw (counted in fp32 bytes, as users see
# it) for fp32 data with no wire type and with fp16, bf16 and fp8 on the wire, side by
# side, and the ratio to the uncompressed busbw; kolo-perf's error columns (max and mean,
# in units of the wire type's rounding) are kept in the raw lines. Needs root.
#   bench/peers/compressed_hosts.sh [build-dir] [hosts] [ranks-per-host] [rate] [rounds]
# defaults: build 2 1 2gbit 3. Per size the median of the rounds, alternating wire types.
set -euo pipefail
build=${1:-build} hosts=${2:-2} per_host=${3:-1} rate=${4:-2gbit} rounds=${5:-3}
# shellcheck source=hosts_lib.sh
source "$(dirname "$0")/hosts_lib.sh"
bench_hosts_up compressed_hosts kwire "$hosts" "$per_host" "$rate"
echo "# $hosts test hosts x $per_host ranks ($list), links shaped to $rate; fp32 allreduce (sum), tcp between hosts"
for round in $(seq 1 "$rounds"); do
  for wire in none half bfloat16 f8e4m3; do
    flag=()
    [ "$wire" = none ] || flag=(--wire "$wire")
    "$build/tools/kolorun/kolorun" --no-prefix --timeout 600 --launcher 'ip netns exec {host}' -H "$list" \
      "$build/bench/perf/kolo-perf" allreduce -b 4M -e 64M -f 4 -n 5 -w 1 "${flag[@]}" | grep -v '^#' | tee -a "$tmp/raw" >>"$tmp/$wire"
  done
done
printf "%12s  %10s  %10s  %10s  %10s  %8s  %8s  %8s\n" size none half bfloat16 f8e4m3 half/x bf16/x fp8/x
awk "$MEDIAN_AWK"'
  { name = FILENAME; sub(/.*\//, "", name); t[name, $1] = t[name, $1] " " $8; sizes[$1] = 1 }
  END {
    for (s in sizes) {
      n = median(t["none", s]); h = median(t["half", s]); b = median(t["bfloat16", s]); f = median(t["f8e4m3", s])
      printf "%12d  %10.3f  %10.3f  %10.3f  %10.3f  %8.2f  %8.2f  %8.2f\n", s, n, h, b, f, h / n, b / n, f / n
    }
  }' "$tmp/none" "$tmp/half" "$tmp/bfloat16" "$tmp/f8e4m3" | sort -n
echo "# raw kolo-perf lines (wire runs end with the max and mean error in roundings):"
sed 's/^/# /' "$tmp/raw"
