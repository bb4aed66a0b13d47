#!/usr/bin/env bash
# kolo-plan shows the plan the communicator would run: on one host the one-host executor's
# program (recorded from its own code: staging copies, counters), with KOLO_TRANSPORTS=tcp
# the schedule executor's; the table's "chosen" column comes from plan().
set -euo pipefail
plan="$1/tools/kolo_plan/kolo-plan"
fail() { echo "FAIL: $*"; exit 1; }
local_dump=$("$plan" --fixture cpu_vm --memory host --ranks-per-host 3 --dump two_shot --bytes 4096 --rank 1)
grep -q "^# allreduce of 4096 B on 3 ranks: local two_shot" <<<"$local_dump" || fail "one host: $local_dump"
grep -q "wait for counter 1 >= 1 of every peer" <<<"$local_dump" || fail "no reduced-counter wait: $local_dump"
grep -q "copy staging\[" <<<"$local_dump" || fail "no staging copy: $local_dump"
tcp_dump=$(KOLO_TRANSPORTS=tcp "$plan" --fixture cpu_vm --memory host --ranks-per-host 3 --dump two_shot --bytes 4096 --rank 1)
grep -q "^# allreduce of 4096 B on 3 ranks: schedule two_shot" <<<"$tcp_dump" || fail "tcp: $tcp_dump"
grep -q "send to 0 tag" <<<"$tcp_dump" || fail "no sends over tcp: $tcp_dump"
json=$("$plan" --fixture cpu_vm --memory host --ranks-per-host 2 --dump one_shot --bytes 64 --json)
grep -q '"kind": "wait", "call": 0, "counter": 0, "value": 1, "peer": -1' <<<"$json" || fail "json: $json"
table=$("$plan" --fixture cpu_vm --memory host --ranks-per-host 2 --min-bytes 8 --max-bytes 8)
grep -q "chosen local one_shot" <<<"$table" || fail "table: $table"
grep -q "shm_chosen_simulated" <<<"$table" || fail "no simulated one-host time: $table"
echo "kolo-plan shows one-host programs and schedules"
