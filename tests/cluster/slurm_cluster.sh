#!/usr/bin/env bash
# A real Slurm cluster on one machine: N test hosts (network namespaces made by
# tools/testhosts.sh), one slurmd in each, one slurmctld and one munged in the root
# namespace. Jobs are started with the real srun/sbatch, so kolo's Slurm path
# (SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_NODELIST; engine/world.cc) is tested as on a
# cluster, with one host per node name.
#
#   slurm_cluster.sh up N PREFIX    # prints the slurm.conf to use: export SLURM_CONF=<it>
#   slurm_cluster.sh down PREFIX    # stops everything of PREFIX, removes it; idempotent
#   slurm_cluster.sh check          # exit 0 when Slurm can run here, 77 (and why) if not
#
# Needs root and Debian's slurmctld, slurmd, slurm-client and munge packages (the
# slurm-wlm metapackage pulls them in, with many plugins not needed here).
#
# Nodes are PREFIX-h0..PREFIX-h{N-1} at 10.77.K.1..N (testhosts' addresses); the
# controller runs in the root namespace and is reached at the bridge, 10.77.K.254. It
# listens on every address there, so its port is 16817+K: sets with other prefixes can run
# at the same time, and a system slurmctld (port 6817) is not in the way.
# Everything else (config, munge key and socket, state, spool, logs, pid files) is under
# /tmp/kolo-slurm-PREFIX; nothing in /etc or /var is touched.
set -euo pipefail

# munged wants everyone able to search its socket's folders; a caller's umask 077 would
# make them 0700 (the key gets 0600 on its own).
umask 022
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TESTHOSTS=${KOLO_TESTHOSTS:-$HERE/../../tools/testhosts.sh}
DEADLINE_S=30   # each wait below: daemons start, nodes register, daemons stop

log() { echo "slurm_cluster: $*" >&2; }
die() { log "$*"; exit 1; }
usage() { sed -n '8,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

dir_of() { echo "/tmp/kolo-slurm-$1"; }

# Whether pid $1 (from a pid file, maybe stale) is still the daemon $2: a pid reused by
# some other process after the daemon died must not be killed. A zombie counts as gone:
# the daemons are orphans, and some inits (a VM's minimal one) reap them only much later.
is_daemon() {
  local stat
  [ -n "$1" ] && stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  # "PID (COMM) STATE ...": our daemons' names have no spaces or parentheses.
  [[ $stat =~ ^[0-9]+\ \(([^\)]*)\)\ ([A-Za-z]) ]] || return 1
  [ "${BASH_REMATCH[1]}" = "$2" ] && [ "${BASH_REMATCH[2]}" != Z ] && [ "${BASH_REMATCH[2]}" != X ]
}
# A process's state letter (R, S, Z...), or nothing when it is gone.
proc_state() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  [[ $stat =~ \)\ ([A-Za-z])\  ]] && echo "${BASH_REMATCH[1]}"
  return 0
}

