#!/usr/bin/env bash
# kolo under MPI launchers: Open MPI's mpirun --hostfile over 4 test hosts on this machine
# (tools/testhosts.sh: network namespaces on a bridge; mpirun starts an orted in each host
# through `testhosts.sh rsh`, its plm_rsh_agent), and MPICH's mpiexec (Hydra) where it is
# installed, results checked.
#
#   mpirun_test.sh BUILD_DIR   # bench/perf/kolo-perf, tools/kolorun/kolorun, libkolo.so in it
#
# Exit 0 when every check passed, 1 when one failed, 77 (skipped) when it cannot run here
# (not root, no network namespaces, no Open MPI). Each check prints one PASS or FAIL line
# (SKIP for a scenario whose tools are missing, INFO/TIME for what is only reported). The
# test hosts are always removed, whatever happens.
#
# Scenarios:
#  1. mpirun --hostfile (4 hosts, slots=4) -np 16 kolo-perf allreduce: 4 ranks a host, no
#     wrong value (kolo reads OMPI_COMM_WORLD_RANK/SIZE; KOLO_ADDR and KOLO_SECRET by -x).
#  2. mpirun -np 8 --map-by ppr:2:node python3 (kolo.torch): hvd.init, an allreduce of
#     rank-dependent values, the sum checked on every rank.
#  3. mpirun -np 8 of the NCCL drop-in's MPI program (tests/nccl/mpi_app.c: unique id by
#     MPI_Bcast, NCCL collectives on kolo's libnccl.so.2), where it was built.
#  4. A rank of a running mpirun job killed (SIGKILL): mpirun ends the job, no rank or
#     orted is left in the test hosts, nothing new in /dev/shm.
#  5. MPICH's mpiexec -f hostfile -launcher ssh -launcher-exec (a one-file wrapper of
#     `testhosts.sh rsh`: Hydra execs that file): kolo reads Hydra's PMI_RANK/PMI_SIZE;
#     kolo-perf on 4 ranks of one host, then 16 over the 4 hosts (through a wrapper that only
#     keeps Hydra's variables of ranks 0 and 15 to print), checked.
#  6. Start-up: the same 16-rank kolo-perf (-b 8 -e 8 -n 1 -w 0) under mpirun and kolorun,
#     3 runs each alternating: medians and their ratio (reported; each run's result checked).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
TESTHOSTS=$SRC/tools/testhosts.sh
# shellcheck source=tests/cluster/lib.sh
source "$HERE/lib.sh"
[ $# -eq 1 ] || { sed -n '7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
BUILD=$(cd "$1" 2>/dev/null && pwd) || { echo "mpirun_test: no build folder $1" >&2; exit 1; }
PERF=$BUILD/bench/perf/kolo-perf
KOLORUN=$BUILD/tools/kolorun/kolorun
LIBKOLO=$BUILD/libkolo.so
MPI_APP=$BUILD/tests/nccl/nccl_dropin_mpi_app
PYTHON=${KOLO_PYTHON:-/usr/bin/python3}
[ -x "$PERF" ] || { echo "mpirun_test: no $PERF (build kolo first)" >&2; exit 1; }

# Open MPI's mpirun (Debian's alternatives may point mpirun at MPICH's).
ompirun=$(command -v mpirun.openmpi || true)
[ -z "$ompirun" ] && [[ $(mpirun --version 2>/dev/null || true) == *"Open MPI"* ]] && ompirun=$(command -v mpirun)
if [ -z "$ompirun" ]; then echo "SKIP: Open MPI's mpirun is not installed (Debian: openmpi-bin)"; exit 77; fi
if ! why=$("$TESTHOSTS" check 2>&1); then echo "SKIP: $why"; exit 77; fi
mpichrun=$(command -v mpiexec.mpich || command -v mpiexec.hydra || true)

# A prefix of our own: other sets (another run of this test, testhosts users) may be up.
PREFIX=kmp$(($$ % 100000))
H=$PREFIX-h
WORK=$(mktemp -d /tmp/kolo-mpirun-test.XXXXXX)
JOB_TIMEOUT=60    # any one mpirun/mpiexec; kolo itself gives up after KOLO_TIMEOUT
started=$SECONDS
bg_pid=''
up=''

teardown() {
  local rc=$?
  # The background mpirun of scenario 4, if the test was stopped during it: TERM to
  # `timeout`, which passes it on to mpirun (killed, timeout would leave mpirun behind).
  if [ -n "$bg_pid" ] && kill -0 "$bg_pid" 2>/dev/null; then
    kill -TERM "$bg_pid" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$bg_pid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$bg_pid" 2>/dev/null || true
  fi
  if [ -n "$up" ]; then "$TESTHOSTS" --prefix "$PREFIX" down || { echo "FAIL: testhosts.sh --prefix $PREFIX down"; rc=1; }; fi
  rm -rf "${WORK:?}"
  echo "mpirun_test: $((SECONDS - started)) s"
  exit "$rc"
}
on_exit teardown
clear_launcher_env
# Open MPI refuses root without these (a container, a CI runner).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export KOLO_TIMEOUT=20

ls -A /dev/shm | sort >"$WORK/shm.before"
ls -A /tmp | sort >"$WORK/tmp.before"

"$TESTHOSTS" --prefix "$PREFIX" up 4 >"$WORK/up.out" 2>&1 || { cat "$WORK/up.out"; echo "FAIL: testhosts.sh up 4"; exit 1; }
up=1
sed 's/^/  /' "$WORK/up.out"
# The hosts' subnet (Open MPI's daemons and the bridge) and rank 0's address (P-h0).
net=$(ip -4 -o addr show "$PREFIX-br" | awk '{ sub(/\.[0-9]+\/24/, ".0/24", $4); print $4 }')
addr0=$(ip -n "${H}0" -4 -o addr show dev eth0 | awk '{ sub(/\/.*/, "", $4); print $4 }')
if [ -z "$net" ] || [ -z "$addr0" ]; then echo "FAIL: no address of the bridge or of ${H}0"; exit 1; fi
for i in 0 1 2 3; do echo "$H$i slots=4"; done >"$WORK/hostfile"
# Every rank needs the same secret outside kolorun (engine/world.cc, job_secret): in the
# environment (-x KOLO_SECRET passes it on; Hydra passes the whole environment), not on a
# command line that ps shows.
KOLO_SECRET=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
export KOLO_SECRET
port=29500
next_addr() { port=$((port + 1)); KADDR=$addr0:$port; }  # a fresh store port a job
# LD_LIBRARY_PATH goes on where it is set (a build run from another folder).
ld=()
[ -n "${LD_LIBRARY_PATH:-}" ] && ld=(-x LD_LIBRARY_PATH)
# shellcheck disable=SC2054  # "self,vader,tcp" is one argument
ompi=("$ompirun" --hostfile "$WORK/hostfile" --mca plm_rsh_agent "$TESTHOSTS rsh"
      --mca oob_tcp_if_include "$net" --mca btl_tcp_if_include "$net" --mca pml ob1 --mca btl self,vader,tcp
      -x KOLO_SECRET -x KOLO_TIMEOUT "${ld[@]}")
echo "# hosts ${H}0..${H}3 on $net, rank 0's store at $addr0; Open MPI: $ompirun ($("$ompirun" --version | sed -n 1p))"
echo "# mpirun: ${ompi[*]} -x KOLO_ADDR=$addr0:PORT ..."

ALL4="${H}0:4 ${H}1:4 ${H}2:4 ${H}3:4"
ALL2="${H}0:2 ${H}1:2 ${H}2:2 ${H}3:2"

PERF_ARGS=(allreduce -b 8 -e 1M -f 8 -n 5 -w 1)

echo "== 1. Open MPI: mpirun --hostfile -np 16 kolo-perf"
next_addr
echo "  mpirun --hostfile F -np 16 ... -x KOLO_ADDR=$KADDR $PERF ${PERF_ARGS[*]}"
rc=0
timeout "$JOB_TIMEOUT" "${ompi[@]}" -np 16 -x KOLO_ADDR="$KADDR" "$PERF" "${PERF_ARGS[@]}" >"$WORK/s1.out" 2>&1 || rc=$?
if [ "$rc" -eq 0 ]; then
  check_perf "mpirun --hostfile -np 16 kolo-perf allreduce" "$WORK/s1.out" 16 "$ALL4"
else
  failed_run "mpirun -np 16 kolo-perf" "$rc" "$WORK/s1.out"
fi

echo "== 2. Open MPI: mpirun -np 8 --map-by ppr:2:node python3 (kolo.torch)"
if [ ! -e "$LIBKOLO" ]; then
  echo "SKIP: kolo.torch: no $LIBKOLO"
elif ! "$PYTHON" -c 'import torch' 2>/dev/null; then
  echo "SKIP: kolo.torch: $PYTHON cannot import torch"
else
  cat >"$WORK/hvd_allreduce.py" <<'PY'
import socket, sys
import torch
import kolo.torch as hvd
hvd.init()
r, n = hvd.rank(), hvd.size()
x = torch.arange(1000, dtype=torch.float64) + 1000.0 * r
y = hvd.allreduce(x, op=hvd.Sum, name="sum")
want = torch.arange(1000, dtype=torch.float64) * n + 1000.0 * n * (n - 1) / 2
ok = torch.equal(y, want)
# One write a line: unbuffered stdout writes print's end separately, and mpirun's relay
# would interleave the ranks' halves.
sys.stdout.write(f"kolo.torch rank {r} of {n} on {socket.gethostname()} local {hvd.local_rank()}/{hvd.local_size()}: "
                 f"allreduce sum {'ok' if ok else 'WRONG'} (y[0]={y[0].item():.0f} y[999]={y[999].item():.0f}, "
                 f"want {want[0].item():.0f} {want[999].item():.0f})\n")
sys.stdout.flush()
hvd.shutdown()
sys.exit(0 if ok else 1)
PY
  next_addr
  rc=0
  PYTHONPATH=$SRC/api/python${PYTHONPATH:+:$PYTHONPATH} KOLO_LIBRARY=$LIBKOLO \
    timeout "$JOB_TIMEOUT" "${ompi[@]}" -np 8 --map-by ppr:2:node -x KOLO_ADDR="$KADDR" -x PYTHONPATH -x KOLO_LIBRARY \
    "$PYTHON" "$WORK/hvd_allreduce.py" >"$WORK/s2.out" 2>&1 || rc=$?
  { grep -o 'kolo\.torch rank [0-9]* of [0-9]* on [^ ]* local [0-9/]*: allreduce sum [a-zA-Z]* ([^)]*)' "$WORK/s2.out" || true; } |
    sort -k3,3n | sed 's/^/  /' >"$WORK/s2.lines"
  cat "$WORK/s2.lines"
  good=$(grep -c 'of 8 on .* local [01]/2: allreduce sum ok' "$WORK/s2.lines" || true)
  ranks=$(awk '{print $3}' "$WORK/s2.lines" | sort -u | wc -l)
  placed=$(awk '/allreduce sum ok/{print $7}' "$WORK/s2.lines" | per_host)
  if [ "$rc" -eq 0 ] && [ "$good" -eq 8 ] && [ "$ranks" -eq 8 ] && [ "$placed" = "$ALL2" ]; then
    pass "mpirun -np 8 kolo.torch: hvd.allreduce sum right on 8 ranks ($placed)"
  else
    fail "mpirun -np 8 kolo.torch: exit $rc, $good ranks right of 8, placed '$placed' (want '$ALL2')"
    tail -n 30 "$WORK/s2.out" | sed 's/^/  | /'
  fi
fi

echo "== 3. Open MPI: mpirun -np 8 of the NCCL drop-in's MPI program"
if [ ! -x "$MPI_APP" ]; then
  echo "SKIP: NCCL drop-in under mpirun: no $MPI_APP (tests/nccl: built where CMake finds MPI for C)"
else
  # Its own rendezvous: ncclGetUniqueId on rank 0 (a store at rank 0's host name, which
  # resolves in every test host), MPI_Bcast of the id. KOLO_DEBUG=INFO for INIT only:
  # kolo's own lines (so kolo's libnccl.so.2 ran) with each rank's local and cross rank.
  echo "  $(ldd "$MPI_APP" | { grep 'libnccl\.so' || true; } | sed 's/^[[:space:]]*//')"
  rc=0
  timeout "$JOB_TIMEOUT" "${ompi[@]}" -np 8 --map-by ppr:2:node -x KOLO_DEBUG=INFO -x KOLO_DEBUG_SUBSYS=INIT \
    "$MPI_APP" >"$WORK/s3.out" 2>&1 || rc=$?
  { grep -o 'rank [0-9]*: mpi_app ok' "$WORK/s3.out" || true; } | sort -k2,2n | tr '\n' ' ' | sed 's/^/  /; s/ $/\n/'
  ok=$({ grep -o 'rank [0-9]*: mpi_app ok' "$WORK/s3.out" || true; } | sort -u | wc -l)
  # "INIT communicator uid/...: rank 3 of 8, local 1/2, cross 1/4"
  { grep -o 'rank [0-9]* of 8, local [0-9]*/[0-9]*, cross [0-9]*/[0-9]*' "$WORK/s3.out" || true; } | sort -k2,2n >"$WORK/s3.comm"
  sed -n '1p;$p' "$WORK/s3.comm" | sed 's/^/  kolo INIT: communicator /'
  comms=$(grep -c 'local [01]/2, cross [0-3]/4' "$WORK/s3.comm" || true)
  if [ "$rc" -eq 0 ] && [ "$ok" -eq 8 ] && [ "$comms" -eq 8 ]; then
    pass "mpirun -np 8 nccl_dropin_mpi_app: 8 ranks 'mpi_app ok', kolo's communicator 2 ranks a host x 4 hosts"
  else
    fail "mpirun -np 8 nccl_dropin_mpi_app: exit $rc, $ok ranks ok of 8, $comms kolo communicator lines of 8"
    { grep -v ' INFO ' "$WORK/s3.out" || true; } | tail -n 30 | sed 's/^/  | /'
  fi
fi

echo "== 4. Open MPI: a rank killed (SIGKILL) in a running job"
next_addr
ranks_running() { [ "$(procs_named kolo-perf | wc -l)" -eq 16 ]; }
# The world is up and allreduces run once rank 0 printed the table's header.
measuring() { grep -q '^# *size' "$WORK/s4.out" 2>/dev/null; }
timeout "$JOB_TIMEOUT" "${ompi[@]}" -np 16 -x KOLO_ADDR="$KADDR" "$PERF" allreduce -b 64K -e 64K -n 1000000 -w 1 \
  >"$WORK/s4.out" 2>&1 &
bg_pid=$!
if wait_until 30 ranks_running && wait_until 30 measuring; then
  victim=''
  for pid in $(procs_named kolo-perf); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=5' && victim=$pid
  done
  pass "16 kolo-perf ranks running in the test hosts, allreduces under way"
  sleep 1
  echo "  kill -KILL $victim (rank 5, in ${H}1)"
  t0=$(date +%s.%N)
  if [ -n "$victim" ]; then kill -KILL "$victim"; else fail "rank 5's process not found"; fi
  mpirun_gone() { ! kill -0 "$bg_pid" 2>/dev/null; }
  if wait_until 30 mpirun_gone; then
    rc=0
    wait "$bg_pid" || rc=$?
    t1=$(date +%s.%N)
    # mpirun's word, and a survivor's (kolo's own failure detection, before mpirun kills it).
    { grep -E '^mpirun[.a-z]* noticed' "$WORK/s4.out" || true; } | sed -n 1p | sed 's/^/  /'
    { grep -E '^kolo-perf: .*rank 5 ' "$WORK/s4.out" || true; } | sed -n 1p | cut -c1-240 | sed 's/^/  /'
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; then
      pass "mpirun ended the job $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}') s after the kill (status $rc)"
    else
      fail "mpirun ended with $rc after the kill"
    fi
    if grep -q "^mpirun[.a-z]* noticed that process rank 5 with PID $victim on node ${H}1 exited on signal 9" "$WORK/s4.out"; then
      pass "mpirun named the killed rank (rank 5, ${H}1, signal 9)"
    else
      fail "mpirun's output does not name rank 5 killed by signal 9"
      tail -n 20 "$WORK/s4.out" | sed 's/^/  | /'
    fi
  else
    fail "mpirun still runs 30 s after rank 5 was killed"
  fi
  bg_pid=''
  none_left() { [ -z "$(procs_named 'kolo-perf|orted')" ]; }
  if wait_until 15 none_left; then pass "no kolo-perf rank and no orted left in the test hosts"
  else fail "left in the test hosts: $(procs_named 'kolo-perf|orted' | tr '\n' ' ')"; fi
else
  fail "the job did not run 16 ranks within 30 s (ranks: $(procs_named kolo-perf | wc -l))"
  tail -n 20 "$WORK/s4.out" | sed 's/^/  | /'
fi

echo "== 5. MPICH: mpiexec (Hydra) -f hostfile"
if [ -z "$mpichrun" ]; then
  echo "SKIP: MPICH: mpiexec.mpich is not installed (Debian: mpich)"
else
  echo "# MPICH: $mpichrun ($("$mpichrun" --version 2>/dev/null | awk '/Version:/{print "Hydra", $2}'))"
  for i in 0 1 2 3; do echo "$H$i:4"; done >"$WORK/hostfile.hydra"
  # Hydra execs -launcher-exec as one file (no words): "testhosts.sh rsh" in a script.
  printf '#!/bin/sh\nexec "%s" rsh "$@"\n' "$TESTHOSTS" >"$WORK/hydra-rsh"
  # Keeps what Hydra set of ranks 0 and 15 to print (kolo reads PMI_RANK and PMI_SIZE).
  cat >"$WORK/pmi2kolo" <<EOF
#!/bin/sh
case \$PMI_RANK in 0|15) env | grep -E '^(PMI|MPI_|MPIR_|HYD)' | sort >"$WORK/hydra-env.\$PMI_RANK" ;; esac
exec "\$@"
EOF
  chmod +x "$WORK/hydra-rsh" "$WORK/pmi2kolo"
  hydra=("$mpichrun" -f "$WORK/hostfile.hydra" -launcher ssh -launcher-exec "$WORK/hydra-rsh")
  echo "  mpiexec: ${hydra[*]} -n N ... (the environment goes to every rank: KOLO_ADDR, KOLO_SECRET)"

  # kolo-perf as it is, 4 ranks (all in ${H}0).
  next_addr
  rc=0
  KOLO_ADDR=$KADDR timeout "$JOB_TIMEOUT" "${hydra[@]}" -n 4 "$PERF" allreduce -b 8 -e 8 -n 1 -w 0 \
    >"$WORK/s5a.out" 2>&1 || rc=$?
  worlds=$(grep -c '^# *nThread' "$WORK/s5a.out" || true)
  ranks=$(awk '/^# +Rank /{print $3}' "$WORK/s5a.out" | sort -u | tr '\n' ' ')
  if [ "$rc" -eq 0 ] && [ "$worlds" -eq 1 ] && perf_ok "$WORK/s5a.out" 4 "${H}0:4"; then
    pass "mpiexec -n 4 kolo-perf without a wrapper: one world of 4 (kolo reads Hydra's variables)"
  else
    fail "mpiexec -n 4 kolo-perf: exit $rc, $worlds kolo-perf world(s), ranks seen: $ranks"
    tail -n 20 "$WORK/s5a.out" | sed 's/^/  | /'
  fi

  # Through the wrapper: 16 ranks over the 4 hosts, checked.
  next_addr
  rc=0
  echo "  mpiexec ... -n 16 $WORK/pmi2kolo $PERF ${PERF_ARGS[*]}"
  KOLO_ADDR=$KADDR timeout "$JOB_TIMEOUT" "${hydra[@]}" -n 16 "$WORK/pmi2kolo" "$PERF" "${PERF_ARGS[@]}" \
    >"$WORK/s5b.out" 2>&1 || rc=$?
  for r in 0 15; do
    if [ -f "$WORK/hydra-env.$r" ]; then echo "  Hydra's variables in rank $r: $(tr '\n' ' ' <"$WORK/hydra-env.$r")"; fi
  done
  if [ "$rc" -eq 0 ]; then
    check_perf "mpiexec (Hydra) -n 16 kolo-perf allreduce" \
      "$WORK/s5b.out" 16 "$ALL4"
  else
    failed_run "mpiexec -n 16 kolo-perf" "$rc" "$WORK/s5b.out"
  fi
  hydra_left() { [ -z "$(procs_named 'kolo-perf|hydra_pmi_proxy')" ]; }
  if wait_until 10 hydra_left; then pass "no kolo-perf rank and no hydra_pmi_proxy left in the test hosts"
  else fail "left in the test hosts: $(procs_named 'kolo-perf|hydra_pmi_proxy' | tr '\n' ' ')"; fi
