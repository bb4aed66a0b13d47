#!/usr/bin/env bash
# What only a GPU can check, in one go, for whoever has one: the GPU tests (kernels against
# their host twins, the device path's multi-rank scenarios on the cuda backend), kolo-perf
# on GPU memory with 1-4 ranks sharing the GPU (kernels over CUDA IPC, and staged), device
# calls between 2 test hosts (network namespaces, every rank on this GPU) with the soak,
# ranks as threads, registered buffers, CUDA graphs, compressed wires, kolo.torch on CUDA
# tensors, PyTorch's own "nccl" backend on kolo's libnccl.so.2 (kolorun --nccl, 2 ranks on
# one GPU: collectives and DDP), the kernel benchmark, and NCCL (--backend nccl; NCCL
# refuses two ranks on one GPU, so that runs with one rank per GPU only). Writes everything to
# bench/results/<date>-gpu-check-<commit>.md with the device's name, and ends with a
# one-screen summary (step, pass/fail, the key figure). Exits non-zero when a step failed.
# Without a GPU it says so and exits 0 having run nothing that needs one.
#
# usage: tools/gpu-check.sh [--prebuilt DIR] [--budget SECONDS] [--out FILE] [--log FILE]
#   --prebuilt DIR  use binaries already built in DIR (laid out as a build tree) instead of
#                   setting up and building here; for a lent GPU machine that has no
#                   package network (tools/gpu-bundle.sh makes DIR)
#   --budget S      skip the steps that would start after S seconds (default 360: what a
#                   lease allows); 0: no limit
#   --out FILE      the summary (default bench/results/<date>-gpu-check-<commit>.md); each
#                   step's last 40 lines
#   --log FILE      every step's whole output (default: the summary's name, .log)
#   --only REGEX    run only the steps whose title matches REGEX (grep -E): a second call
#                   of a lease, after a fix, re-measures what the fix touched
# KOLO_GPU_CHECK_DEVICE=emulated runs the same steps on the emulated device (no GPU
# needed; steps that need CUDA binaries are skipped): how the check itself is tested.
# Every step runs under `timeout`, so a hang costs one step, not the whole check.
set -uo pipefail
cd "$(dirname "$0")/.."
build=build budget=360 out="" log="" only=""
while [ $# -gt 0 ]; do
  case $1 in
    --prebuilt) build=$2; prebuilt=1; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --log) log=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown option '$1'" >&2; exit 2 ;;
  esac
done
device=${KOLO_GPU_CHECK_DEVICE:-cuda}
if [ "$device" = cuda ] && { ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L 2>/dev/null | grep -q GPU; }; then
  echo "gpu-check: no GPU here (nvidia-smi lists none); nothing run"
  exit 0
