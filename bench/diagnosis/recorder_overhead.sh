#!/usr/bin/env bash
# The flight recorder's cost on the smallest call (issue 49's target: <= 2 % on an 8 B
# allreduce at 2 ranks): kolo-perf's per-call latency with the recorder off
# (KOLO_TRACE_CALLS=0) and on (1024, the default), alternating in one run, ROUNDS rounds of
# ITERS timed calls each; prints each round's median and p99 and the ratio of the medians
# of the rounds' medians.
#   recorder_overhead.sh BUILD_DIR [ROUNDS] [ITERS] [BYTES] [RANKS]
set -euo pipefail
build=${1:?usage: recorder_overhead.sh BUILD_DIR [ROUNDS] [ITERS] [BYTES] [RANKS]}
rounds=${2:-9}
iters=${3:-20000}
bytes=${4:-8}
ranks=${5:-2}
kolorun=$build/tools/kolorun/kolorun
perf=$build/bench/perf/kolo-perf
one() {  # prints "p50 p99" of rank 0, with KOLO_TRACE_CALLS=$1
  KOLO_TRACE_CALLS=$1 "$kolorun" -np "$ranks" --no-trace "$perf" allreduce -b "$bytes" -e "$bytes" -n "$iters" \
    -w 1000 -c 0 --latency 2>&1 | awk '/^\[0\] +[0-9]/ { print $(NF-1), $NF }'
}
echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; $ranks ranks, $bytes B allreduce, $iters calls per round"
echo "# round  off_p50  off_p99  on_p50  on_p99   (us)"
off=() on=()
for ((r = 1; r <= rounds; ++r)); do
  read -r a a99 <<< "$(one 0)"
  read -r b b99 <<< "$(one 1024)"
  off+=("$a") on+=("$b")
  printf '%7d  %7s  %7s  %6s  %6s\n' "$r" "$a" "$a99" "$b" "$b99"
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
m_off=$(median "${off[@]}") m_on=$(median "${on[@]}")
awk -v a="$m_off" -v b="$m_on" 'BEGIN { printf "median of medians: off %.3f us, on %.3f us: on/off %.3f (%+.1f %%)\n", a, b, b / a, (b / a - 1) * 100 }'
