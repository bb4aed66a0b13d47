#!/usr/bin/env bash
# kolo across test hosts on one machine (tools/testhosts.sh: network namespaces on a bridge,
# each host's link shaped with tc), so that the link, not the 2 cores, is the bottleneck:
# allreduce busbw with the flat ring, the hierarchical two-level schedule and the
# planner's own choice, beside Open MPI (mpirun launching through `testhosts.sh rsh`,
# shared memory within a host and TCP between) and Gloo (TCP, each rank listening on its
# host's address) over the same links, and against the link rate. Needs root
# (namespaces); brings its hosts down again at exit.
#   bench/peers/compare_hosts.sh [build-dir] [hosts] [ranks-per-host] [rate] [rounds] [transport]
# defaults: build 2 2 2gbit 3 tcp (kolo's transport between hosts: tcp or ucx; shm within).
# Per size the median time of the rounds, alternating kolo's algorithms and the peers.
set -euo pipefail
build=${1:-build} hosts=${2:-2} per_host=${3:-2} rate=${4:-2gbit} rounds=${5:-3} transport=${6:-tcp}
export KOLO_TRANSPORTS=shm,$transport
# shellcheck source=hosts_lib.sh
source "$(dirname "$0")/hosts_lib.sh"
bench_hosts_up compare_hosts kbench "$hosts" "$per_host" "$rate"
np=$((hosts * per_host))
link_gbs=$(awk -v r="$rate" 'BEGIN { n = r + 0; u = r; sub(/^[0-9.]+/, "", u);
  m = (u == "gbit") ? 1e9 : (u == "mbit") ? 1e6 : (u == "kbit") ? 1e3 : 1; printf "%.3f", n * m / 8 / 1e9 }')
echo "# $hosts test hosts x $per_host ranks ($list), each host's link shaped to $rate = $link_gbs GB/s per direction"
echo "# allreduce float sum over $transport between hosts (shared memory within), median of $rounds alternating rounds"
testhosts="$(cd "$(dirname "$0")/../../tools" && pwd)/testhosts.sh"
net=$(ip -4 -o addr show "$prefix-br" | awk '{ sub(/\.[0-9]+\/24/, ".0/24", $4); print $4 }')
ompirun=$(command -v mpirun.openmpi || command -v mpirun || true)
ompi=()
if [ -n "$ompirun" ] && [ -x "$build/bench/peers/mpi_allreduce_perf" ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  ompi=("$ompirun" --mca plm_rsh_agent "$testhosts rsh" --mca btl self,vader,tcp --mca btl_tcp_if_include "$net"
        --mca oob_tcp_if_include "$net" --mca mpi_yield_when_idle 1 -H "$list" -np "$np" "$(cd "$build" && pwd)/bench/peers/mpi_allreduce_perf")
else
  echo "# note: Open MPI skipped (needs mpirun and $build/bench/peers/mpi_allreduce_perf)"
fi
gloo=()
if [ -x "$build/bench/peers/gloo_allreduce_perf" ]; then
  gloo=("$build/tools/kolorun/kolorun" --no-prefix --timeout 600 --launcher "$testhosts exec {host} env GLOO_HOSTNAME={host}"
        -H "$list" "$build/bench/peers/gloo_allreduce_perf")
else
  echo "# note: Gloo skipped (needs libgloo-dev: $build/bench/peers/gloo_allreduce_perf)"
fi
for round in $(seq 1 "$rounds"); do
  for algo in ring hierarchical auto; do
    value=$algo
    [ "$algo" = auto ] && value=
    KOLO_ALGO=$value "$build/tools/kolorun/kolorun" --no-prefix --timeout 600 --launcher 'ip netns exec {host}' -H "$list" \
      "$build/bench/perf/kolo-perf" allreduce -b 1M -e 64M -f 4 -n 5 -w 1 -c 1 | grep -v '^#' >>"$tmp/$algo"
  done
  [ ${#ompi[@]} -eq 0 ] || timeout 900 "${ompi[@]}" allreduce -b 1M -e 64M -f 4 -n 5 -w 1 -c 1 | grep -E '^ +[0-9]' >>"$tmp/ompi"
  if [ ${#gloo[@]} -gt 0 ]; then
    mkdir -p "$tmp/gloo-store-$round"
    "${gloo[@]}" -d "$tmp/gloo-store-$round" -b 1M -e 64M -f 4 -n 5 -w 1 | grep -E '^ +[0-9]' >>"$tmp/gloo"
  fi
done
touch "$tmp/ompi" "$tmp/gloo"
# Small-message latency across the hosts: 8 B allreduce, min/median/p99.
"$build/tools/kolorun/kolorun" --no-prefix --timeout 600 --launcher 'ip netns exec {host}' -H "$list" \
  "$build/bench/perf/kolo-perf" allreduce -b 8 -e 8 -n 2000 -w 100 -c 1 --latency | grep -v '^#' | sed 's/^/# 8 B latency, kolo: /'
[ ${#ompi[@]} -eq 0 ] || timeout 300 "${ompi[@]}" allreduce -b 8 -e 8 -n 2000 -w 100 -c 1 --latency | grep -E '^ +[0-9]' |
  sed 's/^/# 8 B latency, Open MPI: /'
printf "%12s  %10s  %10s  %10s  %10s  %10s  %9s  %9s  %9s  %9s\n" size ring hier auto ompi gloo hier/ring \
  auto/ompi auto/gloo auto/link
awk -v link="$link_gbs" "$MEDIAN_AWK"'
  { name = FILENAME; sub(/.*\//, "", name); t[name, $1] = t[name, $1] " " $6; sizes[$1] = 1 }
  END {
    for (s in sizes) {
      r = median(t["ring", s]); h = median(t["hierarchical", s]); a = median(t["auto", s])
      o = median(t["ompi", s]); g = median(t["gloo", s])
      # busbw of an allreduce: 2 (p-1)/p x bytes / time; p from the run, in the header
      f = 2 * (P - 1) / P
      printf "%12d  %10.3f  %10.3f  %10.3f  %10.3f  %10.3f  %9.2f  %9.2f  %9.2f  %9.2f\n", s, f * s / r / 1e3,
             f * s / h / 1e3, f * s / a / 1e3, o ? f * s / o / 1e3 : 0, g ? f * s / g / 1e3 : 0, r / h,
             o ? o / a : 0, g ? g / a : 0, f * s / a / 1e3 / link
    }
  }' P="$np" "$tmp/ring" "$tmp/hierarchical" "$tmp/auto" "$tmp/ompi" "$tmp/gloo" | sort -n
