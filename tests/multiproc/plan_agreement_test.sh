#!/usr/bin/env bash
# kolo-plan plans what a communicator runs (issue 50): plan_agreement_worker on every
# topology fixture, as one host of 3 ranks and as 2 emulated hosts of 2, and once with
# KOLO_TRANSPORTS=tcp; each job compares every KOLO_* planner setting (the worker's list).
#   plan_agreement_test.sh KOLORUN WORKER FIXTURE_DIR
set -euo pipefail
kolorun=$1 worker=$2 fixtures=$3
# The network rate a communicator of several hosts measures at start-up replaces the
# fixture's (a measured figure, like the copy rate): off, so that both plan from the fixture.
export KOLO_DEVICE=emulated KOLO_TIMEOUT=60 KOLO_NET_CALIBRATE=0
status=0
run() {
  if ! "$@"; then
    echo "FAILED: $*" >&2
    status=1
  fi
}
# Every fixture kolo-plan reads (--file): JSON and NCCL's XML (hwloc's XML is an input of
# topology discovery, not a fixture kolo-plan loads).
for f in "$fixtures"/*.json "$fixtures"/*.xml; do
  case $(basename "$f") in hwloc_*) continue ;; esac
  run env KOLO_TOPO_FILE="$f" "$kolorun" -np 3 "$worker"
  run env KOLO_TOPO_FILE="$f" KOLO_TEST_HOSTS=2 "$kolorun" -np 4 "$worker"
done
run env KOLO_TOPO_FILE="$fixtures/cpu_vm.json" KOLO_TRANSPORTS=tcp "$kolorun" -np 3 "$worker"
exit $status
