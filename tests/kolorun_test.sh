#!/usr/bin/env bash
# End-to-end checks of kolorun: rank variables, output prefixes, the secret's handling,
# failure and signal propagation, exit codes. Usage: kolorun_test.sh path/to/kolorun
set -u
KOLORUN=${1:?usage: kolorun_test.sh path/to/kolorun}
KOLORUN=$(cd "$(dirname "$KOLORUN")" && pwd)/$(basename "$KOLORUN")
DIR=$(mktemp -d)
FAILURES=0
BG_PID=
cleanup() {
  if [ -n "$BG_PID" ]; then kill -KILL "$BG_PID" 2>/dev/null; fi
  rm -rf "$DIR"
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }
pass() { echo "ok: $*"; }

# A zombie counts as gone: where PID 1 does not reap, orphans stay zombies.
is_alive() {
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
  [ -n "$state" ] && [ "$state" != Z ]
}

# Waits up to $2 seconds for file $1 to exist and be non-empty.
wait_for_file() {
  local i
  for i in $(seq 1 $(($2 * 10))); do
    [ -s "$1" ] && return 0
    sleep 0.1
  done
  return 1
}

# 1. Every rank sees its rank and the world size; every line carries its rank's prefix.
out=$(timeout 30 "$KOLORUN" -np 3 sh -c 'echo $KOLO_RANK $KOLO_SIZE' | sort)
expected=$(printf '[0] 0 3\n[1] 1 3\n[2] 2 3')
if [ "$out" = "$expected" ]; then pass "-np 3 prints prefixed rank lines"; else fail "-np 3 printed: $out"; fi

# stderr lines go to kolorun's stderr, prefixed; --no-prefix leaves lines alone.
err=$(timeout 30 "$KOLORUN" -np 2 sh -c 'echo oops >&2' 2>&1 >/dev/null | sort)
if [ "$err" = "$(printf '[0] oops\n[1] oops')" ]; then pass "stderr is relayed with prefixes"; else fail "stderr: $err"; fi
out=$(timeout 30 "$KOLORUN" --no-prefix -np 1 echo plain)
if [ "$out" = "plain" ]; then pass "--no-prefix"; else fail "--no-prefix printed: $out"; fi

# Local rank and size, the store address.
out=$(timeout 30 "$KOLORUN" -np 2 sh -c 'echo $KOLO_LOCAL_RANK/$KOLO_LOCAL_SIZE $KOLO_ADDR' | sort)
if echo "$out" | grep -q '^\[1\] 1/2 127\.0\.0\.1:[0-9][0-9]*$'; then pass "local rank, size, KOLO_ADDR"; else fail "local variables: $out"; fi

# 2. The secret reaches every rank's environment and no command line. Rank 1 goes through
# a stand-in for ssh (runs the remote command here), so the ssh path is covered too.
cat >"$DIR/fake_ssh" <<'EOF'
#!/bin/sh
# Called as: fake_ssh -o BatchMode=yes HOST COMMAND; runs COMMAND as sshd would.
shift 3
exec sh -c "$*"
EOF
chmod +x "$DIR/fake_ssh"
"$KOLORUN" -H localhost:1,fakehost:1 --ssh "$DIR/fake_ssh" sh -c \
  "printf '%s' \"\$KOLO_SECRET\" > $DIR/secret.\$KOLO_RANK; echo \$\$ > $DIR/pid.\$KOLO_RANK; exec sleep 60" \
  >"$DIR/secret_job.out" 2>&1 &
BG_PID=$!
if wait_for_file "$DIR/pid.0" 10 && wait_for_file "$DIR/pid.1" 10 && wait_for_file "$DIR/secret.1" 10; then
  sleep 0.2  # let both ranks reach exec sleep
  secret=$(cat "$DIR/secret.0")
  if echo "$secret" | grep -Eq '^[0-9a-f]{64}$'; then pass "KOLO_SECRET is 32 bytes in hex"; else fail "KOLO_SECRET looks wrong: '$secret'"; fi
  if cmp -s "$DIR/secret.0" "$DIR/secret.1"; then pass "local and remote ranks get the same secret"; else fail "ranks got different secrets"; fi
  for r in 0 1; do
    pid=$(cat "$DIR/pid.$r")
    if tr '\0' '\n' <"/proc/$pid/environ" | grep -qxF "KOLO_SECRET=$(cat "$DIR/secret.$r")"; then
      pass "rank $r has KOLO_SECRET in its environment"
    else
      fail "rank $r: KOLO_SECRET not in /proc/$pid/environ"
    fi
    if tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qF -f "$DIR/secret.0"; then
      fail "rank $r: the secret is on its command line"
    else
      pass "rank $r: the secret is not in /proc/$pid/cmdline"
    fi
  done
  # Any process at all (kolorun, the ssh stand-in, the remote shell): pattern read from a
  # file, so that grep's own command line stays clean.
  if cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n' | grep -qF -f "$DIR/secret.0"; then
    fail "the secret appears in some process's command line"
  else
    pass "the secret is in no command line"
  fi
  if ps -eo args | grep -qF -f "$DIR/secret.0"; then fail "the secret shows in ps"; else pass "the secret is not in ps output"; fi
  # SIGTERM on kolorun stops the job and exits 143; no rank is left behind.
  kill -TERM "$BG_PID"
  wait "$BG_PID"
  rc=$?
  BG_PID=
  if [ "$rc" = 143 ]; then pass "SIGTERM on kolorun exits 143"; else fail "SIGTERM on kolorun exited $rc"; fi
  sleep 0.3
  for r in 0 1; do
    pid=$(cat "$DIR/pid.$r")
    if is_alive "$pid"; then fail "rank $r (pid $pid) survived kolorun"; else pass "rank $r is gone"; fi
  done
