#!/usr/bin/env bash
# Every function NVIDIA's libnccl.so.2 exports, kolo's drop-in exports too (a program or
# library linked against NVIDIA's, PyTorch's libtorch_cuda among them, must load on
# kolo's): the public nccl*/pncl* names of `nm -D`, C++ internals left aside.
# usage: exports_test.sh KOLO_LIBNCCL NVIDIA_LIBNCCL
set -euo pipefail
kolo=$1 nvidia=$2
exports() { nm -D --defined-only "$1" | awk '$2 ~ /^[TtWiV]$/ && $3 ~ /^p?nccl/ { print $3 }' | sort -u; }
missing=$(comm -23 <(exports "$nvidia") <(exports "$kolo"))
if [ -n "$missing" ]; then
  echo "FAIL: kolo's $(basename "$kolo") lacks $(wc -l <<< "$missing") of NVIDIA's exports ($nvidia):"
  echo "$missing" | sed 's/^/  /'
  exit 1
fi
echo "ok: kolo exports all $(exports "$nvidia" | wc -l) nccl functions NVIDIA's library does ($nvidia)"
