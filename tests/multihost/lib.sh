# shellcheck shell=bash disable=SC2034  # variables for the tests that source it
# Sourced by the multihost tests: brings up a set of test hosts (tools/testhosts.sh) for
# the test, or skips it (exit 77) where this machine cannot make network namespaces; the
# set goes down again on every exit, and the test fails if anything of it is left.
SKIP=77
TESTHOSTS=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../tools" && pwd)/testhosts.sh
# kolorun starts each host's ranks through this (plain `ip netns exec {host}` works too;
# `exec` also names the host, so that its name resolves like a real host's).
LAUNCHER="$TESTHOSTS exec {host}"
PREFIX=
WORK=      # a temporary folder for the test's files, removed at exit
BG_PID=    # a background job of the test's, stopped at exit

fail() { echo "FAIL: $*"; exit 1; }

#   hosts_up PREFIX N [--rate R] [--delay D]
hosts_up() {
  local why
  # Not root, no `ip`, no CAP_NET_ADMIN (an unprivileged container): a skip, not a failure.
  if ! why=$("$TESTHOSTS" check 2>&1); then
    echo "SKIP: cannot make test hosts here: $why"
    exit "$SKIP"
  fi
  PREFIX=$1
  shift
  WORK=$(mktemp -d)
  trap hosts_down EXIT
  "$TESTHOSTS" --prefix "$PREFIX" down  # what a killed earlier run (ctest's timeout) left
  "$TESTHOSTS" --prefix "$PREFIX" up "$@"
  if ! hosts_reach; then
    echo "SKIP: test hosts $PREFIX-h0 and $PREFIX-h1 cannot reach each other over the bridge (a firewall that drops bridged traffic, such as a FORWARD policy of DROP with bridge netfilter on?)"
    exit "$SKIP"
  fi
}

# Whether host 0 can open a TCP connection to host 1 (a listener there, in Python, which
# the set-up installs): a machine that drops bridged traffic would otherwise time the
# tests out instead of skipping them.
hosts_reach() {
  local a=$PREFIX-h0 b=$PREFIX-h1 addr listener ok=0
  [ -x /usr/bin/python3 ] && [[ $(ip netns list) == *"$b"* ]] || return 0
  addr=$(ip netns exec "$b" ip -4 -o addr show dev eth0 | awk '{ sub("/.*", "", $4); print $4 }')
  ip netns exec "$b" /usr/bin/python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 7799)); s.listen(1); s.settimeout(10); s.accept()' 2>/dev/null &
  listener=$!
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    if timeout 2 ip netns exec "$a" bash -c "exec 3<>/dev/tcp/$addr/7799" 2>/dev/null; then ok=1; break; fi
    sleep 0.2
  done
  kill "$listener" 2>/dev/null || true
  wait "$listener" 2>/dev/null || true
  [ "$ok" = 1 ]
}

hosts_down() {
  local rc=$?
  if [ -n "$BG_PID" ]; then kill "$BG_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
  "$TESTHOSTS" --prefix "$PREFIX" down || rc=1
  local left
  left=$(ip netns list)
  if [[ $left == *"$PREFIX-h"* ]]; then
    echo "FAIL: namespaces of $PREFIX left behind: $left"
    rc=1
  fi
  exit "$rc"
}

# "P-h0:2,P-h1:2" for N hosts with SLOTS ranks each.
host_list() {
  local n=$1 slots=$2 i list=
  for i in $(seq 0 $((n - 1))); do list+=${list:+,}$PREFIX-h$i:$slots; done
  echo "$list"
}