fi

echo "== 6. Start-up: mpirun vs kolorun, 16 ranks over 4 hosts, kolo-perf -b 8 -e 8 -n 1 -w 0"
if [ ! -x "$KOLORUN" ]; then
  echo "SKIP: start-up comparison: no $KOLORUN"
else
  # kolorun makes the job's secret itself.
  kolorun=(env -u KOLO_SECRET "$KOLORUN" --no-prefix --timeout "$JOB_TIMEOUT" --launcher "$TESTHOSTS exec {host}" -H "${H}0:4,${H}1:4,${H}2:4,${H}3:4")
  echo "  kolorun: ${kolorun[*]} $PERF allreduce -b 8 -e 8 -n 1 -w 0"
  : >"$WORK/t.mpirun"
  : >"$WORK/t.kolorun"
  runs_ok=1
  for round in 1 2 3; do
    for who in mpirun kolorun; do
      rc=0
      t0=$(date +%s.%N)
      if [ "$who" = mpirun ]; then
        next_addr
        timeout "$JOB_TIMEOUT" "${ompi[@]}" -np 16 -x KOLO_ADDR="$KADDR" "$PERF" allreduce -b 8 -e 8 -n 1 -w 0 \
          >"$WORK/t.out" 2>&1 || rc=$?
      else
        "${kolorun[@]}" "$PERF" allreduce -b 8 -e 8 -n 1 -w 0 >"$WORK/t.out" 2>&1 || rc=$?
      fi
      t1=$(date +%s.%N)
      awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f\n", b - a}' >>"$WORK/t.$who"
      if ! perf_ok "$WORK/t.out" 16 "$ALL4" || [ "$rc" -ne 0 ]; then
        runs_ok=0
        fail "$who run $round: exit $rc, $perf_says"
        tail -n 20 "$WORK/t.out" | sed 's/^/  | /'
      fi
    done
  done
  med_m=$(sort -n "$WORK/t.mpirun" | sed -n 2p)
  med_k=$(sort -n "$WORK/t.kolorun" | sed -n 2p)
  echo "TIME: mpirun  runs $(tr '\n' ' ' <"$WORK/t.mpirun")s, median ${med_m} s"
  echo "TIME: kolorun runs $(tr '\n' ' ' <"$WORK/t.kolorun")s, median ${med_k} s"
  echo "TIME: mpirun / kolorun = $(awk -v m="$med_m" -v k="$med_k" 'BEGIN{printf "%.2f", m / k}')"
  [ "$runs_ok" -eq 1 ] && pass "start-up runs: 3 under mpirun, 3 under kolorun, each 16 ranks, none wrong"
