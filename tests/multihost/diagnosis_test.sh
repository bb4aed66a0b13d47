#!/usr/bin/env bash
# Diagnosis across hosts (issue 49): 64 ranks on 4 test hosts, rank 2 stops calling after 5
# allreduces and stays alive; every survivor's error names rank 2 and collective call 6
# within KOLO_TIMEOUT + 1 s, though most of them waited for other ranks (the store tells
# which ranks did not fail with them), and kolorun's summary points at rank 2.
#   diagnosis_test.sh KOLORUN WORKER PREFIX [HOSTS RANKS_PER_HOST]
set -uo pipefail
source "$(dirname "$0")/lib.sh"
kolorun=${1:?usage: diagnosis_test.sh KOLORUN WORKER PREFIX [HOSTS RANKS_PER_HOST]}
worker=$2
hosts=${4:-4}
per_host=${5:-16}
hosts_up "$3" "$hosts"
timeout_s=5
list=
for ((h = 0; h < hosts; ++h)); do list+="${list:+,}$PREFIX-h$h:$per_host"; done
n=$((hosts * per_host))
out=$(KOLO_TIMEOUT=$timeout_s timeout 120 "$kolorun" --launcher "$LAUNCHER" -H "$list" -x KOLO_TIMEOUT \
      -x DIAG_STUCK_RANK=2 -x DIAG_STUCK_AFTER=5 -x DIAG_STUCK_SECONDS=30 -x DIAG_COUNT=16 "$worker" 2>&1)
failed=$(grep -E '^\[[0-9]+\] rank [0-9]+: call 6 failed after' <<< "$out")
count=$(grep -c . <<< "$failed")
[ "$count" = $((n - 1)) ] || fail "$count of $((n - 1)) survivors reported a failed call 6: $(tail -n 20 <<< "$out")"
unnamed=$(grep -v "rank 2 did not fail with the other" <<< "$failed")
[ -z "$unnamed" ] || fail "survivors whose error does not name rank 2: $(head -n 3 <<< "$unnamed")"
grep -v -q "collective call 6 " <<< "$failed" && fail "an error does not name collective call 6"
late=$(sed -E 's/.*failed after ([0-9.]+) s:.*/\1/' <<< "$failed" | awk -v t=$timeout_s '$1 > t + 1' | head -n 1)
[ -z "$late" ] || fail "a survivor's error came after $late s, past KOLO_TIMEOUT + 1 s"
grep -q "the ranks part at call 6 (allreduce of 16 x float): .*look at rank 2 (no dump)" <<< "$out" ||
  fail "kolorun's summary does not point at rank 2: $(grep -A8 'flight recorders' <<< "$out")"
echo "diagnosis across $hosts hosts: all $count survivors name rank 2 and call 6 within $((timeout_s + 1)) s"
