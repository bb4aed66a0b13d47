#!/usr/bin/env bash
# kolo vs Open MPI vs MPICH for broadcast, allgather, reduce_scatter and alltoall at a few
# sizes, side by side in one run on this machine: per round, per collective and size, the
# three run alternately (kolo, Open MPI, MPICH, kolo, ...); per (collective, size) the MEDIAN
# time of each over the rounds is kept. Prints busbw (out-of-place, from the median time),
# kolo's ratio to the faster MPI (and which it was), the median times, and the same ratio
# for the in-place calls.
#   bench/peers/compare_collectives.sh [build-dir] [np] [rounds]
# defaults: build 2 3; COLLECTIVES="broadcast allgather reduce_scatter alltoall" and
# SIZES="8 4K 1M 64M" in the environment change what is measured.
# Sizes, counts and busbw are kolo-perf's for every benchmark (bench/perf/perf_collectives.cc;
# bench/peers/mpi_allreduce_perf.cc follows them): the size is the whole buffer, all ranks'
# blocks for allgather, reduce_scatter and alltoall, so it is rounded up to a multiple of
# 4 bytes x ranks there (8 B on 4 ranks is 16 B: one float per rank); busbw = algbw x
# (p-1)/p for those, x 1 for broadcast (root 0). Iterations: 200 (warm-up 20) up to 64 KB,
# 50 (5) up to 4 MB, 10 (2) above. Placements: see mpi_allreduce_perf.cc (out-of-place
# broadcast gives the root's recv the data as kolo's does: MPI's root copies, then MPI_Bcast;
# in place it is MPI_Bcast alone, the like-for-like figure for broadcast).
# Peers not on the machine are skipped with a note (see compare_allreduce.sh).
# Ratios are time(faster MPI) / time(kolo): above 1, kolo is faster.
set -euo pipefail
build=${1:-build} np=${2:-2} rounds=${3:-3}
collectives=${COLLECTIVES:-broadcast allgather reduce_scatter alltoall}
sizes=${SIZES:-8 4K 1M 64M}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm=isolated
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
kolorun="$build/tools/kolorun/kolorun"

# shellcheck source=mpi_peers.sh
source "$(dirname "$0")/mpi_peers.sh"

bytes_of() {  # "4K" -> 4096
  awk -v s="$1" 'BEGIN { m = 1; u = toupper(substr(s, length(s)));
    if (u == "K") m = 1024; else if (u == "M") m = 1048576; else if (u == "G") m = 1073741824;
    printf "%d", (m == 1 ? s : substr(s, 1, length(s) - 1)) * m }'
}

# One run: "<peer> <collective> <size> <out-of-place us> <in-place us>" appended to $tmp/all.
run() {
  local peer=$1 coll=$2 bytes=$3 round=$4 out="$tmp/out" n w rc=0
  if [ "$bytes" -le 65536 ]; then n=200 w=20; elif [ "$bytes" -le 4194304 ]; then n=50 w=5; else n=10 w=2; fi
  local args=(-b "$bytes" -e "$bytes" -n "$n" -w "$w")
  case $peer in
    kolo)  "$kolorun" --no-prefix -np "$np" "$build/bench/perf/kolo-perf" "$coll" "${args[@]}" -c 1 >"$out" || rc=$? ;;
    ompi)  "$ompirun" --oversubscribe -np "$np" "$build/bench/peers/mpi_allreduce_perf" "$coll" "${args[@]}" >"$out" || rc=$? ;;
    mpich) "$mpichrun" -launcher fork "${mpich_bind[@]}" -n "$np" "$build/bench/peers/mpich_allreduce_perf" "$coll" \
             "${args[@]}" >"$out" || rc=$? ;;
  esac
  if [ $rc != 0 ] || ! grep -q "Out of bounds values : 0 OK" "$out"; then
    note "$peer $coll $bytes B failed in round $round (exit $rc); left out"
    return
  fi
  [ -s "$tmp/$peer.head" ] || grep -m1 '^#' "$out" >"$tmp/$peer.head" || true
  awk -v p="$peer" -v c="$coll" '!/^#/ && NF >= 13 { print p, c, $1, $6, $10 }' "$out" >>"$tmp/all"
}

