#!/usr/bin/env bash
# Builds NVIDIA's nccl-tests (not part of kolo: fetch its source yourself, e.g.
# git clone https://github.com/NVIDIA/nccl-tests) against the CUDA toolkit's nccl.h, for
# the side-by-side step of tools/gpu-check.sh (NVIDIA's libnccl.so.2 and kolo's). Without
# MPI: one process, one GPU (-g 1). Hopper only, to keep the compile short.
#   tools/nccl-tests-build.sh SOURCE_DIR OUT_DIR      then: NCCL_TESTS_DIR=OUT_DIR tools/gpu-bundle.sh ...
set -euo pipefail
src=${1:?usage: nccl-tests-build.sh SOURCE_DIR OUT_DIR} out=${2:?usage: nccl-tests-build.sh SOURCE_DIR OUT_DIR}
cuda=${CUDA_HOME:-/usr/local/cuda}
[ -x "$cuda/bin/nvcc" ] || { echo "nccl-tests-build: no nvcc in $cuda/bin (set CUDA_HOME)" >&2; exit 1; }
[ -f "$src/src/all_reduce.cu" ] || { echo "nccl-tests-build: $src is not an nccl-tests checkout" >&2; exit 1; }
out=$(mkdir -p "$out" && cd "$out" && pwd)
make -C "$src/src" -j"$(nproc)" MPI=0 CUDA_HOME="$cuda" NCCL_HOME="$cuda" BUILDDIR="$out" \
  NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" "$out/all_reduce_perf" "$out/all_gather_perf" \
  "$out/sendrecv_perf"
ls -la "$out"/*_perf
