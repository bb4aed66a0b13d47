#!/usr/bin/env bash
# kolo's main job on this machine: a 4-rank allreduce benchmark with checked results,
# nccl-tests style. With a GPU (and a kolo built with nvcc) the buffers are GPU memory
# (-G: kernels over the peers' memory on one host, else staged through pinned host memory;
# 4 processes sharing one H100 ran it, 0 wrong, on 2026-11-26:
# bench/results/2026-11-26-first-gpu-runs-h100.md); otherwise host memory.
# KOLO_DEVICE=emulated runs the device path on the CPU's emulated device.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bash tools/build.sh
device=()
if [ "${KOLO_DEVICE:-auto}" = emulated ] || { [ "${KOLO_DEVICE:-auto}" != none ] && command -v nvidia-smi >/dev/null &&
                                              nvidia-smi -L 2>/dev/null | grep -q GPU; }; then
  device=(-G)
fi
exec build/tools/kolorun/kolorun -np "${NP:-4}" build/bench/perf/kolo-perf allreduce -b 8 -e 64M -f 2 -c 1 "${device[@]}" "$@"
