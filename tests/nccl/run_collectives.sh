#!/usr/bin/env bash
# Runs the drop-in's collectives scenario on N ranks: a fresh private folder for the
# ranks to pass the unique id through (it holds the job's secret), removed afterwards.
#   run_collectives.sh KOLORUN NP TEST_PROGRAM
set -uo pipefail
kolorun=$1 np=$2 program=$3
dir=$(mktemp -d "${TMPDIR:-/tmp}/nccl_dropin.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
"$kolorun" -np "$np" "$program" collectives "$dir"
