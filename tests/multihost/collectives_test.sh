#!/usr/bin/env bash
# The worker's collective scenarios on N test hosts with SLOTS ranks each, started by
# kolorun --launcher: every result checked, and every rank must see N hosts of SLOTS
# ranks (local L/SLOTS, cross C/N), so shm runs within a host and TCP between them.
#   collectives_test.sh KOLORUN WORKER PREFIX N SLOTS [testhosts up options]
set -euo pipefail
kolorun=$1 worker=$2 prefix=$3 n=$4 slots=$5
shift 5
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
hosts_up "$prefix" "$n" "$@"
hosts=$(host_list "$n" "$slots")
np=$((n * slots))

for scenario in quick split p2p unique_id small_messages; do
  start=$(date +%s)
  rc=0
  # Generous limits: CI machines are small and loaded. INIT logs each rank's local/cross.
  out=$(KOLO_TIMEOUT=120 KOLO_DEBUG=INFO KOLO_DEBUG_SUBSYS=INIT,TRANSPORT timeout 500 \
        "$kolorun" --timeout 400 --launcher "$LAUNCHER" -H "$hosts" "$worker" "$scenario" 2>&1) || rc=$?
  if [ "$rc" -ne 0 ]; then
    tail -40 <<< "$out"
    fail "$scenario on $hosts: kolorun exited $rc"
  fi
  grep -q "rank 0: $scenario: [0-9]* checks, 0 failed" <<< "$out" || { tail -20 <<< "$out"; fail "$scenario: no verdict"; }
  seen=$(grep -cE "communicator world0: rank [0-9]+ of $np, local [0-9]+/$slots, cross [0-9]+/$n\$" <<< "$out" || true)
  if [ "$seen" -ne "$np" ]; then
    grep "communicator world0" <<< "$out" || true
    fail "$scenario: $seen of $np ranks saw $n hosts of $slots ranks"
  fi
  # With KOLO_TRANSPORTS naming ucx before tcp, the hosts must have talked over UCX.
  if [[ "${KOLO_TRANSPORTS:-}" == *ucx* && "${KOLO_TRANSPORTS:-}" != *tcp*ucx* ]]; then
    grep -q "peers over ucx" <<< "$out" || fail "$scenario: KOLO_TRANSPORTS=$KOLO_TRANSPORTS but no rank connected over ucx"
  fi
  echo "ok: $scenario on $hosts ($np ranks) in $(( $(date +%s) - start ))s"
done
