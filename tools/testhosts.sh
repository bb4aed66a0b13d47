#!/usr/bin/env bash
# Test hosts on one machine: network namespaces joined by veth pairs to a bridge in the
# root namespace, so that kolo's TCP path between hosts can be tested without a cluster.
#
#   testhosts.sh [--prefix P] up N [--rate 2gbit] [--delay 5us] [--net K]
#   testhosts.sh [--prefix P] down          # removes everything of set P; idempotent
#   testhosts.sh [--prefix P] status        # without --prefix: every set
#   testhosts.sh exec HOST COMMAND...       # run COMMAND on test host HOST
#   testhosts.sh rsh HOST COMMAND...        # the same, COMMAND one shell string: Open
#                                           # MPI's launcher (--mca plm_rsh_agent)
#   testhosts.sh check                      # exit 0 when namespaces can be made here
#
# Set P (default "kolo") has hosts P-h0..P-h{N-1} (netns names) at 10.77.K.1..N, the
# bridge P-br at 10.77.K.254 (kolorun's store listens there), and the root-side veth ends
# P-v0... Inside a host its interface is eth0. K is the lowest free 10.77.K.0/24 unless
# --net gives it. Every host's /etc/netns/<host>/hosts names all of them, plus this
# machine's name and P-gw for the bridge, so names resolve inside (ip netns exec
# bind-mounts that file over /etc/hosts).
#
# --rate and --delay shape each host's egress (eth0 inside it): htb for the rate, netem for
# the delay (a netem leaf under the htb class when both). A message between two hosts is
# shaped once, by its sender; a round trip sees the delay twice.
#
# kolorun: kolorun --launcher 'tools/testhosts.sh exec {host}' -H P-h0:2,P-h1:2 prog
# (or --launcher 'ip netns exec {host}': kolo tells hosts apart by their network namespace
# too). `exec` enters the host's network namespace and a UTS namespace named after the
# host, so that the host name is the host's own, as on a real machine.
set -euo pipefail

STATE_ROOT=/run/kolo-testhosts   # per set: net (K), hosts (the hosts file)

die() { echo "testhosts: $*" >&2; exit 1; }
usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }

# Names of this machine's network namespaces, one a line ("NAME (id: 3)" -> NAME).
netns_names() { ip netns list 2>/dev/null | while read -r name _; do echo "$name"; done; }
# Root-namespace link names ("P-v0@if3" -> P-v0).
link_names() { ip -o link show | while read -r _ name _; do name=${name%:}; echo "${name%@*}"; done; }
link_exists() { ip link show "$1" >/dev/null 2>&1; }
hosts_of() { # the namespaces of set $1, in index order
  local name
  netns_names | while read -r name; do [[ $name =~ ^$1-h[0-9]+$ ]] && echo "$name"; done | sort -V
  return 0
}

# "2gbit" -> bits per second (tc's units; htb needs the number to size its burst).
rate_bits() {
  local number unit
  [[ $1 =~ ^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit)$ ]] || die "--rate '$1': expected e.g. 500mbit, 2gbit"
  number=${BASH_REMATCH[1]} unit=${BASH_REMATCH[3]}
  case $unit in
    bit) awk "BEGIN{printf \"%d\", $number}" ;;
    kbit) awk "BEGIN{printf \"%d\", $number*1e3}" ;;
    mbit) awk "BEGIN{printf \"%d\", $number*1e6}" ;;
    gbit) awk "BEGIN{printf \"%d\", $number*1e9}" ;;
    tbit) awk "BEGIN{printf \"%d\", $number*1e12}" ;;
  esac
}

# Lowest K whose 10.77.K.0/24 no interface here uses.
free_net() {
  local k used
  used=$(ip -4 -o addr show)
  for k in $(seq 0 254); do
    [[ $used == *" 10.77.$k."* ]] || { echo "$k"; return; }
  done
  die "no free 10.77.K.0/24 left"
}