fi

echo "== leftovers"
anything_left() { [ -z "$(procs_named '[^)]*')" ]; }
if wait_until 10 anything_left; then pass "no process left in the test hosts"
else fail "left in the test hosts: $(procs_named '[^)]*' | while read -r p; do cut -d' ' -f1,2 "/proc/$p/stat"; done | tr '\n' ' ')"; fi
# /dev/shm and /tmp are shared with whatever else runs here (other tests at once): new
# names still there a moment later count when they are ours: named after our hosts (Open
# MPI's vader_segment.HOST.*, its session folders ompi.HOST.*), kolo's in /dev/shm (kolo
# names none: its segments are memfds), kolo.torch's file store in /tmp (kolo-pg-*).
# Others are listed.
sleep 0.5
new_shm=$(ls -A /dev/shm | sort | comm -13 "$WORK/shm.before" - | tr '\n' ' ')
new_tmp=$(ls -A /tmp | sort | comm -13 "$WORK/tmp.before" - | { grep -v "^$(basename "$WORK")\$" || true; } | tr '\n' ' ')
shm_ours=$(echo "$new_shm" | tr ' ' '\n' | { grep -E "kolo|$PREFIX" || true; } | tr '\n' ' ')
tmp_ours=$(echo "$new_tmp" | tr ' ' '\n' | { grep -E "^kolo-pg-|$PREFIX" || true; } | tr '\n' ' ')
if [ -z "$shm_ours" ]; then pass "nothing of ours new in /dev/shm${new_shm:+ (new, not ours: $new_shm)}"
else fail "new in /dev/shm: $shm_ours"; fi
if [ -z "$tmp_ours" ]; then pass "nothing of kolo/Open MPI new in /tmp${new_tmp:+ (new, not ours: $new_tmp)}"
else fail "new in /tmp: $tmp_ours"; fi

echo "== $failures failed"
[ "$failures" -eq 0 ]
