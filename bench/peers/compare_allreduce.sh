#!/usr/bin/env bash
# kolo vs Open MPI vs MPICH vs Gloo vs torch.distributed (Gloo backend) allreduce, side by
# side in one run on this machine: the benchmarks run alternately (kolo, Open MPI, MPICH,
# Gloo, torch-gloo, kolo, ...) and per size the MEDIAN time of each over the rounds is
# kept, so a noisy moment hurts all alike and a lucky one does not decide. Prints the
# machine's copy bandwidth and the bound it implies, then per size the busbw figures, kolo's
# ratio to the faster of Open MPI and MPICH (and which it was), to Gloo and to torch-gloo,
# and the median times.
#   bench/peers/compare_allreduce.sh [build-dir] [np] [min] [max] [rounds]
# defaults: build 2 8 256M 3; ITERS=20 WARMUP=5 in the environment change -n / -w;
# PEERS="kolo ompi mpich" leaves the others out;
# LATENCY=1 runs every benchmark with --latency (each call timed alone) and adds a table
# of the per-call median and p99 (every rank's calls pooled; median over the rounds), e.g.
#   LATENCY=1 ITERS=2000 bench/peers/compare_allreduce.sh build 2 8 4K 3
# Peers that are not on the machine (not built, no launcher) are skipped with a note:
#   Open MPI  build/bench/peers/mpi_allreduce_perf, mpirun.openmpi (or mpirun) — its defaults
#             (shared memory, single-copy CMA; ranks bound to cores when they fit)
#   MPICH     build/bench/peers/mpich_allreduce_perf, mpiexec.mpich (hydra, fork launcher;
#             -bind-to core when the ranks fit the cores, as the others are) — libmpich-dev
#   Gloo      build/bench/peers/gloo_allreduce_perf under kolorun (TCP over loopback)
#   torch     bench/peers/torch_allreduce_perf.py under kolorun with $PYTHON
#             (default /usr/bin/python3) when it imports torch with Gloo (python3-torch)
# Ratios are time(peer) / time(kolo): above 1, kolo is faster.
set -euo pipefail
build=${1:-build} np=${2:-2} min=${3:-8} max=${4:-256M} rounds=${5:-3}
iters=${ITERS:-20} warmup=${WARMUP:-5} python=${PYTHON:-/usr/bin/python3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm=isolated
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
kolorun="$build/tools/kolorun/kolorun"
args=(-b "$min" -e "$max" -f 4 -n "$iters" -w "$warmup")
[ "${LATENCY:-0}" = 1 ] && args+=(--latency)

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

# Which peers this machine has.
# shellcheck source=mpi_peers.sh
source "$(dirname "$0")/mpi_peers.sh"
if [ -x "$build/bench/peers/gloo_allreduce_perf" ]; then peers+=(gloo)
else note "Gloo skipped (needs libgloo-dev: $build/bench/peers/gloo_allreduce_perf)"; fi
if "$python" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null; then peers+=(torch)
else note "torch-gloo skipped (needs $python with torch and torch.distributed's Gloo backend)"; fi

# PEERS="kolo ompi mpich" runs only those (of the ones this machine has).
if [ -n "${PEERS:-}" ]; then
  wanted=()
  for peer in "${peers[@]}"; do [[ " $PEERS " == *" $peer "* ]] && wanted+=("$peer"); done
  peers=("${wanted[@]}")
fi

# One run of one peer: its table lines appended to $tmp/<peer>, its first header line kept.
run() {
  local peer=$1 round=$2 out="$tmp/out"
  local dir="$tmp/rdv-$peer-$round"
  mkdir -p "$dir"
  local rc=0
  case $peer in
    kolo)  "$kolorun" --no-prefix -np "$np" "$build/bench/perf/kolo-perf" allreduce "${args[@]}" -c 1 >"$out" || rc=$? ;;
    ompi)  "$ompirun" --oversubscribe -np "$np" "$build/bench/peers/mpi_allreduce_perf" "${args[@]}" >"$out" || rc=$? ;;
    mpich) "$mpichrun" -launcher fork "${mpich_bind[@]}" -n "$np" "$build/bench/peers/mpich_allreduce_perf" "${args[@]}" \
             >"$out" || rc=$? ;;
    gloo)  "$kolorun" --no-prefix -np "$np" "$build/bench/peers/gloo_allreduce_perf" -d "$dir" "${args[@]}" >"$out" || rc=$? ;;
    torch) "$kolorun" --no-prefix -np "$np" "$python" "$here/torch_allreduce_perf.py" -d "$dir" "${args[@]}" >"$out" || rc=$? ;;
  esac
  if [ $rc != 0 ] || ! grep -q "Out of bounds values : 0 OK" "$out"; then
    note "$peer failed in round $round (exit $rc); its lines of this round are left out"
    return
  fi
  [ -s "$tmp/$peer.head" ] || grep -m1 '^#' "$out" >"$tmp/$peer.head" || true
  grep -v '^#' "$out" >>"$tmp/$peer" || true
}
for round in $(seq 1 "$rounds"); do
  for peer in "${peers[@]}"; do run "$peer" "$round"; done
done
for peer in kolo ompi mpich gloo torch; do
  touch "$tmp/$peer"
  [ -s "$tmp/$peer.head" ] && echo "# $peer: $(sed 's/^# *//' "$tmp/$peer.head")"
done