for round in $(seq 1 "$rounds"); do
  for coll in $collectives; do
    for size in $sizes; do
      bytes=$(bytes_of "$size")
      unit=4
      [ "$coll" != broadcast ] && unit=$((4 * np))
      bytes=$(( (bytes + unit - 1) / unit * unit ))
      for peer in "${peers[@]}"; do run "$peer" "$coll" "$bytes" "$round"; done
    done
  done
done
touch "$tmp/all"
for peer in kolo ompi mpich; do
  [ -s "$tmp/$peer.head" ] && echo "# $peer: $(sed 's/^# *//' "$tmp/$peer.head")"
done
echo "# float, $np ranks, median of $rounds alternating rounds (${peers[*]}); busbw in GB/s from the median"
echo "# out-of-place time; kolo/mpi = time(faster of Open MPI and MPICH) / time(kolo), out-of-place and in-place"
printf "%-14s  %10s  %8s  %8s  %8s  %8s  %5s  %10s  %10s  %10s  %8s  %5s\n" collective size kolo ompi mpich kolo/mpi mpi \
  kolo_us ompi_us mpich_us in-place mpi
awk -v np="$np" -v order="$collectives" '
  function median(key, col,   n, i, j, v, a) {
    n = cnt[key]
    for (i = 1; i <= n; ++i) a[i] = t[key, i, col]
    for (i = 2; i <= n; ++i) { v = a[i]; for (j = i - 1; j >= 1 && a[j] > v; --j) a[j + 1] = a[j]; a[j + 1] = v }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  function num(x, w, d) { return x == "" ? sprintf("%" w "s", "-") : sprintf("%" w "." d "f", x) }
  { key = $1 SUBSEP $2 SUBSEP $3; n = ++cnt[key]; t[key, n, 1] = $4; t[key, n, 2] = $5; seen[$2 SUBSEP $3] = 1 }
  END {
    split("kolo ompi mpich", names, " ")
    nc = split(order, colls, " ")
    for (ci = 1; ci <= nc; ++ci) {
      c = colls[ci]
      factor = c == "broadcast" || np < 2 ? 1 : (np - 1) / np
      # sizes of this collective, ascending
      ns = 0
      for (cs in seen) { split(cs, parts, SUBSEP); if (parts[1] == c) s_list[++ns] = parts[2] + 0 }
      for (i = 2; i <= ns; ++i) { v = s_list[i]; for (j = i - 1; j >= 1 && s_list[j] > v; --j) s_list[j + 1] = s_list[j]; s_list[j + 1] = v }
      for (si = 1; si <= ns; ++si) {
        s = s_list[si]
        for (p = 1; p <= 3; ++p) {
          k = names[p] SUBSEP c SUBSEP s
          out[p] = (k in cnt) ? median(k, 1) : ""
          inp[p] = (k in cnt) ? median(k, 2) : ""
        }
        best = ""; which = "-"; ibest = ""; iwhich = "-"
        for (p = 2; p <= 3; ++p) {
          if (out[p] != "" && (best == "" || out[p] < best)) { best = out[p]; which = names[p] }
          if (inp[p] != "" && (ibest == "" || inp[p] < ibest)) { ibest = inp[p]; iwhich = names[p] }
        }
        line = sprintf("%-14s  %10d", c, s)
        for (p = 1; p <= 3; ++p) line = line "  " num(out[p] != "" && out[p] > 0 ? s / out[p] / 1e3 * factor : "", 8, 2)
        line = line "  " num(out[1] != "" && best != "" ? best / out[1] : "", 8, 2) "  " sprintf("%5s", which)
        for (p = 1; p <= 3; ++p) line = line "  " num(out[p], 10, 2)
        line = line "  " num(inp[1] != "" && ibest != "" ? ibest / inp[1] : "", 8, 2) "  " sprintf("%5s", iwhich)
        print line
      }
    }
  }
' "$tmp/all"
