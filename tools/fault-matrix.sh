#!/usr/bin/env bash
# The fault matrix: collective x transport x fault x what is struck, TRIALS times. Four
# ranks run one collective in a loop (tests/multiproc/fault_victim.cc, started as plain
# processes: rank 0 hosts the rendezvous store, as under mpirun); once all run, after a
# random 50-500 ms, the script strikes:
#   kill   SIGKILL to a rank: no chance to clean up;
#   stop   SIGSTOP to a rank: it hangs holding its slots and sockets (killed after the trial);
#   close  a rank shuts down one of its TCP connections to a peer (SIGUSR1 to the victim;
#          tcp only): to that peer the connection was closed; the striking rank must fail too;
#   kill, stop of the store: the store's host is a process that is not a rank (it made the
#          kolo_unique_id the ranks joined with); the ranks run "split". Nothing of a
#          communicator depends on that process after init (as with NCCL): their splits must
#          go on for 1.5 s without an error, then rank 1 is killed and the others must fail;
#   cut    (--hosts) 2 test hosts x 2 ranks (tools/testhosts.sh, needs root), host 1's link
#          set down with `ip link`; every rank must fail, on both hosts.
# Every rank left running must return an error within KOLO_TIMEOUT (10 s; --timeout) of the
# strike, then destroy its communicator leaving no file descriptor, thread or shared mapping
# behind (rank 0 keeps the store it hosts), and no kolo entry may appear in /dev/shm (kolo's
# segments are memfds; other programs' entries there are ignored). Prints per cell the
# trials that passed and the survivors' time from strike to error (min / median / max).
#   tools/fault-matrix.sh [--short] [--trials N] [--coll A,B] [--fault F,G] [--via T,U] [--timeout S]
#                         [--hosts] [--keep DIR] BUILD_DIR_OR_VICTIM
# --short: allreduce and alltoall x shm, tcp x kill, stop, rank 1 struck, split x store
# killed, one trial each (the ctest `fault` label runs this). --hosts: only the cut cells
# (tcp, and ucx when the victim is built with it); with --short, allreduce and split over
# each. --keep DIR: the logs of each failed
# trial go there, with the threads' stacks (gdb) of every rank that hung. --np N: N ranks
# (default 4; with --hosts, 2 per test host), --bytes B: bytes per call (default 4 MB); the
# scale runs use `--np 256 --bytes 8192` (docs/scale.md). Exit status non-zero when a trial
# failed.
set -uo pipefail
short=0 trials=20 only_colls='' only_faults='' only_via='' hosts=0 timeout_s=10 keep='' np=4 bytes=$((4 << 20))
while [ $# -gt 1 ]; do
  case $1 in
    --short) short=1; trials=1; shift ;;
    --trials) trials=${2:?}; shift 2 ;;
    --coll) only_colls=${2:?}; shift 2 ;;
    --fault) only_faults=${2:?}; shift 2 ;;
    --via) only_via=${2:?}; shift 2 ;;
    --timeout) timeout_s=${2:?}; shift 2 ;;
    --hosts) hosts=1; shift ;;
    --keep) keep=${2:?}; shift 2 ;;
    --np) np=${2:?}; shift 2 ;;
    --bytes) bytes=${2:?}; shift 2 ;;
    *) echo "usage: fault-matrix.sh [--short] [--trials N] [--coll A,B] [--fault F,G] [--via T,U] [--timeout S] [--hosts] [--keep DIR] [--np N] [--bytes B] BUILD_DIR_OR_VICTIM" >&2; exit 2 ;;
  esac
done
victim=${1:?usage: fault-matrix.sh [options] BUILD_DIR_OR_VICTIM}
[ -d "$victim" ] && victim=$victim/tests/multiproc/kolo_fault_victim
[ -x "$victim" ] || { echo "fault-matrix: no victim program at $victim" >&2; exit 2; }
victim=$(cd "$(dirname "$victim")" && pwd)/$(basename "$victim")
testhosts=$(cd "$(dirname "$0")" && pwd)/testhosts.sh
prefix=fm$$

# The cells, one per line: collective transport fault struck ("rank N", "store", "host 1").
cells() {
  local colls=(allreduce allgather broadcast reduce_scatter alltoall barrier split) c t f s
  [ "$short" -eq 1 ] && colls=(allreduce alltoall)
  if [ "$hosts" -eq 1 ]; then
    local via=(tcp)
    # (grep reads all of ldd's output: with -q, ldd could die of SIGPIPE and pipefail say no)
    ldd "$victim" 2>/dev/null | grep libucp >/dev/null && via+=(ucx)
    if [ "$short" -eq 1 ]; then
      for t in "${via[@]}"; do printf '%s\n' "allreduce $t cut host1" "split $t cut host1"; done
      return
    fi
    for c in "${colls[@]}"; do for t in "${via[@]}"; do echo "$c $t cut host1"; done; done
    return
  fi
  for c in "${colls[@]}"; do
    for t in shm tcp; do
      for f in kill stop close; do
        [ "$f" = close ] && { [ "$t" = tcp ] && [ "$short" -eq 0 ] || continue; }
        for s in 1 0; do [ "$short" -eq 1 ] && [ "$s" = 0 ] || echo "$c $t $f rank$s"; done
      done
    done
  done
  for t in shm tcp; do
    for f in kill stop; do [ "$short" -eq 1 ] && { [ "$t" = shm ] && [ "$f" = kill ] || continue; }; echo "split $t $f store"; done
  done
}