echo "# allreduce float sum, $np ranks, median of $rounds alternating rounds (${peers[*]}), -n $iters -w $warmup;"
echo "# busbw in GB/s from the median time (out-of-place); kolo/mpi: against the faster of Open MPI and MPICH"
printf "%12s  %8s  %8s  %8s  %8s  %8s  %8s  %5s  %9s  %10s  %10s  %10s  %10s  %10s  %10s\n" size kolo ompi mpich gloo \
  torch kolo/mpi mpi kolo/gloo kolo/torch kolo_us ompi_us mpich_us gloo_us torch_us
# Per peer and size, the median over the rounds of column `col` of the table lines.
# shellcheck disable=SC2016
medians='
  function median(key,   n, i, j, v, a) {
    n = cnt[key]
    for (i = 1; i <= n; ++i) a[i] = t[key, i]
    for (i = 2; i <= n; ++i) { v = a[i]; for (j = i - 1; j >= 1 && a[j] > v; --j) a[j + 1] = a[j]; a[j + 1] = v }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  function num(x, w, d) { return x == "" ? sprintf("%" w "s", "-") : sprintf("%" w "." d "f", x) }
  BEGIN { split("kolo ompi mpich gloo torch", names, " ") }
  FNR == 1 { name = FILENAME; sub(/.*\//, "", name) }
  NF >= col { key = name SUBSEP $1; t[key, ++cnt[key]] = $col; sizes[$1] = 1 }
  function medians_of(s) {
    delete m
    for (p = 1; p <= 5; ++p) if ((names[p] SUBSEP s) in cnt) m[names[p]] = median(names[p] SUBSEP s)
  }
'
files=("$tmp/kolo" "$tmp/ompi" "$tmp/mpich" "$tmp/gloo" "$tmp/torch")
awk -v np="$np" -v col=6 "$medians"'
  function bus(s, us) { return us > 0 ? s / us / 1e3 * factor : 0 }
  END {
    factor = np > 1 ? 2 * (np - 1) / np : 1
    for (s in sizes) {
      medians_of(s)
      best = ""; which = "-"
      if ("ompi" in m) { best = m["ompi"]; which = "ompi" }
      if (("mpich" in m) && (best == "" || m["mpich"] < best)) { best = m["mpich"]; which = "mpich" }
      k = ("kolo" in m) ? m["kolo"] : ""
      r_mpi = (k != "" && best != "") ? best / k : ""
      r_gloo = (k != "" && ("gloo" in m)) ? m["gloo"] / k : ""
      r_torch = (k != "" && ("torch" in m)) ? m["torch"] / k : ""
      line = sprintf("%12d", s)
      for (p = 1; p <= 5; ++p) line = line "  " num((names[p] in m) ? bus(s, m[names[p]]) : "", 8, 2)
      line = line "  " num(r_mpi, 8, 2) "  " sprintf("%5s", which) "  " num(r_gloo, 9, 2) "  " num(r_torch, 10, 2)
      for (p = 1; p <= 5; ++p) line = line "  " num((names[p] in m) ? m[names[p]] : "", 10, 2)
      print line
    }
  }
' "${files[@]}" | sort -n

[ "${LATENCY:-0}" = 1 ] || exit 0
echo "# per-call latency in us (--latency: each out-of-place call timed alone, every rank's calls pooled),"
echo "# median over the rounds of each run's median (p50) and p99; Gloo and torch over TCP, torch from Python"
printf "%12s  %9s  %9s  %9s  %9s  %9s    %9s  %9s  %9s  %9s  %9s    %9s  %9s\n" size kolo_p50 ompi_p50 mpich_p50 gloo_p50 \
  torch_p50 kolo_p99 ompi_p99 mpich_p99 gloo_p99 torch_p99 p50/mpi p99/mpi
# The ratios: the faster MPI's median (p50, p99) over kolo's; above 1, kolo is faster.
ratio='function ratio(   best) { best = ""
    if ("ompi" in m) best = m["ompi"]
    if (("mpich" in m) && (best == "" || m["mpich"] < best)) best = m["mpich"]
    return ("kolo" in m) && best != "" && m["kolo"] > 0 ? best / m["kolo"] : "-" }'
paste -d' ' \
  <(awk -v col=15 "$medians"'END { for (s in sizes) { medians_of(s); line = sprintf("%12d", s)
      for (p = 1; p <= 5; ++p) line = line "  " num((names[p] in m) ? m[names[p]] : "", 9, 3); print line } }' \
      "${files[@]}" | sort -n) \
  <(awk -v col=16 "$medians"'END { for (s in sizes) { medians_of(s); line = sprintf("%12d", s) "  "
      for (p = 1; p <= 5; ++p) line = line "  " num((names[p] in m) ? m[names[p]] : "", 9, 3); print line } }' \
      "${files[@]}" | sort -n | cut -c13-) \
  <(paste -d' ' \
      <(awk -v col=15 "$medians$ratio"'END { for (s in sizes) { medians_of(s); print s, ratio() } }' "${files[@]}" | sort -n) \
      <(awk -v col=16 "$medians$ratio"'END { for (s in sizes) { medians_of(s); print s, ratio() } }' "${files[@]}" | sort -n) |
    awk '{ printf "   %9s  %9s\n", $2 == "-" ? "-" : sprintf("%.3f", $2), $4 == "-" ? "-" : sprintf("%.3f", $4) }')