fi
if [ -z "${prebuilt:-}" ]; then bash tools/setup.sh && bash tools/build.sh || exit 1; fi
commit=${KOLO_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
[ -n "$out" ] || out="bench/results/$(date +%F)-gpu-check-$commit.md"
[ -n "$log" ] || log="${out%.md}.log"
: >"$log"
results=$(mktemp)  # one line per step: verdict, seconds, key figure, title (tab-separated)
kolorun=$build/tools/kolorun/kolorun perf=$build/bench/perf/kolo-perf worker=$build/tests/multiproc/kolo_test_worker
python=${KOLO_PYTHON:-python3}
export KOLO_DEVICE=$device KOLO_TIMEOUT=${KOLO_TIMEOUT:-15}
start=$SECONDS

# The key figure of a step's output: a kolo-perf table's average bus bandwidth and its
# largest size's, a test's verdict line, or the last line.
figure() {
  local text=$1 line
  if line=$(grep -m1 "Avg bus bandwidth" <<< "$text"); then
    local last
    last=$(grep -E '^(\[0\])? *[0-9]+ +[0-9]+ ' <<< "$text" | tail -1 | awk '{ if ($1 == "[0]") shift_ = 1; else shift_ = 0;
      printf "%s B: %s GB/s", $(1 + shift_), $(8 + shift_) }')
    echo "avg busbw ${line##*: } GB/s; $last"
  elif line=$(grep -E "checks, [0-9]+ failed|tests? passed|PASSED|FAILED|failures|ok: " <<< "$text" | tail -1); then
    echo "${line:0:90}"
  else
    tail -1 <<< "$text" | cut -c1-90
  fi
}

# step SECONDS TITLE COMMAND...: a titled, fenced block of the command's last lines; a line
# in the summary. A kolo-perf table must also say "Out of bounds values : 0 OK".
step() {
  local limit=$1 title=$2; shift 2
  if [ -n "$only" ] && ! grep -Eq -- "$only" <<< "$title"; then return; fi
  echo; echo "## $title"; echo
  if [ "$budget" -gt 0 ] && [ $((SECONDS - start)) -ge "$budget" ]; then
    echo "(skipped: the check's budget of ${budget} s was spent)"
    printf 'skipped\t0\t\t%s\n' "$title" >>"$results"; return
  fi
  echo '```'
  local t0=$SECONDS text rc
  echo "===== $title" >>"$log"
  text=$(timeout -k 5 "$limit" "$@" 2>&1)
  rc=$?
  printf '%s\n' "$text" >>"$log"
  tail -40 <<< "$text"
  echo '```'
  echo "exit $rc after $((SECONDS - t0)) s$([ "$rc" = 124 ] && echo " (killed at the step's limit of $limit s)")"
  local verdict=pass
  [ "$rc" = 0 ] || verdict=FAIL
  [ "$rc" = 77 ] && verdict=skipped  # the step's own skip (a test's exit 77)
  if grep -q "Out of bounds values" <<< "$text" && ! grep -q "Out of bounds values : 0 OK" <<< "$text"; then verdict=FAIL; fi
  printf '%s\t%s\t%s\t%s\n' "$verdict" $((SECONDS - t0)) "$(figure "$text")" "$title" >>"$results"
}

# skip TITLE WHY: a step that cannot run here.
skip() {
  if [ -n "$only" ] && ! grep -Eq -- "$only" <<< "$1"; then return; fi
  echo; echo "## $1"; echo; echo "(skipped: $2)"; printf 'skipped\t0\t%s\t%s\n' "$2" "$1" >>"$results"; }

# Device calls between 2 test hosts, every rank on this GPU (root, network namespaces).
across_hosts() {
  local hosts=tools/testhosts.sh
  if ! "$hosts" check >/dev/null 2>&1; then skip "device calls across 2 test hosts" "cannot make test hosts here"; return; fi
  "$hosts" --prefix kgc down >/dev/null 2>&1
  "$hosts" --prefix kgc up 2 --rate 2gbit >/dev/null 2>&1 || { skip "device calls across 2 test hosts" "testhosts up failed"; return; }
  local launch=("$kolorun" --launcher "$hosts exec {host}" -H kgc-h0:1,kgc-h1:1)
  for coll in allreduce alltoall sendrecv; do
    step 60 "2 test hosts: kolo-perf $coll -G (staged; tcp 2 Gbit/s; both ranks on this GPU)" \
      "${launch[@]}" "$perf" "$coll" -G -b 8 -e 64M -f 8 -c 1
  done
  step 90 "2 test hosts: kolo_soak on device buffers, 200 random calls checked" \
    "${launch[@]}" "$build/tests/multiproc/kolo_soak" 200
  "$hosts" --prefix kgc down >/dev/null 2>&1
}

# 2 processes under MPS (where the control daemon starts here): kernels of both run side
# by side, so kolo picks the kernel barrier and the one-kernel allreduce by itself.
mps_step() {
  if [ "$device" != cuda ] || ! command -v nvidia-cuda-mps-control >/dev/null; then
    skip "kolo-perf allreduce -G, 2 processes under MPS" "no MPS control daemon here"; return
  fi
  local pipes logs
  pipes=$(mktemp -d) logs=$(mktemp -d)
  if ! CUDA_MPS_PIPE_DIRECTORY=$pipes CUDA_MPS_LOG_DIRECTORY=$logs nvidia-cuda-mps-control -d; then
    skip "kolo-perf allreduce -G, 2 processes under MPS" "the MPS daemon did not start"; return
  fi
  sleep 1
  step 60 "kolo-perf allreduce -G, 2 processes under MPS" \
    env CUDA_MPS_PIPE_DIRECTORY="$pipes" KOLO_DEBUG=INFO KOLO_DEBUG_SUBSYS=EXEC \
    "$kolorun" -np 2 "$perf" allreduce -G -b 8 -e 256M -f 4 -c 1
  # Under MPS the small calls of every collective run in one kernel (processes; no host
  # barrier): every collective x dtype x op, in place and not.
  for np in 2 3; do
    step 60 "device_collectives, $np processes under MPS: every collective, dtype, op (small ones in one kernel)" \
      env CUDA_MPS_PIPE_DIRECTORY="$pipes" "$kolorun" -np $np "$worker" device_collectives
  done
  echo quit | CUDA_MPS_PIPE_DIRECTORY=$pipes nvidia-cuda-mps-control
  rm -rf "$pipes" "$logs"
}

{
  echo "# GPU check, $(date +%F), commit $commit"
  echo; echo '```'
  if [ "$device" = cuda ]; then nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; else echo "device: $device"; fi
  echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"; echo '```'
  if [ -x "$build/tests/gpu/kolo_gpu_tests" ] && [ "$device" = cuda ]; then
    step 120 "kernels against their host twins (kolo_gpu_tests)" "$build/tests/gpu/kolo_gpu_tests"
  else
    skip "kernels against their host twins (kolo_gpu_tests)" "no CUDA build or no GPU"
  fi
  step 150 "device path, 2 and 3 ranks on one GPU (device_gpu_test.sh)" \
    bash tests/gpu/device_gpu_test.sh "$kolorun" "$worker" "$perf"
  for np in 1 2 4; do
    step 60 "kolorun -np $np kolo-perf allreduce -G (kernels over CUDA IPC)" \
      env KOLO_DEBUG=INFO KOLO_DEBUG_SUBSYS=EXEC "$kolorun" -np $np "$perf" allreduce -G -b 8 -e 256M -f 4 -c 1
  done
  for coll in allreduce sendrecv; do
    step 60 "kolorun -np 2 kolo-perf $coll -G, staged (KOLO_DEVICE_IPC=0)" \
      env KOLO_DEVICE_IPC=0 "$kolorun" -np 2 "$perf" "$coll" -G -b 8 -e 256M -f 4 -c 1
  done
  # Staged, 512 B and less have cost 239-300 us per call in every H200 run, 2 KB-32 KB 48-75 us,
  # with the same host plan (fast_box): where the step lies, and whether threads show it.
  step 45 "kolo-perf allreduce -G staged, 2 processes, 256 B-4 KB (the step between 512 B and 2 KB)" \
    env KOLO_DEVICE_IPC=0 "$kolorun" -np 2 "$perf" allreduce -G -b 256 -e 4K -f 2 -n 100 -c 1
  step 45 "the same, 2 thread-ranks" \
    env KOLO_DEVICE_IPC=0 "$kolorun" -np 1 "$perf" allreduce -G -t 2 -b 256 -e 4K -f 2 -n 100 -c 1
  step 45 "device_collectives, 2 processes staged (KOLO_DEVICE_IPC=0): every collective, dtype, op" \
    env KOLO_DEVICE_IPC=0 "$kolorun" -np 2 "$worker" device_collectives
  step 60 "a rank killed with device calls queued: the survivors' streams released (device_kill_test.sh)" \
    bash tests/multiproc/device_kill_test.sh "$worker"
  across_hosts
  step 45 "kolo-perf allreduce -G -t 2: small sizes (one kernel, protocol flagged)" \
    "$kolorun" -np 1 "$perf" allreduce -G -t 2 -b 8 -e 64K -f 8 -n 1000 -c 1
  step 45 "the same with KOLO_DEVICE_FLAGGED=0 (copy, barrier and reduce kernels), for comparison" \
    env KOLO_DEVICE_FLAGGED=0 "$kolorun" -np 1 "$perf" allreduce -G -t 2 -b 8 -e 64K -f 8 -n 1000 -c 1
  step 45 "kolo-perf allgatherv -G -t 3: small sizes in one kernel (protocol flagged), uneven blocks" \
    "$kolorun" -np 1 "$perf" allgatherv -G -t 3 -b 8 -e 64K -f 8 -n 100 -c 1
  for coll in reduce broadcast allgather reduce_scatter alltoall; do
    step 45 "kolo-perf $coll -G -t 3: small sizes in one kernel (protocol flagged)" \
      "$kolorun" -np 1 "$perf" "$coll" -G -t 3 -b 8 -e 64K -f 8 -n 100 -c 1
  done
  step 45 "kolo-perf allgather --graph -t 8: small sizes in one kernel, captured in a CUDA graph" \
    "$kolorun" -np 1 "$perf" allgather --graph -t 8 -b 8 -e 64K -f 8 -n 50 -c 1
  step 45 "kolo-perf allreduce -G -t 3 -d all -o all: every dtype and op, small sizes" \
    "$kolorun" -np 1 "$perf" allreduce -G -t 3 -d all -o all -b 4 -e 64K -f 16 -n 3 -w 1 -c 1
  mps_step
  for t in 2 4 8; do
    step 45 "kolo-perf allreduce --graph -t $t: small sizes, captured in a CUDA graph" \
      "$kolorun" -np 1 "$perf" allreduce --graph -t $t -b 8 -e 64K -f 8 -n 50 -c 1
  done
  step 45 "kolo-perf allreduce --graph --registered -t 8" \
    "$kolorun" -np 1 "$perf" allreduce --graph --registered -t 8 -b 8 -e 64K -f 8 -n 50 -c 1
  step 60 "kolo-perf allreduce --registered -t 2: 2 thread-ranks on one GPU, buffers read in place" \
    "$kolorun" -np 1 "$perf" allreduce --registered -t 2 -b 1M -e 1G -f 4 -c 1
  step 60 "kolo-perf allreduce -G -t 2: plain cudaMalloc buffers, shared with the peers at first use (KOLO_DEVICE_AUTO_REGISTER; target >= 500 GB/s at 1 GB)" \
    "$kolorun" -np 1 "$perf" allreduce -G -t 2 -b 1M -e 1G -f 4 -c 1
  step 60 "the same with KOLO_DEVICE_AUTO_REGISTER=0 (through the slots), for comparison" \
    env KOLO_DEVICE_AUTO_REGISTER=0 "$kolorun" -np 1 "$perf" allreduce -G -t 2 -b 1M -e 1G -f 4 -c 1
  step 60 "kolorun -np 2 kolo-perf allreduce -G: 2 processes, plain buffers mapped through CUDA IPC at first use" \
    "$kolorun" -np 2 "$perf" allreduce -G -b 4M -e 256M -f 4 -c 1
  for wire in half bfloat16 f8e4m3; do
    step 45 "kolo-perf allreduce -G -t 2 --wire $wire: small sizes compressed, in one kernel (protocol flagged)" \
      "$kolorun" -np 1 "$perf" allreduce -G -t 2 --wire "$wire" -b 8 -e 64K -f 8 -n 200 -c 1
  done
  step 45 "kolo-perf allreduce -G -t 4 --wire half: compressed on the wire" \
    "$kolorun" -np 1 "$perf" allreduce -G -t 4 --wire half -b 8 -e 64M -f 8 -c 1
  if "$python" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null || [ "$device" != cuda ]; then
    step 90 "kolo.torch on CUDA tensors, 2 ranks on one GPU (tests/gpu/torch_cuda_check.py)" \
      env PYTHONPATH="$PWD/api/python" KOLO_LIBRARY="$build/libkolo.so" "$kolorun" -np 2 "$python" tests/gpu/torch_cuda_check.py
    step 60 "kolo.torch op=Adasum on CUDA tensors, 3 ranks on one GPU (tests/python/adasum_test.py --cuda)" \
      env PYTHONPATH="$PWD/api/python" KOLO_LIBRARY="$build/libkolo.so" "$kolorun" -np 3 "$python" tests/python/adasum_test.py --cuda
  else
    skip "kolo.torch on CUDA tensors" "$python has no CUDA torch"
  fi
  if [ "$device" = cuda ] && [ -e "$build/nccl-dropin/libnccl.so.2" ] &&
     "$python" -c "import torch, torch.distributed as d; assert torch.cuda.is_available() and d.is_nccl_available()" 2>/dev/null; then
    step 150 "PyTorch's nccl backend on kolo's libnccl.so.2: collectives, DDP (tests/gpu/torch_nccl_check.py; kolorun --nccl, 2 ranks on one GPU)" \
      "$kolorun" --nccl -x MASTER_PORT=$((20000 + RANDOM % 10000)) -np 2 "$python" tests/gpu/torch_nccl_check.py
  else
    skip "PyTorch's nccl backend on kolo's libnccl.so.2" "no CUDA torch with NCCL, or no drop-in built"
  fi
  # nccl-tests (bundled from tools/nccl-tests-build.sh): NVIDIA's library, then kolo's, one
  # rank each; nccl-tests without MPI drives several ranks from one thread in one group,
  # which kolo's drop-in refuses, so 2 ranks on kolo's library are torch_nccl_check's.
  if [ "$device" = cuda ] && [ -x "$build/nccl-tests/all_reduce_perf" ]; then
    for t in all_reduce all_gather; do
      step 60 "nccl-tests ${t}_perf -g 1 on NVIDIA's libnccl.so.2" "$build/nccl-tests/${t}_perf" -b 8 -e 256M -f 4 -g 1
      step 60 "nccl-tests ${t}_perf -g 1 on kolo's libnccl.so.2 (kolorun --nccl)" \
        "$kolorun" --nccl -np 1 "$build/nccl-tests/${t}_perf" -b 8 -e 256M -f 4 -g 1
    done
  else
    skip "nccl-tests on NVIDIA's and kolo's libnccl.so.2" "not bundled (tools/nccl-tests-build.sh, NCCL_TESTS_DIR)"
  fi
  if [ "$device" = cuda ]; then
    step 60 "kolo-perf allreduce --backend nccl, one rank (NCCL's own path on this GPU)" \
      "$perf" allreduce --backend nccl -b 8 -e 256M -f 4 -c 1
  fi
  if [ -x "$build/bench/kernels/kolo_kernels_cuda_bench" ] && [ "$device" = cuda ]; then
    step 90 "kernel benchmark (kolo_kernels_cuda_bench)" "$build/bench/kernels/kolo_kernels_cuda_bench"
  fi
  gpus=0
  [ "$device" = cuda ] && gpus=$(nvidia-smi -L | grep -c GPU)
  if [ "$gpus" -ge 2 ]; then
    step 60 "kolorun -np $gpus kolo-perf allreduce --backend nccl (one rank per GPU)" \
      "$kolorun" -np "$gpus" "$perf" allreduce --backend nccl -b 8 -e 256M -f 4 -c 1
  fi
  echo; echo "## Summary ($((SECONDS - start)) s)"; echo; echo '```'
  awk -F'\t' '{ printf "%-7s %4ss  %-70.70s  %s\n", $1, $2, $4, $3 }' "$results"
  echo '```'
  echo "$(grep -c '^pass' "$results") passed, $(grep -c '^FAIL' "$results") failed, $(grep -c '^skipped' "$results") skipped"
} | tee "$out"
failed=$(grep -c '^FAIL' "$results")
rm -f "$results"
echo "gpu-check: wrote $out"
[ "$failed" -eq 0 ]