else
  fail "ranks did not start: $(cat "$DIR/secret_job.out")"
fi

# 3. A failing rank ends the job quickly with a non-zero status and says which rank.
start=$(date +%s)
timeout 60 "$KOLORUN" -np 3 sh -c 'if [ $KOLO_RANK = 1 ]; then exit 3; fi; sleep 30' >"$DIR/fail.out" 2>&1
rc=$?
elapsed=$(($(date +%s) - start))
if [ "$rc" -ne 0 ] && [ "$elapsed" -le 10 ]; then pass "failing rank: exit $rc after ${elapsed}s"; else fail "failing rank: exit $rc after ${elapsed}s"; fi
if [ "$rc" = 3 ]; then pass "exit status is the failing rank's"; else fail "exit status $rc, expected 3"; fi
if grep -q '^kolorun: rank 1 exited with status 3$' "$DIR/fail.out"; then pass "names the failing rank"; else fail "message: $(cat "$DIR/fail.out")"; fi

timeout 30 "$KOLORUN" -np 2 sh -c 'if [ $KOLO_RANK = 0 ]; then kill -SEGV $$; fi; sleep 30' >"$DIR/sig.out" 2>&1
rc=$?
if [ "$rc" = 139 ] && grep -q 'rank 0 killed by signal SIGSEGV' "$DIR/sig.out"; then pass "rank killed by a signal: 139"; else fail "signal: exit $rc, $(cat "$DIR/sig.out")"; fi

# A rank that ignores SIGTERM is killed after the grace period.
start=$(date +%s)
timeout 30 "$KOLORUN" -np 2 sh -c 'trap "" TERM; if [ $KOLO_RANK = 0 ]; then sleep 0.5; exit 1; fi; sleep 30' >/dev/null 2>&1
rc=$?
elapsed=$(($(date +%s) - start))
if [ "$rc" = 1 ] && [ "$elapsed" -le 8 ]; then pass "SIGKILL after the grace period (${elapsed}s)"; else fail "grace: exit $rc after ${elapsed}s"; fi

# --timeout stops the job with 124.
timeout 30 "$KOLORUN" --timeout 1 -np 2 sleep 30 >/dev/null 2>&1
rc=$?
if [ "$rc" = 124 ]; then pass "--timeout exits 124"; else fail "--timeout exited $rc"; fi

# 4. Help and errors.
if "$KOLORUN" --help-env | grep -q KOLO_TIMEOUT; then pass "--help-env lists KOLO_TIMEOUT"; else fail "--help-env lacks KOLO_TIMEOUT"; fi
if "$KOLORUN" --help | grep -q '^usage: kolorun'; then pass "--help"; else fail "--help"; fi
msg=$("$KOLORUN" --frobnicate -np 2 true 2>&1)
rc=$?
if [ "$rc" = 2 ] && echo "$msg" | grep -q -- '--frobnicate'; then pass "unknown option: exit 2, named"; else fail "unknown option: exit $rc, '$msg'"; fi
printf 'localhost slots=2\n# comment\n\nlocalhost slots=two\n' >"$DIR/hosts"
msg=$("$KOLORUN" --hostfile "$DIR/hosts" true 2>&1)
rc=$?
if [ "$rc" = 2 ] && echo "$msg" | grep -q 'hosts:4:'; then pass "host file error names the line"; else fail "host file: exit $rc, '$msg'"; fi
printf 'localhost slots=2 # two here\n' >"$DIR/hosts"
out=$(timeout 30 "$KOLORUN" --hostfile "$DIR/hosts" sh -c 'echo $KOLO_SIZE' | sort | tr '\n' ' ')
if [ "$out" = "[0] 2 [1] 2 " ]; then pass "-np defaults to the host file's slots"; else fail "host file job printed: $out"; fi
msg=$("$KOLORUN" -np 2 -x KOLO_SECRET=abc true 2>&1)
if [ $? = 2 ]; then pass "-x refuses per-rank variables"; else fail "-x KOLO_SECRET accepted: $msg"; fi
out=$(FOO_FROM_ENV=1 KOLO_DEBUG=WARN timeout 30 "$KOLORUN" -np 1 -x BAR=two sh -c 'echo $KOLO_DEBUG $BAR')
if [ "$out" = "[0] WARN two" ]; then pass "-x and KOLO_* reach the ranks"; else fail "forwarded: $out"; fi
msg=$("$KOLORUN" -np 1 /nonexistent/program 2>&1)
if [ $? = 127 ]; then pass "missing program: 127"; else fail "missing program: $msg"; fi
# --bind-to core (the default when the ranks fit): each rank on its own allowed CPU.
cpus=$(grep Cpus_allowed_list /proc/self/status | awk '{print $2}')
if [ "$(nproc)" -ge 2 ]; then
  out=$(timeout 30 "$KOLORUN" -np 2 sh -c 'grep Cpus_allowed_list /proc/self/status' | awk '{print $NF}' | sort -u | wc -l)
  pinned=$(timeout 30 "$KOLORUN" -np 2 sh -c 'grep Cpus_allowed_list /proc/self/status' | awk '{print $NF}' | grep -c -v '[-,]')
  if [ "$out" = 2 ] && [ "$pinned" = 2 ]; then pass "--bind-to core pins ranks to distinct CPUs"; else fail "binding: $out distinct, $pinned single"; fi
