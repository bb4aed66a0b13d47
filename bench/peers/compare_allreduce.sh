#!/usr/bin/env bash
# kolo vs Open MPI vs Gloo allreduce, side by side in one run on this machine: the three
# benchmarks run alternately (kolo, MPI, Gloo, kolo, ...) and the best busbw of each per
# size is kept, so a noisy moment hurts all alike. Prints, per size, the busbw figures and
# kolo's ratio to each peer; first the machine's copy bandwidth and the bound it implies.
#   bench/peers/compare_allreduce.sh [build-dir] [np] [min] [max] [rounds]
# Open MPI runs with its defaults (shared memory, single-copy CMA); Gloo over loopback TCP.
set -euo pipefail
build=${1:-build} np=${2:-2} min=${3:-8} max=${4:-256M} rounds=${5:-2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm=isolated
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
kolorun="$build/tools/kolorun/kolorun"

# Copy bandwidth (memcpy of 64 MiB; read + write bytes), one process and two at once.
copy_rate() {
  "$build/bench/kernels/kolo_kernels_bench" --benchmark_filter='BM_Memcpy/16777216$' --benchmark_min_time=0.3 \
    --benchmark_format=csv 2>/dev/null | awk -F, '/BM_Memcpy/ { printf "%.1f", $6 / 1e9 }'
}
if [ -x "$build/bench/kernels/kolo_kernels_bench" ]; then
  one=$(copy_rate)
  copy_rate >"$tmp/c1" & copy_rate >"$tmp/c2"; wait
  two=$(awk '{ s += $1 } END { printf "%.1f", s }' "$tmp/c1" "$tmp/c2")
  echo "# memcpy 64 MiB, read+write GB/s: one core $one, two cores together $two"
  echo "# bound for a 2-rank allreduce staged through cache (each rank reads its input once and"
  echo "# writes its output once): busbw <= (two cores' traffic) / 4 = $(awk -v t="$two" 'BEGIN { printf "%.1f", t / 4 }') GB/s"
fi

have_mpi=0 have_gloo=0
[ -x "$build/bench/peers/mpi_allreduce_perf" ] && command -v mpirun >/dev/null && have_mpi=1
[ -x "$build/bench/peers/gloo_allreduce_perf" ] && have_gloo=1
for round in $(seq 1 "$rounds"); do
  "$kolorun" --no-prefix -np "$np" "$build/bench/perf/kolo-perf" allreduce -b "$min" -e "$max" -f 4 -n 20 -w 5 -c 1 \
    | grep -v '^#' >>"$tmp/kolo"
  if [ $have_mpi = 1 ]; then
    mpirun --oversubscribe -np "$np" "$build/bench/peers/mpi_allreduce_perf" -b "$min" -e "$max" -f 4 -n 20 -w 5 \
      | grep -v '^#' >>"$tmp/mpi"
  fi
  if [ $have_gloo = 1 ]; then
    mkdir -p "$tmp/gloo$round"
    "$kolorun" --no-prefix -np "$np" "$build/bench/peers/gloo_allreduce_perf" -d "$tmp/gloo$round" -b "$min" -e "$max" -f 4 -n 20 -w 5 \
      | grep -v '^#' >>"$tmp/gloo"
  fi
done
touch "$tmp/mpi" "$tmp/gloo"
echo "# allreduce float sum, $np ranks, best of $rounds alternating rounds; busbw in GB/s (out-of-place)"
printf "%12s  %10s  %10s  %10s  %9s  %9s  %10s  %10s  %10s\n" size kolo mpi gloo kolo/mpi kolo/gloo kolo_us mpi_us gloo_us
# Best = shortest time; busbw and the ratios follow from it (ratio > 1: kolo is faster).
awk '
  { name = FILENAME; sub(/.*\//, "", name) }
  name == "kolo" { if (!($1 in k) || $6 < k[$1]) { k[$1] = $6; kb[$1] = $8 } next }
  name == "mpi"  { if (!($1 in m) || $6 < m[$1]) { m[$1] = $6; mb[$1] = $8 } next }
  name == "gloo" { if (!($1 in g) || $6 < g[$1]) { g[$1] = $6; gb[$1] = $8 } next }
  END {
    for (s in k) {
      printf "%12d  %10.2f  %10.2f  %10.2f  %9.2f  %9.2f  %10.2f  %10.2f  %10.2f\n", s, kb[s], mb[s], gb[s],
             ((s in m) ? m[s] / k[s] : 0), ((s in g) ? g[s] / k[s] : 0), k[s], m[s], g[s]
    }
  }
' "$tmp/kolo" "$tmp/mpi" "$tmp/gloo" | sort -n
