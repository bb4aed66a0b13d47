#!/usr/bin/env bash
# Every kolo-perf sub-command with 3 and 5 ranks: #wrong 0 everywhere and exit 0 (the
# issue's "done when"), plus JSON output.
set -euo pipefail
kolorun=$1 perf=$2
json=$(mktemp)
for np in 3 5; do
  for coll in allreduce allgather broadcast reduce reduce_scatter alltoall sendrecv; do
    echo "== $coll -np $np"
    out=$("$kolorun" -np "$np" "$perf" "$coll" -b 8 -e 4M -f 8 -n 3 -w 1 -c 1 -r $((np - 1)) --json "$json")
    echo "$out" | tail -4
    grep -q "# Out of bounds values : 0 OK" <<< "$out"
    grep -q '"wrong": 0' "$json"
  done
done
out=$("$kolorun" -np 3 "$perf" allreduce -b 1K -e 64K -f 4 -n 2 -d all -o all)
echo "$out" | tail -3
grep -q "# Out of bounds values : 0 OK" <<< "$out"
rm -f "$json"