# Pids of the daemons of set P still alive, as "pid name" lines.
live_daemons() {
  local d=$1 f pid name
  for f in "$d"/run/*.pid "$d"/munge/munged.pid; do
    [ -r "$f" ] || continue
    pid=$(tr -dc 0-9 <"$f")
    case $(basename "$f") in
      slurmctld.pid) name=slurmctld ;;
      slurmd-*.pid) name=slurmd ;;
      munged.pid) name=munged ;;
      *) continue ;;
    esac
    if is_daemon "$pid" "$name"; then echo "$pid $name"; fi
  done
  return 0
}

# Waits until `$@` succeeds, at most DEADLINE_S seconds; returns 1 at the deadline.
wait_for() {
  local end=$((SECONDS + DEADLINE_S))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 0.5
  done
}

# For a failed up: the daemons' own words, since "did not register" says nothing.
show_logs() {
  local d=$1 f
  for f in "$d"/munge/munged.log "$d"/log/*.log; do
    [ -r "$f" ] || continue
    log "--- last lines of $f"
    tail -n 15 "$f" >&2 || true
  done
}

cmd_check() {
  [ "$(id -u)" -eq 0 ] || { echo "slurm_cluster: needs root (network namespaces, daemons as root)"; exit 77; }
  local tool
  for tool in slurmctld slurmd srun sbatch scancel sinfo squeue scontrol munged munge; do
    command -v "$tool" >/dev/null || {
      echo "slurm_cluster: '$tool' is not installed (apt-get install slurmctld slurmd slurm-client munge)"
      exit 77
    }
  done
  local why
  why=$("$TESTHOSTS" check 2>&1) || { echo "slurm_cluster: no test hosts here: $why"; exit 77; }
  echo "slurm_cluster: Slurm can run here ($(slurmctld -V 2>/dev/null || echo slurm))"
}

write_conf() { # write_conf DIR PREFIX N K
  local d=$1 p=$2 n=$3 k=$4 i
  # An empty plugin stack: spank plugins of the machine's /etc/slurm/plugstack.conf.d
  # (e.g. a site's) have no business in a test cluster.
  : >"$d/plugstack.conf"
  # slurmd 22.05 loads a cgroup plugin even when no plugin of ours uses cgroups, and fails
  # when autodetect finds no cgroup filesystem: inside a test host there is none, since
  # `ip netns exec` mounts a fresh /sys. Naming the v1 plugin skips that detection; with
  # proctrack/linuxproc and task/none nothing ever asks it for a cgroup.
  echo "CgroupPlugin=cgroup/v1" >"$d/cgroup.conf"
  cat >"$d/slurm.conf" <<EOF
# Made by tests/cluster/slurm_cluster.sh for test hosts $p-h0..$p-h$((n - 1)).
ClusterName=$p
# The controller's host name is $p-gw in its own UTS namespace (slurmctld refuses to
# start on a host that is not SlurmctldHost); the address is the bridge's, which every
# test host and the root namespace (srun, sinfo) reach.
SlurmctldHost=$p-gw(10.77.$k.254)
SlurmctldPort=$((16817 + k))
# Every slurmd is in its own network namespace: the default port does not collide.
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
# Our own munged: its socket is a path, so slurmd in other network namespaces reach it.
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge/munge.sock
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool/%n
SlurmctldPidFile=$d/run/slurmctld.pid
SlurmdPidFile=$d/run/slurmd-%n.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd-%n.log
# No mail from a test cluster (the default, /bin/mail, is not installed and slurmctld says so).
MailProg=/bin/true
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$d/plugstack.conf
# No cgroups: processes are tracked by parentage, tasks are not bound.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# A node that registers is usable at once, also after a restart of its slurmd.
ReturnToService=2
# scancel: SIGKILL 2 s after SIGTERM (default 30 s) keeps the tests short.
KillWait=2
SlurmdTimeout=30
InactiveLimit=0
# Nodes say they have CPUs=4 whatever this machine has (oversubscribed on purpose).
SlurmdParameters=config_overrides
NodeName=DEFAULT CPUs=4 State=UNKNOWN
EOF
  for i in $(seq 0 $((n - 1))); do
    echo "NodeName=$p-h$i NodeAddr=10.77.$k.$((i + 1)) NodeHostname=$p-h$i" >>"$d/slurm.conf"
  done
  echo "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$d/slurm.conf"
}

# All N nodes idle (sinfo's state, "idle" exactly: not "idle*", not drained).
nodes_idle() { # nodes_idle N
  local idle
  idle=$(sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle"' | sort -u | wc -l)
  [ "$idle" -eq "$1" ]
}

undo_failed_up() { # the EXIT trap of up
  local rc=$?
  [ "$rc" -eq 0 ] && return 0
  log "up failed; removing set $1"
  show_logs "$(dir_of "$1")"
  cmd_down "$1" || true
  exit "$rc"
}

cmd_up() { # cmd_up N PREFIX
  local n=$1 p=$2 d k i
  { [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 64 ]; } || die "up: N must be 1 to 64 (got '$n')"
  d=$(dir_of "$p")
  # Test hosts of this prefix made by someone else: a failed up would remove them.
  [ ! -e "/run/kolo-testhosts/$p" ] || die "test hosts '$p' exist already (tools/testhosts.sh --prefix $p down?)"
  # 0755: munged refuses a socket whose folders not everyone may search. mkdir, not -p: of
  # two ups of one prefix, the second stops here, before its trap could undo the first.
  mkdir -m 0755 "$d" 2>/dev/null || die "set '$p' is up (or half there): run '$0 down $p' first"
  # From here on a failed up removes what it made.
  # shellcheck disable=SC2064  # $p is meant to expand now
  trap "undo_failed_up $p" EXIT
  # testhosts wants 2 hosts at least; a 1-node cluster still gets 2, its slurm only 1.
  local hosts=$n
  [ "$hosts" -ge 2 ] || hosts=2
  mkdir -p "$d"/munge "$d"/state "$d"/spool "$d"/log "$d"/run
  "$TESTHOSTS" --prefix "$p" up "$hosts" >&2
  k=$(cat "/run/kolo-testhosts/$p/net")
  write_conf "$d" "$p" "$n" "$k"
  export SLURM_CONF=$d/slurm.conf

  # Our own munged with its own key, not the machine's (whose daemon may not run, and
  # whose key we should not need to read).
  (umask 077 && dd if=/dev/urandom of="$d/munge/munge.key" bs=1024 count=1 status=none)
  munged --socket="$d/munge/munge.sock" --key-file="$d/munge/munge.key" \
    --pid-file="$d/munge/munged.pid" --seed-file="$d/munge/munge.seed" --log-file="$d/munge/munged.log"
  wait_for sh -c "munge -S '$d/munge/munge.sock' -n | unmunge -S '$d/munge/munge.sock'" ||
    die "munged did not answer within ${DEADLINE_S}s"

  # -c: a clean start, no state of an earlier set by this name. The UTS namespace gives
  # it the host name that SlurmctldHost names; it forks into the background itself.
  # shellcheck disable=SC2016  # the inner sh expands them
  unshare --uts -- sh -c 'hostname "$0" && exec slurmctld -c -f "$1"' "$p-gw" "$SLURM_CONF"
  wait_for scontrol ping || die "slurmctld did not answer within ${DEADLINE_S}s"

  for i in $(seq 0 $((n - 1))); do
    mkdir -p "$d/spool/$p-h$i"
    # In the host's namespaces: its address, its name, its /etc/hosts (ip netns exec
    # bind-mounts /etc/netns/<host>/hosts), all inherited by the tasks it starts.
    "$TESTHOSTS" exec "$p-h$i" slurmd -f "$SLURM_CONF" -N "$p-h$i"
  done
  wait_for nodes_idle "$n" || {
    sinfo -N >&2 || true
    die "the $n nodes were not idle within ${DEADLINE_S}s"
  }
  trap - EXIT
  log "$n nodes idle: $(sinfo -h -o '%N' | tr '\n' ' ')(controller 10.77.$k.254:$((16817 + k)))"
  echo "$SLURM_CONF"
}

# Whether no daemon of the set is left: with munged ($2 = all) or without.
daemons_gone() { # daemons_gone DIR all|slurm
  local live
  live=$(live_daemons "$1")
  [ "$2" = all ] || live=$(echo "$live" | grep -v ' munged$' || true)
  [ -z "$live" ]
}

stop_daemons() { # stop_daemons DIR all|slurm: SIGTERM, SIGKILL after the deadline
  local d=$1 which=$2 pid name
  while read -r pid name; do
    [ "$which" = all ] || [ "$name" != munged ] || continue
    kill -TERM "$pid" 2>/dev/null || true
  done < <(live_daemons "$d")
  wait_for daemons_gone "$d" "$which" && return 0
  log "daemons ignored SIGTERM for ${DEADLINE_S}s: SIGKILL"
  while read -r pid name; do
    [ "$which" = all ] || [ "$name" != munged ] || continue
    kill -KILL "$pid" 2>/dev/null || true
  done < <(live_daemons "$d")
  wait_for daemons_gone "$d" "$which"
}

# srun, sbatch, salloc of this set (SLURM_CONF=DIR/slurm.conf in their environment), one
# pid a line: once the daemons are gone they would wait for them for minutes.
clients_of() { # clients_of DIR
  local pid name
  # One name a pgrep: it matches at most 15 characters, and refuses a longer pattern.
  for pid in $(for name in srun sbatch salloc sattach; do pgrep -x "$name" || true; done); do
    [ "$(proc_state "$pid")" != Z ] || continue
    grep -qzxF "SLURM_CONF=$1/slurm.conf" "/proc/$pid/environ" 2>/dev/null && echo "$pid"
  done
  return 0
}
no_clients() { [ -z "$(clients_of "$1")" ]; }

cmd_down() { # cmd_down PREFIX: whatever state set P is in
  local p=$1 d pid
  d=$(dir_of "$p")
  # Clients first, by SIGTERM: srun then cancels its step while slurmctld still runs.
  for pid in $(clients_of "$d"); do kill -TERM "$pid" 2>/dev/null || true; done
  if ! daemons_gone "$d" slurm && [ -r "$d/slurm.conf" ]; then
    # The polite way first: slurmctld tells every slurmd to stop, and slurmd its steps.
    SLURM_CONF=$d/slurm.conf timeout 10 scontrol shutdown >/dev/null 2>&1 || true
  fi
  stop_daemons "$d" slurm || true
  # srun ignores a first SIGTERM while its step runs (it forwards it): SIGKILL for those left.
  DEADLINE_S=5 wait_for no_clients "$d" ||
    for pid in $(clients_of "$d"); do kill -KILL "$pid" 2>/dev/null || true; done
  # Then the hosts: this also ends whatever a job left in them (tasks, slurmstepd), as
  # testhosts kills every process in a namespace it removes. munged last: slurmd and
  # slurmstepd talk to it until they end.
  "$TESTHOSTS" --prefix "$p" down >&2
  stop_daemons "$d" all || die "daemons of set $p still run: $(live_daemons "$d" | tr '\n' ' ')"
  rm -rf "${d:?}"
  return 0
}

# The prefix names a folder that down removes and interfaces (testhosts' rule).
valid_prefix() { [[ $1 =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "PREFIX '$1': 1-8 lowercase letters/digits, starting with a letter"; }

case ${1:-} in
  up) [ $# -eq 3 ] || usage; valid_prefix "$3"; cmd_up "$2" "$3" ;;
  down) [ $# -eq 2 ] || usage; valid_prefix "$2"; cmd_down "$2" ;;
  check) [ $# -eq 1 ] || usage; cmd_check ;;
  *) usage ;;
esac
