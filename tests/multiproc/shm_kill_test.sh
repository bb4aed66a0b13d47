#!/usr/bin/env bash
# SIGKILL one of 4 ranks in the middle of a 256 MB allreduce over shared memory: the
# others must return an error well within KOLO_TIMEOUT, and kolo must leave nothing
# behind in /dev/shm (its segments are memfds, which never have a name there).
set -u
worker=$1
out=$(mktemp -d)
fail() { echo "FAIL: $*"; cat "$out"/* 2>/dev/null; rm -rf "$out"; exit 1; }
before=$(ls -A /dev/shm 2>/dev/null | sort)

source "$(dirname "$0")/ranks_lib.sh"
export KOLO_TIMEOUT=60
run_ranks "$worker" kill 4 120 "$out"
[ "${codes[1]}" -eq 137 ] || fail "rank 1 should have died of SIGKILL (137), got ${codes[1]}"
check_survivors 4 "$out"
[ "$elapsed" -lt 40 ] || fail "took ${elapsed}s; KOLO_TIMEOUT is 60"
after=$(ls -A /dev/shm 2>/dev/null | sort)
[ "$before" = "$after" ] || fail "/dev/shm changed: before [$before] after [$after]"
echo "every surviving rank got an error in ${elapsed}s; /dev/shm unchanged"
rm -rf "$out"
