#!/usr/bin/env bash
# kolo vs Open MPI allreduce, side by side in one run on this machine: the two benchmarks
# run alternately (kolo, MPI, kolo, MPI, ...) and the best busbw of each per size is kept,
# so a noisy moment hurts both alike. Prints size, both busbw figures and their ratio.
#   bench/peers/compare_allreduce.sh [build-dir] [np] [min] [max] [rounds]
set -euo pipefail
build=${1:-build} np=${2:-2} min=${3:-8} max=${4:-256M} rounds=${5:-2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm=isolated OMPI_MCA_btl_vader_single_copy_mechanism=none
tmp=$(mktemp -d)
for round in $(seq 1 "$rounds"); do
  "$build/tools/kolorun/kolorun" --no-prefix -np "$np" "$build/bench/perf/kolo-perf" allreduce -b "$min" -e "$max" -f 4 -n 20 -w 5 -c 1 \
    | grep -v '^#' >>"$tmp/kolo"
  mpirun --oversubscribe -np "$np" "$build/bench/peers/mpi_allreduce_perf" -b "$min" -e "$max" -f 4 -n 20 -w 5 \
    | grep -v '^#' >>"$tmp/mpi"
done
echo "# allreduce float sum, $np ranks, best of $rounds alternating rounds; busbw in GB/s (out-of-place)"
printf "%12s  %10s  %10s  %8s  %10s  %10s\n" size kolo_busbw mpi_busbw ratio kolo_us mpi_us
awk '
  FNR == NR { if (!($1 in kb) || $8 > kb[$1]) { kb[$1] = $8; kt[$1] = $6 } next }
  { if (!($1 in mb) || $8 > mb[$1]) { mb[$1] = $8; mt[$1] = $6 } }
  END { for (s in kb) if (s in mb) printf "%12d  %10.2f  %10.2f  %8.2f  %10.1f  %10.1f\n", s, kb[s], mb[s], (mb[s] > 0 ? kb[s] / mb[s] : 0), kt[s], mt[s] }
' "$tmp/kolo" "$tmp/mpi" | sort -n
rm -rf "$tmp"
