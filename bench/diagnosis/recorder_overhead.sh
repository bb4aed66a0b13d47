#!/usr/bin/env bash
# The flight recorder's cost on the smallest call (issue 49's target: <= 2 % on an 8 B
# allreduce at 2 ranks): bench/perf/kolo_breakdown's per-call time with the recorder off
# (KOLO_TRACE_CALLS=0) and on (1024, the default), alternating in one run, ROUNDS rounds of
# ITERS timed calls each; prints each round's median, p99 and mean (the mean resolves what a
# median in ~10 ns steps of some VMs' timestamp counter cannot) and the ratio of the medians
# of the rounds' means.
#   recorder_overhead.sh BUILD_DIR [ROUNDS] [ITERS] [BYTES] [RANKS]
set -euo pipefail
build=${1:?usage: recorder_overhead.sh BUILD_DIR [ROUNDS] [ITERS] [BYTES] [RANKS]}
rounds=${2:-9}
iters=${3:-20000}
bytes=${4:-8}
ranks=${5:-2}
kolorun=$build/tools/kolorun/kolorun
breakdown=$build/bench/perf/kolo_breakdown
one() {  # prints "p50 p99 mean" (ns) of rank 0, with KOLO_TRACE_CALLS=$1
  KOLO_TRACE_CALLS=$1 "$kolorun" -np "$ranks" --no-prefix --no-trace "$breakdown" -b "$bytes" -n "$iters" 2>&1 |
    awk '/^whole call/ { print $(NF-3), $(NF-2), $NF }'
}
echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; $ranks ranks, $bytes B allreduce, $iters calls per round"
echo "# round  off_p50  off_p99  off_mean  on_p50  on_p99  on_mean   (ns)"
off=() on=()
for ((r = 1; r <= rounds; ++r)); do
  read -r a a99 am <<< "$(one 0)"
  read -r b b99 bm <<< "$(one 1024)"
  off+=("$am") on+=("$bm")
  printf '%7d  %7s  %7s  %8s  %6s  %6s  %7s\n' "$r" "$a" "$a99" "$am" "$b" "$b99" "$bm"
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
m_off=$(median "${off[@]}") m_on=$(median "${on[@]}")
awk -v a="$m_off" -v b="$m_on" 'BEGIN { printf "median of the round means: off %.1f ns, on %.1f ns: on/off %.3f (%+.1f %%)\n", a, b, b / a, (b / a - 1) * 100 }'
