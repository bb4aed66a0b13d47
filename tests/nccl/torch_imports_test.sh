#!/usr/bin/env bash
# Every NCCL function PyTorch 2.x's libtorch_cuda imports, kolo's drop-in exports (else
# `import torch` fails to load on kolo's libnccl.so.2 with an undefined symbol, whatever the
# NVIDIA library it was built against): LIST (torch_nccl_imports.txt, derived from PyTorch's
# source) against `nm -D` of the library, each name a defined function (T or W).
# usage: torch_imports_test.sh KOLO_LIBNCCL LIST
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 KOLO_LIBNCCL LIST" >&2
  exit 2
fi
lib=$1 list=$2
# torch 2.11's libtorch_cuda imports 38 NCCL symbols: a shorter list would let the test pass
# on a library that lacks some of them.
min=38

[ -f "$lib" ] || { echo "FAIL: no library at $lib"; exit 1; }
[ -r "$list" ] || { echo "FAIL: cannot read the symbol list $list"; exit 1; }

# The names: '#' starts a comment, blank lines are skipped, the first word of a line is the name.
wanted=$(awk '{ sub(/#.*/, "") } NF { print $1 }' "$list" | sort -u)
count=$(awk 'NF' <<< "$wanted" | wc -l)
if [ "$count" -lt "$min" ]; then
  echo "FAIL: $list names $count symbols, fewer than the $min torch 2.11's libtorch_cuda imports"
  exit 1
fi

if ! table=$(nm -D --defined-only "$lib"); then
  echo "FAIL: nm -D could not read $lib"
  exit 1
fi
# Defined functions, global (T) or weak (W), any symbol version (name@VER) stripped.
exports=$(awk '$2 ~ /^[TW]$/ { sub(/@.*/, "", $3); print $3 }' <<< "$table" | sort -u)

missing=$(comm -23 <(printf '%s\n' "$wanted") <(printf '%s\n' "$exports"))
if [ -n "$missing" ]; then
  echo "FAIL: $(basename "$lib") lacks $(wc -l <<< "$missing") of the $count NCCL functions PyTorch imports ($lib):"
  echo "$missing" | sed 's/^/  /'
  exit 1
fi
echo "ok: $(basename "$lib") exports all $count NCCL functions PyTorch 2.x imports ($lib, list $list)"
