#!/usr/bin/env bash
# The planner on a slow network: 2 test hosts x 2 ranks with links shaped to 2 Gbit/s,
# far below the NICs' nominal speed. kolo measures the network when the communicator is
# made (engine/net_calibration.h), and the planner must then choose the two-level
# schedule for a large allreduce on its own (the ring it chose with nominal figures
# measured 1.3-1.5x slower there); with KOLO_NET_CALIBRATE=0 it keeps the ring.
#   planner_test.sh KOLORUN KOLO_PERF PREFIX
set -euo pipefail
kolorun=$1 perf=$2 prefix=$3
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
hosts_up "$prefix" 2 --rate 2gbit

run() {
  KOLO_TIMEOUT=120 KOLO_DEBUG=INFO KOLO_DEBUG_SUBSYS=INIT,PLAN timeout 500 \
    "$kolorun" --timeout 400 --launcher "$LAUNCHER" -H "$(host_list 2 2)" \
    "$perf" allreduce -b 8M -e 8M -n 2 -w 1 -c 1 2>&1
}
out=$(run) || { tail -20 <<< "$out"; fail "kolo-perf across the hosts failed"; }
grep -q "network between hosts measured at" <<< "$out" || { tail -20 <<< "$out"; fail "no network measurement logged"; }
grep -E "allreduce of 8388608 B on 4 ranks: schedule hierarchical" <<< "$out" >/dev/null ||
  { grep -E "allreduce of 8388608 B" <<< "$out" | sed -n 1,3p; fail "the planner did not choose the two-level schedule"; }
echo "ok: $(grep -m1 -o "measured at [0-9., ]*" <<< "$out")GB/s; the planner chose the two-level schedule"

out=$(KOLO_NET_CALIBRATE=0 run) || { tail -20 <<< "$out"; fail "kolo-perf with KOLO_NET_CALIBRATE=0 failed"; }
if grep -q "network between hosts measured at" <<< "$out"; then fail "KOLO_NET_CALIBRATE=0 still measured"; fi
echo "ok: KOLO_NET_CALIBRATE=0 keeps the nominal figures"
