#!/usr/bin/env bash
# kolo's main job on this machine: a 4-rank allreduce benchmark with checked results,
# nccl-tests style. Host (CPU) memory today; the GPU executor is not built yet.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bash tools/build.sh
exec build/tools/kolorun/kolorun -np "${NP:-4}" build/bench/perf/kolo-perf allreduce -b 8 -e 64M -f 2 -c 1 "$@"