shape() { # shape NS RATE DELAY: egress of eth0 in NS
  local ns=$1 rate=$2 delay=$3 bits burst
  if [ -n "$rate" ]; then
    bits=$(rate_bits "$rate")
    # Burst: 2 ms of traffic, at least 128 KiB. veth passes 64 KiB GSO packets, and a
    # burst below one of them (or below a timer tick's worth) caps the rate well under R.
    burst=$(awk "BEGIN{b=$bits/8*0.002; if (b<131072) b=131072; printf \"%d\", b}")
    tc -n "$ns" qdisc add dev eth0 root handle 1: htb default 1
    # quantum: htb's default (rate/r2q) exceeds its maximum at gbit rates and it warns.
    tc -n "$ns" class add dev eth0 parent 1: classid 1:1 htb rate "$rate" ceil "$rate" \
      burst "$burst" cburst "$burst" quantum 200000
  fi
  if [ -n "$delay" ]; then
    local parent=(root)
    [ -n "$rate" ] && parent=(parent 1:1)
    # limit: netem holds delayed packets in its queue; 1000 (its default) drops at gbit rates.
    tc -n "$ns" qdisc add dev eth0 "${parent[@]}" handle 10: netem delay "$delay" limit 100000 ||
      die "cannot add netem on $ns (kernel without CONFIG_NET_SCH_NETEM?): --delay needs it"
  fi
}

cmd_down() { # removes set $1 whatever state it is in
  local p=$1 ns pid link
  # Links first: deleting a root-side veth end deletes its pair at once, whereas a deleted
  # namespace frees its devices later, in the background (a quick up would collide).
  for link in $(link_names); do
    if [[ $link =~ ^$p-(v[0-9]+|br)$ ]]; then
      ip link del "$link" 2>/dev/null || ! link_exists "$link" || die "cannot delete link $link"
    fi
  done
  for ns in $(hosts_of "$p"); do
    # A namespace lives on while a process is in it: end what runs there (kolo ranks a
    # test left behind), so that deleting the name really removes it.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns del "$ns"
  done
  rm -rf /etc/netns/"$p"-h[0-9] /etc/netns/"$p"-h[0-9][0-9] "${STATE_ROOT:?}/$p"
  # The last set gone: no empty folders left either (iproute2 needs neither).
  rmdir "$STATE_ROOT" /etc/netns 2>/dev/null || true
  return 0
}

undo_failed_up() { # the EXIT trap of up: $? is the script's exit status
  local rc=$?
  [ "$rc" -eq 0 ] && return 0
  echo "testhosts: up failed; removing set $1" >&2
  cmd_down "$1"
  exit "$rc"
}

cmd_up() { # cmd_up PREFIX N RATE DELAY NET
  local p=$1 n=$2 rate=$3 delay=$4 k=$5 i ns addr
  # Up to 64 hosts: 10.77.K.1-64 in one /24, one bridge (a Linux bridge takes 1024 ports).
  { [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 2 ] && [ "$n" -le 64 ]; } || die "up: N must be 2 to 64 (got '$n')"
  [ -z "$rate" ] || rate_bits "$rate" >/dev/null
  if [ -n "$(hosts_of "$p")" ] || link_exists "$p-br" || [ -d "$STATE_ROOT/$p" ]; then
    die "set '$p' is already up (or half there): run '$0 --prefix $p down' first"
  fi
  if [ -z "$k" ]; then k=$(free_net); fi
  if ! [[ $k =~ ^[0-9]+$ ]] || [ "$k" -gt 254 ]; then die "--net '$k': expected 0..254"; fi
  # From here on a failure removes what was made, so a failed up leaves nothing behind.
  # shellcheck disable=SC2064  # $p is meant to expand now
  trap "undo_failed_up $p" EXIT

  mkdir -p "$STATE_ROOT/$p"
  echo "$k" >"$STATE_ROOT/$p/net"
  {
    echo "127.0.0.1 localhost"
    echo "::1 localhost ip6-localhost ip6-loopback"
    # This machine as the hosts see it: kolorun's default store address (its host name) works.
    echo "10.77.$k.254 $p-gw $(hostname)"
    for i in $(seq 0 $((n - 1))); do echo "10.77.$k.$((i + 1)) $p-h$i"; done
  } >"$STATE_ROOT/$p/hosts"

  ip link add "$p-br" type bridge
  ip addr add "10.77.$k.254/24" dev "$p-br"
  ip link set "$p-br" up
  for i in $(seq 0 $((n - 1))); do
    ns=$p-h$i addr=10.77.$k.$((i + 1))
    ip netns add "$ns"
    mkdir -p "/etc/netns/$ns"
    cp "$STATE_ROOT/$p/hosts" "/etc/netns/$ns/hosts"
    ip link add "$p-v$i" type veth peer name eth0 netns "$ns"
    ip link set "$p-v$i" master "$p-br" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    shape "$ns" "$rate" "$delay"
  done
  trap - EXIT
  echo "testhosts: $n hosts up: $(hosts_of "$p" | tr '\n' ' ')(10.77.$k.1-$n; store at 10.77.$k.254)"
}

