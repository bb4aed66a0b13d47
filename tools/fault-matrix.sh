#!/usr/bin/env bash
# The fault matrix: every collective x transport x fault x struck rank, TRIALS times. Four
# ranks run one collective in a loop (tests/multiproc/fault_victim.cc, started as plain
# processes: rank 0 hosts the rendezvous store, as under mpirun); once all run, after a
# random 50-500 ms, the script strikes one rank:
#   kill  SIGKILL: no chance to clean up;
#   stop  SIGSTOP: it hangs holding its slots and sockets (killed after the trial).
# Every survivor must return an error within KOLO_TIMEOUT (10 s here) of the strike, then
# destroy its communicator leaving no file descriptor, thread or shared mapping behind
# (rank 0 keeps its store), and no kolo entry may appear in /dev/shm (kolo's segments are
# memfds; other programs' entries there are ignored). Prints per cell the trials
# that passed and the survivors' time from strike to error (min / median / max).
#   tools/fault-matrix.sh [--short] [--trials N] [--coll A,B] BUILD_DIR_OR_VICTIM
# --short: allreduce and alltoall x shm, tcp x kill, stop, rank 1 struck, one trial each
# (the ctest `fault` label runs this). Exit status non-zero when any trial failed.
set -uo pipefail
short=0 trials=20 only=
while [ $# -gt 1 ]; do
  case $1 in
    --short) short=1; trials=1; shift ;;
    --trials) trials=${2:?}; shift 2 ;;
    --coll) only=${2:?}; shift 2 ;;
    *) echo "usage: fault-matrix.sh [--short] [--trials N] BUILD_DIR_OR_VICTIM" >&2; exit 2 ;;
  esac
done
victim=${1:?usage: fault-matrix.sh [--short] [--trials N] BUILD_DIR_OR_VICTIM}
[ -d "$victim" ] && victim=$victim/tests/multiproc/kolo_fault_victim
[ -x "$victim" ] || { echo "fault-matrix: no victim program at $victim" >&2; exit 2; }
np=4 timeout_s=10
colls=(allreduce allgather broadcast reduce_scatter alltoall barrier) transports=(shm tcp) faults=(kill stop) struck=(1 0)
[ "$short" -eq 1 ] && colls=(allreduce alltoall) struck=(1)
[ -n "$only" ] && IFS=, read -r -a colls <<<"$only"
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done; rm -rf "$work"; }
trap cleanup EXIT
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
failures=0

# One trial; appends the survivors' strike-to-error seconds to $work/times; returns 0 if it passed.
trial() {
  local coll=$1 transport=$2 fault=$3 target=$4 logs=$work/logs r i t_fault ok=0 shm_before shm_after
  rm -rf "$logs" && mkdir -p "$logs"
  shm_before=$(ls -A /dev/shm 2>/dev/null | grep -i kolo | sort)
  export KOLO_SIZE=$np KOLO_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n') KOLO_ADDR=127.0.0.1:$(free_port)
  export KOLO_TIMEOUT=$timeout_s FM_COLL=$coll FM_BYTES=$((4 << 20))
  if [ "$transport" = tcp ]; then export KOLO_TRANSPORTS=tcp; else unset KOLO_TRANSPORTS; fi
  pids=()
  for r in $(seq 0 $((np - 1))); do
    KOLO_RANK=$r "$victim" >"$logs/rank$r.log" 2>&1 &
    pids+=($!)
  done
  for i in $(seq 1 300); do  # all ranks running (30 s at most)
    [ "$(cat "$logs"/rank*.log 2>/dev/null | grep -c ': running$')" -eq "$np" ] && break
    sleep 0.1
  done
  if [ "$(cat "$logs"/rank*.log | grep -c ': running$')" -ne "$np" ]; then
    echo "  did not start: $(tail -qn1 "$logs"/rank*.log | tr '\n' ' ')"; return 1
  fi
  sleep "0.$(printf '%03d' $((50 + RANDOM % 450)))"
  t_fault=$(date +%s.%N)
  kill "-${fault^^}" "${pids[$target]}"
  local deadline=$((SECONDS + timeout_s * 3 + 10)) codes=()
  for r in $(seq 0 $((np - 1))); do
    [ "$r" -eq "$target" ] && { codes+=(-); continue; }
    while kill -0 "${pids[$r]}" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.05; done
    if kill -0 "${pids[$r]}" 2>/dev/null; then kill -KILL "${pids[$r]}"; codes+=(hung); wait "${pids[$r]}" 2>/dev/null
    else wait "${pids[$r]}"; codes+=($?); fi
  done
  kill -KILL "${pids[$target]}" 2>/dev/null; wait "${pids[$target]}" 2>/dev/null
  pids=()
  for r in $(seq 0 $((np - 1))); do
    [ "$r" -eq "$target" ] && continue
    local line at
    line=$(grep -m1 "error at" "$logs/rank$r.log")
    at=$(sed -n 's/.*error at \([0-9.]*\):.*/\1/p' <<<"$line")
    if [ "${codes[$r]}" != 0 ] || [ -z "$at" ]; then
      echo "  rank $r: exit ${codes[$r]}: $(tail -n2 "$logs/rank$r.log" | tr '\n' ' ')"; ok=1; continue
    fi
    local took
    took=$(awk -v a="$at" -v b="$t_fault" 'BEGIN { printf "%.3f", a - b }')
    echo "$took" >>"$work/times"
    if awk -v t="$took" -v lim="$timeout_s" 'BEGIN { exit !(t > lim + 1) }'; then
      echo "  rank $r: error ${took} s after the strike (KOLO_TIMEOUT $timeout_s)"; ok=1
    fi
  done
  shm_after=$(ls -A /dev/shm 2>/dev/null | grep -i kolo | sort)
  [ "$shm_before" = "$shm_after" ] || { echo "  /dev/shm changed: [$shm_after]"; ok=1; }
  return $ok
}

printf "%-15s %-4s %-5s %-6s %7s  %s\n" collective via fault struck passed "strike -> error, s (min / median / max)"
for coll in "${colls[@]}"; do
  for transport in "${transports[@]}"; do
    for fault in "${faults[@]}"; do
      for target in "${struck[@]}"; do
        : >"$work/times"
        passed=0
        for t in $(seq 1 "$trials"); do
          # (stderr: the shell's "Killed" notes of the struck ranks)
          if trial "$coll" "$transport" "$fault" "$target" 2>/dev/null; then passed=$((passed + 1)); else failures=$((failures + 1)); fi
        done
        printf "%-15s %-4s %-5s %-6s %3d/%-3d  %s\n" "$coll" "$transport" "$fault" "rank $target" "$passed" "$trials" \
          "$(sort -n "$work/times" | awk '{ v[NR] = $1 } END { if (NR) printf "%.3f / %.3f / %.3f", v[1], v[int((NR + 1) / 2)], v[NR] }')"
      done
    done
  done
done
echo "fault matrix: $failures failed trials"
[ "$failures" -eq 0 ]