fi
out=$(timeout 30 "$KOLORUN" --bind-to none -np 1 sh -c 'grep Cpus_allowed_list /proc/self/status' | awk '{print $NF}')
if [ "$out" = "$cpus" ]; then pass "--bind-to none leaves the affinity"; else fail "--bind-to none: $out (expected $cpus)"; fi
msg=$("$KOLORUN" --bind-to socket -np 1 true 2>&1)
if [ $? = 2 ]; then pass "--bind-to refuses unknown values"; else fail "--bind-to socket: $msg"; fi

# horovodrun's command line with horovodrun replaced by kolorun (tools/kolorun/horovod_flags.h).
out=$(timeout 30 "$KOLORUN" -np 1 --fusion-threshold-mb 32 --cycle-time-ms 3.5 --verbose --autotune \
  --timeline-filename /tmp/tl.json --start-timeout 45 --network-interface lo,eth0 --gloo \
  sh -c 'echo $KOLO_FUSION_THRESHOLD $KOLO_CYCLE_TIME $KOLO_DEBUG $KOLO_AUTOTUNE $KOLO_TIMELINE $KOLO_TIMEOUT $KOLO_SOCKET_IFNAME' 2>"$DIR/notes")
if [ "$out" = "[0] 33554432 3.5 INFO 1 /tmp/tl.json 45 lo" ]; then pass "horovodrun's flags set kolo's variables"; else fail "horovodrun flags: '$out'"; fi
if grep -q "note: --gloo" "$DIR/notes" && grep -q "uses the first, lo" "$DIR/notes"; then pass "--gloo and a list of interfaces are noted"; else fail "notes: $(cat "$DIR/notes")"; fi
out=$(timeout 30 "$KOLORUN" -np 1 --fusion-threshold-mb 32 -x KOLO_FUSION_THRESHOLD=7 sh -c 'echo $KOLO_FUSION_THRESHOLD')
if [ "$out" = "[0] 7" ]; then pass "-x wins over a horovodrun flag"; else fail "-x vs --fusion-threshold-mb: '$out'"; fi
msg=$("$KOLORUN" -np 1 --fusion-threshold-mb lots true 2>&1)
if [ $? = 2 ] && echo "$msg" | grep -q -- "--fusion-threshold-mb: 'lots'"; then pass "a bad horovodrun value is named"; else fail "bad value: $msg"; fi
msg=$("$KOLORUN" -np 1 -p 22 --launcher 'ip netns exec {host}' true 2>&1)
if [ $? = 2 ]; then pass "-p with --launcher refused"; else fail "-p with --launcher: $msg"; fi
printf 'localhost slots=1\nno-such-host.invalid slots=1\n' >"$DIR/hosts"
msg=$("$KOLORUN" --hostfile "$DIR/hosts" true 2>&1)
if [ $? = 2 ] && echo "$msg" | grep -q "hosts:2: host 'no-such-host.invalid' is unknown"; then pass "an unknown host is named before anything starts"; else fail "unknown host: $msg"; fi
printf 'localhost slots=1\nlocalhost slots=1\n' >"$DIR/hosts"
msg=$("$KOLORUN" --hostfile "$DIR/hosts" true 2>&1)
if [ $? = 2 ] && echo "$msg" | grep -q "hosts:2: host 'localhost' again"; then pass "a duplicate host is named"; else fail "duplicate: $msg"; fi

if [ "$FAILURES" -ne 0 ]; then
  echo "$FAILURES check(s) failed"
  exit 1
fi
echo "all kolorun checks passed"
