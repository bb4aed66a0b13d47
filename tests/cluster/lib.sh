# Sourced by the scenarios of tests/cluster (slurm_test.sh, mpirun_test.sh,
# torchrun_test.sh): their verdict lines, exit wiring, environment, waits, and the check of
# a kolo-perf run. Each script keeps `failures` and sets H (its hosts' name stem, "P-h").

failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# on_exit FN: FN runs when the script ends, however; killed (ctest's timeout, ^C), the
# script exits so that FN still runs and takes its hosts down.
on_exit() {
  trap "$1" EXIT
  trap 'exit 143' TERM
  trap 'exit 130' INT
}

# No launcher's variables from around us (a CI runner inside a Slurm job, an mpirun, a
# torchrun): they would make our ranks join that job instead.
clear_launcher_env() {
  local var
  while read -r var; do unset "$var"; done < <(compgen -e |
    grep -E '^(SLURM_|SBATCH_|SALLOC_|SRUN_|OMPI_COMM_WORLD_|PMI_|PMIX_|TORCHELASTIC_)' || true)
  unset KOLO_RANK KOLO_SIZE KOLO_ADDR KOLO_LAUNCHER KOLO_LOCAL_RANK KOLO_LOCAL_SIZE KOLO_ELASTIC KOLO_SECRET \
    RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT
}

# wait_until SECONDS COMMAND...: poll until COMMAND succeeds; 1 at the deadline.
wait_until() {
  local end=$((SECONDS + $1))
  shift
  until "$@"; do
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 0.3
  done
}

# "h0:4 h1:4 ..." from host names, one a line: ranks per host.
per_host() { sort -V | uniq -c | awk '{printf "%s%s:%s", (NR > 1 ? " " : ""), $2, $1}'; }

# placement_ok GOT WANT: a placement ("h0:4 h1:1 ...") against WANT: exactly; "any1": one
# rank, wherever; "any:N": N ranks over all 4 hosts, each with one at least (how Slurm
# spreads an uneven count depends on its select plugin: -n 7 -N 4 gives 4,1,1,1).
placement_ok() {
  local got=$1 want=$2
  [ "$want" = any1 ] && { [[ $got == *:1 && $got != *" "* ]]; return; }
  [[ $want == any:* ]] || { [ "$got" = "$want" ]; return; }
  echo "$got" | tr ' ' '\n' | awk -F: -v n="${want#any:}" \
    '{ hosts++; sum += $2; if ($2 < 1) bad = 1 } END { exit !(hosts == 4 && sum == n && !bad) }'
}

# perf_ok OUT NRANKS WANT: kolo-perf's output OUT (its exit status checked by the caller)
# has NRANKS distinct ranks placed as WANT (placement_ok), sizes measured, no wrong value in
# any column (9 and 13: #wrong out of place and in place), and its own verdict OK. Quiet;
# sets perf_says to what it found.
perf_says=''
perf_ok() {
  local out=$1 n=$2 want=$3 ranks distinct placed rows bad
  ranks=$(grep -c '^#  *Rank ' "$out" || true)
  distinct=$(awk '/^# +Rank /{print $3}' "$out" | sort -u | wc -l)
  placed=$(awk '/^# +Rank /{print $9}' "$out" | per_host)
  rows=$(grep -c '^ *[0-9]' "$out" || true)
  bad=$(awk '/^ *[0-9]/ && ($9 != 0 || $13 != 0)' "$out" | wc -l)
  if [ "$ranks" -eq "$n" ] && [ "$distinct" -eq "$n" ] && placement_ok "$placed" "$want" && [ "$rows" -gt 0 ] &&
    [ "$bad" -eq 0 ] && grep -q '^# Out of bounds values : 0 OK' "$out"; then
    perf_says="$n ranks: $placed; $rows sizes, none wrong"
    return 0
  fi
  perf_says="$ranks rank lines ($distinct ranks) of $n, placed '$placed' (want '$want'), $rows sizes, $bad with wrong values"
  return 1
}

# check_perf NAME OUT NRANKS WANT: perf_ok, the rows it checked printed, one PASS or FAIL.
check_perf() {
  local name=$1 out=$2
  { grep -E '^ *[0-9]|^# Out of bounds' "$out" || true; } | sed 's/^/  /'
  if perf_ok "$out" "$3" "$4"; then
    pass "$name ($perf_says)"
  else
    fail "$name: $perf_says"
    sed -n '1,40p' "$out" | sed 's/^/  | /'
  fi
}

# failed_run WHAT RC OUT: a FAIL line for a launcher command that exited RC, with its
# output's last lines.
failed_run() {
  fail "$1 exited $2"
  tail -n 30 "$3" | sed 's/^/  | /'
}

# procs_named REGEX: the processes of the 4 test hosts $H0..$H3 whose name matches REGEX
# (not zombies: an orphan init has not reaped yet is gone), one pid a line.
procs_named() {
  local i pid
  for i in 0 1 2 3; do
    for pid in $(ip netns pids "$H$i" 2>/dev/null); do
      [[ $(cat "/proc/$pid/stat" 2>/dev/null) =~ ^[0-9]+\ \(($1)\)\ [^ZX] ]] && echo "$pid"
    done
  done
  return 0
}
