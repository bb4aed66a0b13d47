#!/usr/bin/env bash
# What only a GPU can check, in one go, for whoever has one: the GPU tests (kernels against
# their host twins, the device path's multi-rank scenarios on the cuda backend), then
# kolo-perf on GPU memory with 1-4 ranks sharing the GPU (kernels over CUDA IPC, and staged
# for comparison), ranks as threads, registered buffers, CUDA graphs, compressed wires, the
# kernel benchmark, and NCCL (--backend nccl; NCCL refuses two ranks on one GPU, so that
# runs with one rank per GPU only). Writes everything to
# bench/results/<date>-gpu-check-<commit>.md with the device's name. Without a GPU it says
# so and exits 0 having run nothing that needs one.
#
# usage: tools/gpu-check.sh [--prebuilt DIR] [--budget SECONDS] [--out FILE] [--log FILE]
#   --prebuilt DIR  use binaries already built in DIR (laid out as a build tree) instead of
#                   setting up and building here; for a lent GPU machine that has no
#                   package network (tools/gpu-bundle.sh makes DIR)
#   --budget S      skip the steps that would start after S seconds (default: no limit)
#   --out FILE      the summary (default bench/results/<date>-gpu-check-<commit>.md); each
#                   step's last 40 lines
#   --log FILE      every step's whole output (default: the summary's name, .log)
# Every step runs under `timeout`, so a hang costs one step, not the whole check.
set -uo pipefail
cd "$(dirname "$0")/.."
build=build budget=0 out="" log=""
while [ $# -gt 0 ]; do
  case $1 in
    --prebuilt) build=$2; prebuilt=1; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --log) log=$2; shift 2 ;;
    *) echo "gpu-check: unknown option '$1'" >&2; exit 2 ;;
  esac
done
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L 2>/dev/null | grep -q GPU; then
  echo "gpu-check: no GPU here (nvidia-smi lists none); nothing run"
  exit 0
fi
if [ -z "${prebuilt:-}" ]; then bash tools/setup.sh && bash tools/build.sh || exit 1; fi
commit=${KOLO_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
[ -n "$out" ] || out="bench/results/$(date +%F)-gpu-check-$commit.md"
[ -n "$log" ] || log="${out%.md}.log"
: >"$log"
kolorun=$build/tools/kolorun/kolorun perf=$build/bench/perf/kolo-perf
export KOLO_DEVICE=cuda KOLO_TIMEOUT=${KOLO_TIMEOUT:-15}
start=$SECONDS

# step SECONDS TITLE COMMAND...: a titled, fenced block of the command's last lines.
step() {
  local limit=$1 title=$2; shift 2
  echo; echo "## $title"; echo
  if [ "$budget" -gt 0 ] && [ $((SECONDS - start)) -ge "$budget" ]; then
    echo "(skipped: the check's budget of ${budget} s was spent)"; return
  fi
  echo '```'
  local t0=$SECONDS
  echo "===== $title" >>"$log"
  timeout -k 5 "$limit" "$@" 2>&1 | tee -a "$log" | tail -40
  local rc=${PIPESTATUS[0]}
  echo '```'
  echo "exit $rc after $((SECONDS - t0)) s$([ "$rc" = 124 ] && echo " (killed at the step's limit of $limit s)")"
}

{
  echo "# GPU check, $(date +%F), commit $commit"
  echo; echo '```'; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"; echo '```'
  step 120 "kernels against their host twins (kolo_gpu_tests)" "$build/tests/gpu/kolo_gpu_tests"
  step 150 "device path on the cuda backend, 2 and 3 ranks on one GPU (device_gpu_test.sh)" \
    bash tests/gpu/device_gpu_test.sh "$kolorun" "$build/tests/multiproc/kolo_test_worker" "$perf"
  for np in 1 2 4; do
    step 60 "kolorun -np $np kolo-perf allreduce -G (kernels over CUDA IPC)" \
      env KOLO_DEBUG=INFO KOLO_DEBUG_SUBSYS=EXEC "$kolorun" -np $np "$perf" allreduce -G -b 8 -e 256M -f 4 -c 1
  done
  step 60 "kolorun -np 2 kolo-perf allreduce -G, barriers as spinning kernels (KOLO_DEVICE_BARRIER=kernel), for comparison" \
    env KOLO_DEVICE_BARRIER=kernel "$kolorun" -np 2 "$perf" allreduce -G -b 8 -e 256M -f 4 -c 1
  step 60 "kolorun -np 2 kolo-perf allreduce -G, staged (KOLO_DEVICE_IPC=0), for comparison" \
    env KOLO_DEVICE_IPC=0 KOLO_DEBUG=INFO KOLO_DEBUG_SUBSYS=EXEC "$kolorun" -np 2 "$perf" allreduce -G -b 8 -e 256M -f 4 -c 1
  step 60 "kolo-perf allreduce --backend nccl, one rank (NCCL's own path on this GPU)" \
    "$perf" allreduce --backend nccl -b 8 -e 256M -f 4 -c 1
  for t in 2 4; do
    step 60 "kolo-perf allreduce -G -t $t: $t ranks as threads of one process on one GPU" \
      "$kolorun" -np 1 "$perf" allreduce -G -t $t -b 8 -e 1G -f 4 -c 1
  done
  # The targets: a large allreduce on registered buffers (read in place) of 2 thread-ranks,
  # against the copy bandwidth the kernel benchmark measures; small allreduces replayed
  # from a CUDA graph on 2-8 thread-ranks (latency beside NCCL's published figures).
  step 60 "kolo-perf allreduce --registered -t 2: 2 thread-ranks on one GPU, buffers read in place" \
    "$kolorun" -np 1 "$perf" allreduce --registered -t 2 -b 1M -e 1G -f 4 -c 1
  for t in 2 4 8; do
    step 45 "kolo-perf allreduce --graph -t $t: small sizes, captured in a CUDA graph" \
      "$kolorun" -np 1 "$perf" allreduce --graph -t $t -b 8 -e 64K -f 2 -n 100 -c 1
    step 45 "kolo-perf allreduce --graph --registered -t $t" \
      "$kolorun" -np 1 "$perf" allreduce --graph --registered -t $t -b 8 -e 64K -f 8 -n 100 -c 1
  done
  for wire in half bfloat16 f8e4m3; do
    step 45 "kolo-perf allreduce -G -t 4 --wire $wire: compressed on the wire, error columns last" \
      "$kolorun" -np 1 "$perf" allreduce -G -t 4 --wire $wire -b 8 -e 256M -f 4 -c 1
  done
  if [ -x "$build/bench/kernels/kolo_kernels_cuda_bench" ]; then
    step 90 "kernel benchmark (kolo_kernels_cuda_bench)" "$build/bench/kernels/kolo_kernels_cuda_bench"
  fi
  gpus=$(nvidia-smi -L | grep -c GPU)
  if [ "$gpus" -ge 2 ]; then
    step 60 "kolorun -np $gpus kolo-perf allreduce --backend nccl (one rank per GPU)" \
      "$kolorun" -np "$gpus" "$perf" allreduce --backend nccl -b 8 -e 256M -f 4 -c 1
  fi
  echo; echo "check took $((SECONDS - start)) s"
} | tee "$out"
echo "gpu-check: wrote $out"