work=$(mktemp -d)
pids=() store_pid=
cleanup() {
  for p in "${pids[@]}" $store_pid; do kill -KILL "$p" 2>/dev/null; done
  [ "$hosts" -eq 1 ] && "$testhosts" --prefix "$prefix" down >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
host_addr() { ip netns exec "$prefix-h$1" ip -4 -o addr show dev eth0 | awk '{ sub("/.*", "", $4); print $4 }'; }
if [ "$hosts" -eq 1 ]; then
  if ! why=$("$testhosts" check 2>&1); then echo "fault-matrix: cannot make test hosts here: $why" >&2; exit 77; fi
  "$testhosts" --prefix "$prefix" up 2 >/dev/null || exit 1
fi
failures=0

# Waits for COUNT lines matching PATTERN in the logs, up to 30 s.
wait_for_logs() {
  local pattern=$1 count=$2 i
  for i in $(seq 1 300); do
    [ "$(cat "$logs"/*.log 2>/dev/null | grep -c "$pattern")" -ge "$count" ] && return 0
    sleep 0.1
  done
  return 1
}

# One trial; appends the survivors' strike-to-error seconds to $work/times; returns 0 if it passed.
trial() {
  local coll=$1 transport=$2 fault=$3 struck=$4 r i t_fault ok=0 shm_before shm_after
  logs=$work/logs
  rm -rf "$logs" && mkdir -p "$logs"
  shm_before=$(ls -A /dev/shm 2>/dev/null | grep -i kolo | sort)
  export KOLO_SIZE=$np KOLO_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
  export KOLO_TIMEOUT=$timeout_s FM_COLL=$coll FM_BYTES=$bytes
  unset FM_ID_FILE KOLO_TRANSPORTS
  local addr=127.0.0.1 launch=()
  if [ "$fault" = cut ]; then  # shared memory within a test host, $transport between them
    addr=$(host_addr 0)
    export KOLO_TRANSPORTS=shm,$transport
  elif [ "$transport" = tcp ]; then
    export KOLO_TRANSPORTS=tcp
  fi
  export KOLO_ADDR=$addr:$(free_port)
  if [ "$struck" = store ]; then
    export FM_ID_FILE=$work/id
    rm -f "$FM_ID_FILE"
    FM_ROLE=store setsid "$victim" >"$logs/store.log" 2>&1 &
    store_pid=$!
    wait_for_logs '^store: hosting$' 1 || { echo "  store did not start: $(cat "$logs/store.log")"; return 1; }
  fi
  pids=()
  for r in $(seq 0 $((np - 1))); do
    [ "$fault" = cut ] && launch=("$testhosts" exec "$prefix-h$((r * 2 / np))")
    # Each rank in a session of its own: a SIGSTOPped rank in a process group that the
    # kernel deems orphaned is sent SIGCONT when a member exits (POSIX job control).
    KOLO_RANK=$r setsid "${launch[@]}" "$victim" >"$logs/rank$r.log" 2>&1 &
    pids+=($!)
  done
  if ! wait_for_logs ': running$' "$np"; then
    echo "  did not start: $(tail -qn1 "$logs"/*.log | tr '\n' ' ')"; return 1
  fi
  sleep "0.$(printf '%03d' $((50 + RANDOM % 450)))"
  t_fault=$(date +%s.%N)
  local target=-1 state_at_strike=
  case $fault/$struck in
    */store)
      kill "-${fault^^}" "$store_pid"
      sleep 1.5
      for r in $(seq 0 $((np - 1))); do
        if ! kill -0 "${pids[$r]}" 2>/dev/null || grep -q "error at" "$logs/rank$r.log"; then
          echo "  rank $r stopped after the store's host was struck: $(tail -qn1 "$logs/rank$r.log")"; return 1
        fi
      done
      t_fault=$(date +%s.%N) target=1
      kill -KILL "${pids[1]}" ;;
    cut/*) ip link set "$prefix-v1" down ;;
    close/rank*) target=-2; kill -USR1 "${pids[${struck#rank}]}" ;;   # the closing rank must fail too
    */rank*) target=${struck#rank}; kill "-${fault^^}" "${pids[$target]}" ;;
  esac
  # A stopped rank must stay stopped until the trial ends (state T in /proc/PID/stat).
  if [ "$fault" = stop ] && [ "$target" -ge 0 ]; then
    sleep 0.05
    state_at_strike=$(awk '{ print $3 }' "/proc/${pids[$target]}/stat" 2>/dev/null)
  fi
  if [ "$fault" = close ]; then  # the strike is the shutdown itself, once the rank has picked a busy socket
    wait_for_logs '^close: ' 1
    t_fault=$(sed -n 's/^close: shut down socket [0-9]* at \([0-9.]*\),.*/\1/p' "$logs/$struck.log" | sed -n 1p)
    [ -n "$t_fault" ] || t_fault=$(date +%s.%N)
  fi
  local deadline=$((SECONDS + timeout_s * 3 + 10)) codes=()
  for r in $(seq 0 $((np - 1))); do
    [ "$r" -eq "$target" ] && { codes+=(-); continue; }
    while kill -0 "${pids[$r]}" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.05; done
    if kill -0 "${pids[$r]}" 2>/dev/null; then
      [ -n "$keep" ] && command -v gdb >/dev/null &&
        timeout 60 gdb -q -batch -p "${pids[$r]}" -ex 'thread apply all bt' >"$logs/rank$r.stacks" 2>&1
      kill -KILL "${pids[$r]}"; codes+=(hung); wait "${pids[$r]}" 2>/dev/null
    else wait "${pids[$r]}"; codes+=($?); fi
  done
  if [ "$fault" = stop ] && [ "$target" -ge 0 ]; then
    local state_now
    state_now=$(awk '{ print $3 }' "/proc/${pids[$target]}/stat" 2>/dev/null)
    [ "$state_at_strike" = T ] && [ "$state_now" = T ] ||
      { echo "  rank $target was not kept stopped: state ${state_at_strike:-gone} after the strike, ${state_now:-gone} at the end"; ok=1; }
  fi
  [ "$target" -ge 0 ] && { kill -KILL "${pids[$target]}" 2>/dev/null; wait "${pids[$target]}" 2>/dev/null; }
  [ -n "$store_pid" ] && { kill -KILL "$store_pid" 2>/dev/null; wait "$store_pid" 2>/dev/null; store_pid=; }
  [ "$fault" = cut ] && ip link set "$prefix-v1" up
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
    # Whether its error names the struck rank (a kill or stop of a rank).
    if [ "$target" -ge 0 ]; then
      if grep -qE "rank $target([^0-9]|$)" <<<"$line"; then echo named >>"$work/named"; else echo "$line" >>"$work/unnamed"; fi
    fi
    if awk -v t="$took" -v lim="$timeout_s" 'BEGIN { exit !(t > lim + 1) }'; then
      echo "  rank $r: error ${took} s after the strike (KOLO_TIMEOUT $timeout_s)"; ok=1
    fi
  done
  if [ "$fault" = close ] && ! grep -q "close: shut down" "$logs/$struck.log"; then
    echo "  $struck closed no socket: $(grep close: "$logs/$struck.log")"; ok=1
  fi
  shm_after=$(ls -A /dev/shm 2>/dev/null | grep -i kolo | sort)
  [ "$shm_before" = "$shm_after" ] || { echo "  /dev/shm changed: [$shm_after]"; ok=1; }
  if [ "$ok" -ne 0 ] && [ -n "$keep" ]; then
    local kept=$keep/$coll-$transport-$fault-$struck-$RANDOM
    mkdir -p "$kept" && cp "$logs"/* "$kept"/ && echo "  logs kept in $kept"
  fi
  return $ok
}

printf "%-15s %-4s %-5s %-6s %7s  %-28s %s\n" collective via fault struck passed "strike -> error, s (min / median / max)" "errors naming the struck rank"
while read -r coll transport fault struck; do
  [ -n "$only_colls" ] && [[ ",$only_colls," != *",$coll,"* ]] && continue
  [ -n "$only_faults" ] && [[ ",$only_faults," != *",$fault,"* ]] && continue
  [ -n "$only_via" ] && [[ ",$only_via," != *",$transport,"* ]] && continue
  : >"$work/times"; : >"$work/named"; : >"$work/unnamed"
  passed=0
  for t in $(seq 1 "$trials"); do
    # (stderr: the shell's "Killed" notes of the struck ranks)
    if trial "$coll" "$transport" "$fault" "$struck" 2>/dev/null; then passed=$((passed + 1)); else failures=$((failures + 1)); fi
  done
  named=$(wc -l <"$work/named") unnamed=$(wc -l <"$work/unnamed")
  printf "%-15s %-4s %-5s %-6s %3d/%-3d  %-28s %s\n" "$coll" "$transport" "$fault" "$struck" "$passed" "$trials" \
    "$(sort -n "$work/times" | awk '{ v[NR] = $1 } END { if (NR) printf "%.3f / %.3f / %.3f", v[1], v[int((NR + 1) / 2)], v[NR] }')" \
    "$([ $((named + unnamed)) -gt 0 ] && echo "$named of $((named + unnamed))")"
  if [ -n "$keep" ] && [ "$unnamed" -gt 0 ]; then
    mkdir -p "$keep" && cp "$work/unnamed" "$keep/unnamed-$coll-$transport-$fault-$struck"
  fi
done < <(cells)
echo "fault matrix: $failures failed trials"
[ "$failures" -eq 0 ]
