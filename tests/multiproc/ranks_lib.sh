# Sourced by the fault tests: starts ranks as plain processes (rank 0 hosts the store, as
# under mpirun or a scheduler), waits for all, and leaves codes[r] and elapsed (seconds).

# A port for rank 0's store: below Linux's ephemeral range (32768 up, where other tests'
# connections take their local ports) and free now (bound and released once to check).
free_port() {
  local port i
  for i in $(seq 1 50); do
    port=$(( 20000 + RANDOM % 12000 ))
    if /usr/bin/python3 -c "import socket,sys; s=socket.socket(); s.bind(('127.0.0.1', $port))" 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  echo "$port"
}
#   run_ranks WORKER SCENARIO NP OUTER_TIMEOUT LOG_DIR
# LATE_RANK=r LATE_S=s in the environment start rank r s seconds after the others.
run_ranks() {
  local worker=$1 scenario=$2 np=$3 limit=$4 logs=$5 r start
  export KOLO_SIZE=$np KOLO_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
  export KOLO_ADDR=127.0.0.1:$(free_port)
  start=$(date +%s)
  local pids=()
  for r in $(seq 0 $((np - 1))); do
    if [ "$r" = "${LATE_RANK:-}" ]; then
      (sleep "$LATE_S"; KOLO_RANK=$r exec timeout "$limit" "$worker" "$scenario") >"$logs/rank$r.log" 2>&1 &
    else
      KOLO_RANK=$r timeout "$limit" "$worker" "$scenario" >"$logs/rank$r.log" 2>&1 &
    fi
    pids+=($!)
  done
  codes=()
  for r in $(seq 0 $((np - 1))); do wait "${pids[$r]}"; codes+=($?); done
  elapsed=$(( $(date +%s) - start ))
  cat "$logs"/rank*.log
  unset KOLO_SIZE KOLO_SECRET KOLO_ADDR
}

# Every rank but 1 must exit 0 having reported the expected failure.
check_survivors() {
  local np=$1 logs=$2 r
  for r in $(seq 0 $((np - 1))); do
    [ "$r" -eq 1 ] && continue
    [ "${codes[$r]}" -eq 0 ] || fail "rank $r exit ${codes[$r]} (124 = hung)"
    grep -q "rank $r: allreduce failed as expected" "$logs/rank$r.log" || fail "rank $r did not report the error"
  done
}
