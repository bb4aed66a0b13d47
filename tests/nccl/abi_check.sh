#!/usr/bin/env bash
# Every function NVIDIA's nccl.h declares (ncclX, and its profiling alias pncclX) must be
# exported by kolo's libnccl.so.2, so a program built against nccl.h loads on it.
#   abi_check.sh NCCL_H DROPIN_LIBRARY
set -uo pipefail
header=$1 library=$2
# Comments removed first (they mention names followed by parentheses too).
declared=$(perl -0777 -pe 's{/\*.*?\*/}{}gs; s{//[^\n]*}{}g' "$header" |
  grep -oE '\bp?nccl[A-Z][A-Za-z0-9_]*[[:space:]]*\(' | tr -d '( \t' | sort -u)
exported=$(nm -D --defined-only "$library" | awk '{print $3}' | sort -u)
[[ -n "$declared" ]] || { echo "FAIL: no nccl function found in $header"; exit 1; }
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
echo "$(wc -w <<<"$declared") functions declared in $header"
if [[ -n "$missing" ]]; then
  echo "FAIL: not exported by $library:"
  echo "$missing"
  exit 1
fi
# What else is exported: only the drop-in's marker is meant to be (listed, not failed).
extra=$(comm -13 <(echo "$declared") <(echo "$exported") | grep -v '^kolo_nccl_dropin$' || true)
[[ -z "$extra" ]] || { echo "note: also exported:"; echo "$extra"; }
echo "PASS: all exported"
