#!/usr/bin/env bash
# The staged device path's matrix (issue: device path true to CUDA): every collective on
# device buffers with the device_ipc path off (KOLO_DEVICE_IPC=0: everything staged through
# host memory), at 2, 3 and 5 ranks, from 8 B to 256 MB (factor 4), kolo-perf's default 20
# calls queued per size, results checked. On the emulated device unless KOLO_DEVICE says
# otherwise; with --hosts, the ranks on 2 test hosts (tools/testhosts.sh, root).
#   tools/staged-matrix.sh [--hosts] [build-dir] [rank counts...]   (default 2 3 5)
set -euo pipefail
cd "$(dirname "$0")/.."
hosts=0
if [ "${1:-}" = --hosts ]; then hosts=1; shift; fi
build=${1:-build}
shift $(( $# > 0 ? 1 : 0 ))
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(2 3 5)
export KOLO_DEVICE=${KOLO_DEVICE:-emulated} KOLO_DEVICE_IPC=0 KOLO_TIMEOUT=${KOLO_TIMEOUT:-120}
testhosts=$PWD/tools/testhosts.sh
if [ $hosts = 1 ]; then
  "$testhosts" --prefix kstm down
  "$testhosts" --prefix kstm up 2 --rate 2gbit
  trap '"$testhosts" --prefix kstm down' EXIT
fi
failed=0
for np in "${counts[@]}"; do
  for coll in allreduce allgather allgatherv broadcast reduce reduce_scatter alltoall sendrecv; do
    launch=("$build/tools/kolorun/kolorun" -np "$np")
    if [ $hosts = 1 ]; then  # ranks split over the two hosts, the first one taking the odd one
      launch=("$build/tools/kolorun/kolorun" --launcher "$testhosts exec {host}" -H "kstm-h0:$(((np + 1) / 2)),kstm-h1:$((np / 2))")
    fi
    start=$SECONDS
    if out=$("${launch[@]}" "$build/bench/perf/kolo-perf" "$coll" -G -b 8 -e 256M -f 4 -c 1 -r $((np - 1)) 2>&1) &&
       grep -q "# Out of bounds values : 0 OK" <<< "$out"; then
      echo "ok    $coll -np $np ($((SECONDS - start)) s)"
    else
      echo "FAIL  $coll -np $np ($((SECONDS - start)) s)"
      echo "$out" | tail -5 | sed 's/^/      /'
      failed=$((failed + 1))
    fi
  done
done
echo "$failed failed"
[ $failed = 0 ]