cmd_status() { # cmd_status [PREFIX]
  local sets=() p ns
  if [ -n "${1:-}" ]; then
    sets=("$1")
  else
    for p in "$STATE_ROOT"/*/; do [ -d "$p" ] && sets+=("$(basename "$p")"); done
  fi
  [ ${#sets[@]} -gt 0 ] || { echo "no test hosts"; return 0; }
  for p in "${sets[@]}"; do
    echo "set $p: net 10.77.$(cat "$STATE_ROOT/$p/net" 2>/dev/null || echo '?').0/24, bridge $p-br" \
      "$(link_exists "$p-br" && echo present || echo missing)"
    for ns in $(hosts_of "$p"); do
      echo "  $ns: $(ip -n "$ns" -br -4 addr show dev eth0 2>/dev/null | tr -s ' ')"
      { tc -n "$ns" qdisc show dev eth0; tc -n "$ns" class show dev eth0; } 2>/dev/null |
        sed "s/^/    /" | grep -v noqueue || true
    done
  done
}

# Whether this machine lets us make test hosts: root, the tools, and the right to add a
# link here and a named namespace (root in a user namespace or a container without
# CAP_NET_ADMIN/CAP_SYS_ADMIN has neither). Both are made and removed at once.
cmd_check() {
  [ "$(id -u)" -eq 0 ] || die "needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN for namespaces)"
  local tool probe=kolo-chk$$
  for tool in ip tc unshare flock hostname awk; do
    command -v "$tool" >/dev/null || die "needs '$tool', which is not installed"
  done
  ip link add "$probe" type bridge 2>/dev/null || die "cannot add a bridge (no CAP_NET_ADMIN?)"
  ip link del "$probe"
  ip netns add "$probe" 2>/dev/null || die "cannot add a network namespace (no CAP_SYS_ADMIN?)"
  ip netns del "$probe"
  echo "testhosts: namespaces can be made here"
}

cmd_exec() { # cmd_exec HOST COMMAND...: as a real host, with its own host name
  local host=$1
  shift
  [ $# -gt 0 ] || die "exec: no command"
  # shellcheck disable=SC2016  # the inner sh expands them
  exec ip netns exec "$host" unshare --uts -- sh -c 'hostname "$0" && exec "$@"' "$host" "$@"
}

cmd_rsh() { # cmd_rsh [OPTIONS] HOST COMMAND...: Open MPI's rsh agent (one string command)
  while [ $# -gt 0 ] && [[ $1 == -* ]]; do shift; done  # ssh options Open MPI may pass
  local host=${1:?rsh: no host}
  shift
  [ $# -gt 0 ] || die "rsh: no command"
  cmd_exec "$host" /bin/sh -c "$*"
}

prefix=kolo prefix_given='' rate='' delay='' net='' args=()
while [ $# -gt 0 ]; do
  case $1 in
    --prefix) prefix=${2:?--prefix needs a value} prefix_given=1; shift 2 ;;
    --rate) rate=${2:?--rate needs a value}; shift 2 ;;
    --delay) delay=${2:?--delay needs a value}; shift 2 ;;
    --net) net=${2:?--net needs a value}; shift 2 ;;
    -h|--help) usage 0 ;;
    exec|rsh) args+=("$@"); break ;;   # the rest is the command's
    *) args+=("$1"); shift ;;
  esac
done
[ ${#args[@]} -gt 0 ] || usage
# Interface names are at most 15 characters: P-br and P-vI must fit.
[[ $prefix =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "--prefix '$prefix': 1-8 lowercase letters/digits, starting with a letter"

case ${args[0]} in
  up)
    [ ${#args[@]} -eq 2 ] || usage
    # Sets may go up and down at once (ctest -j): picking a free net and making links is
    # one set at a time. The lock is on /run itself, so no lock file is left behind.
    exec 9</run; flock 9
    cmd_up "$prefix" "${args[1]}" "$rate" "$delay" "$net" ;;
  down)
    [ ${#args[@]} -eq 1 ] || usage
    exec 9</run; flock 9
    cmd_down "$prefix" ;;
  status) cmd_status "${prefix_given:+$prefix}" ;;
  check) cmd_check ;;
  exec) [ ${#args[@]} -ge 2 ] || usage; cmd_exec "${args[@]:1}" ;;
  rsh) [ ${#args[@]} -ge 2 ] || usage; cmd_rsh "${args[@]:1}" ;;
  *) usage ;;
esac
