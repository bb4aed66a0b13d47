#!/usr/bin/env bash
# What only a GPU can check, in one go, for whoever has one: builds with nvcc, runs the
# `gpu` ctest label (kernels against their host twins, the cuda device backend), then
# kolo-perf on GPU memory with 1-4 ranks sharing the GPU(s) (kernels over CUDA IPC, and
# staged for comparison), the kernel benchmark, through kolo and through
# NCCL (--backend nccl; NCCL refuses two ranks on one GPU, so that runs with one rank per
# GPU only), and writes everything to
# bench/results/<date>-gpu-check-<commit>.md with the device's name. Without a GPU it says
# so and exits 0 having run nothing that needs one.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L 2>/dev/null | grep -q GPU; then
  echo "gpu-check: no GPU here (nvidia-smi lists none); nothing run"
  exit 0
fi
bash tools/setup.sh && bash tools/build.sh || exit 1
out="bench/results/$(date +%F)-gpu-check-$(git rev-parse --short HEAD).md"
{
  echo "# GPU check, $(date +%F), commit $(git rev-parse --short HEAD)"
  echo; echo '```'; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; echo '```'
  echo; echo "## ctest -L gpu"; echo; echo '```'
  ctest --test-dir build -L gpu --output-on-failure 2>&1 | tail -40
  echo '```'
  for np in 1 2 3 4; do
    echo; echo "## kolorun -np $np kolo-perf allreduce -G (KOLO_DEVICE=cuda)"; echo; echo '```'
    KOLO_DEVICE=cuda build/tools/kolorun/kolorun -np $np build/bench/perf/kolo-perf allreduce -G -b 8 -e 256M -f 4 -c 1 2>&1 | tail -25
    echo '```'
  done
  gpus=$(nvidia-smi -L | grep -c GPU)
  if [ "$gpus" -ge 2 ]; then
    echo; echo "## kolorun -np $gpus kolo-perf allreduce --backend nccl (one rank per GPU)"; echo; echo '```'
    KOLO_DEVICE=cuda build/tools/kolorun/kolorun -np "$gpus" build/bench/perf/kolo-perf allreduce --backend nccl -b 8 -e 256M -f 4 -c 1 2>&1 | tail -25
    echo '```'
  fi
  for t in 2 4; do
    echo; echo "## kolo-perf allreduce -G -t $t: $t ranks as threads of one process on one GPU"; echo; echo '```'
    KOLO_DEVICE=cuda build/tools/kolorun/kolorun -np 1 build/bench/perf/kolo-perf allreduce -G -t $t -b 8 -e 1G -f 4 -c 1 2>&1 | tail -25
    echo '```'
  done
  # The targets: a large allreduce on registered buffers (read in place) of 2 thread-ranks,
  # against the copy bandwidth the kernel benchmark measures; small allreduces replayed
  # from a CUDA graph on 2-8 thread-ranks (latency beside NCCL's published figures).
  echo; echo "## kolo-perf allreduce --registered -t 2: 2 thread-ranks on one GPU, buffers read in place"; echo; echo '```'
  KOLO_DEVICE=cuda build/tools/kolorun/kolorun -np 1 build/bench/perf/kolo-perf allreduce --registered -t 2 -b 1M -e 1G -f 4 -c 1 2>&1 | tail -15
  echo '```'
  for t in 2 4 8; do
    echo; echo "## kolo-perf allreduce --graph -t $t: small sizes, captured in a CUDA graph"; echo; echo '```'
    KOLO_DEVICE=cuda build/tools/kolorun/kolorun -np 1 build/bench/perf/kolo-perf allreduce --graph -t $t -b 8 -e 64K -f 2 -n 100 -c 1 2>&1 | tail -18
    KOLO_DEVICE=cuda build/tools/kolorun/kolorun -np 1 build/bench/perf/kolo-perf allreduce --graph --registered -t $t -b 8 -e 64K -f 8 -n 100 -c 1 2>&1 | tail -8
    echo '```'
  done
  for wire in half bfloat16 f8e4m3; do
    echo; echo "## kolo-perf allreduce -G -t 4 --wire $wire: compressed on the wire, error columns last"; echo; echo '```'
    KOLO_DEVICE=cuda build/tools/kolorun/kolorun -np 1 build/bench/perf/kolo-perf allreduce -G -t 4 --wire $wire -b 8 -e 256M -f 4 -c 1 2>&1 | tail -25
    echo '```'
  done
  echo; echo "## kolorun -np 2 kolo-perf allreduce -G, staged (KOLO_DEVICE_IPC=0), for comparison"; echo; echo '```'
  KOLO_DEVICE_IPC=0 KOLO_DEVICE=cuda build/tools/kolorun/kolorun -np 2 build/bench/perf/kolo-perf allreduce -G -b 8 -e 256M -f 4 -c 1 2>&1 | tail -25
  echo '```'
  if [ -x build/bench/kernels/kolo_kernels_cuda_bench ]; then
    echo; echo "## kernel benchmark (kolo_kernels_cuda_bench)"; echo; echo '```'
    build/bench/kernels/kolo_kernels_cuda_bench 2>&1 | tail -40
    echo '```'
  fi
  echo; echo "## kolo-perf allreduce --backend nccl, one rank (NCCL's own path on this GPU)"; echo; echo '```'
  KOLO_DEVICE=cuda build/bench/perf/kolo-perf allreduce --backend nccl -b 8 -e 256M -f 4 -c 1 2>&1 | tail -25
  echo '```'
} | tee "$out"
echo "gpu-check: wrote $out"
