#!/usr/bin/env bash
# Runs a scenario of the drop-in's test program on N ranks: a fresh private folder for the
# ranks to pass the unique id through (it holds the job's secret), removed afterwards.
#   run_collectives.sh KOLORUN NP TEST_PROGRAM [SCENARIO]   (default: collectives)
# KOLORUN_OPTIONS (words) go to kolorun before -np, e.g. --nccl.
set -uo pipefail
kolorun=$1 np=$2 program=$3 scenario=${4:-collectives}
dir=$(mktemp -d "${TMPDIR:-/tmp}/nccl_dropin.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
"$kolorun" ${KOLORUN_OPTIONS:-} -np "$np" "$program" "$scenario" "$dir"
