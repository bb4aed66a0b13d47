#!/usr/bin/env bash
# kolo-perf on device memory (the emulated device): every sub-command with 3 and 5 ranks
# prints #wrong 0 and exits 0; the header names the device runtime and the path.
set -euo pipefail
kolorun=$1 perf=$2
export KOLO_DEVICE=emulated
for np in 3 5; do
  for coll in allreduce allgather allgatherv broadcast reduce reduce_scatter alltoall sendrecv; do
    echo "== $coll -np $np -G"
    out=$("$kolorun" -np "$np" "$perf" "$coll" -G -b 8 -e 1M -f 16 -n 2 -w 1 -c 1 -r $((np - 1)))
    echo "$out" | tail -3
    grep -q "# Out of bounds values : 0 OK" <<< "$out"
    grep -q "\[emulated\] device memory" <<< "$out"
  done
done
ok() { grep -q "# Out of bounds values : 0 OK" <<< "$1"; }  # a here-string: no pipe for grep -q to break
ok "$("$kolorun" -np 4 "$perf" allreduce -G -b 8 -e 64M -f 8 -n 2 -w 1 -c 1)"
# Staged (KOLO_DEVICE_IPC=0), large enough to go in chunks (strided pieces of every rank's block; 12 MB on 3 ranks:
# 3 chunks), out of place and in place.
for coll in allgather reduce_scatter alltoall; do
  echo "== $coll -np 3 -G, chunked"
  ok "$(KOLO_DEVICE_IPC=0 "$kolorun" -np 3 "$perf" "$coll" -G -b 12M -e 12M -n 1 -w 1 -c 1)"
done
# Many staged calls queued without a synchronize: 20 x 64 MB, 16 chunks each, put more on the
# stream than it holds (the emulated device blocks an enqueue past 1024 items, as CUDA
# does). The calls must wait for room before they take the call lock, which the host plans
# that release the stream need: this hung until KOLO_TIMEOUT before (and on a GPU).
echo "== allreduce -np 2 -G, staged, 20 calls of 64 MB queued"
start=$SECONDS
ok "$(KOLO_DEVICE_IPC=0 KOLO_TIMEOUT=30 "$kolorun" -np 2 "$perf" allreduce -G -b 64M -e 64M -n 20 -w 1 -c 1)"
[ $((SECONDS - start)) -lt 30 ] || { echo "staged calls took $((SECONDS - start)) s: a hold waited for its deadline"; exit 1; }
# Ranks as threads (-t), several in one process, through the device_ipc kernels.
for coll in allreduce reduce_scatter; do
  echo "== $coll -np 1 -t 3 -G"
  ok "$("$kolorun" -np 1 "$perf" "$coll" -G -t 3 -b 8 -e 16M -f 16 -n 2 -w 1 -c 1)"
done
# 8 thread-ranks, device_ipc's most: small sizes run as one kernel each (protocol flagged),
# every dtype and op of allreduce, and every other collective it has.
echo "== allreduce -np 1 -t 8 -G -d all -o all, small sizes"
ok "$("$kolorun" -np 1 "$perf" allreduce -G -t 8 -d all -o all -b 4 -e 64K -f 16 -n 2 -w 1 -c 1)"
for coll in broadcast reduce allgather reduce_scatter alltoall; do
  echo "== $coll -np 1 -t 8 -G, small sizes"
  ok "$("$kolorun" -np 1 "$perf" "$coll" -G -t 8 -b 8 -e 512K -f 8 -n 2 -w 1 -c 1 -r 7)"
done
# Compressed allreduce (--wire) as processes, 2 and 5 ranks, both algorithms (small sizes
# one-shot, large two-shot), sum and avg: every element within the documented bound.
for np in 2 5; do
  for wire in half bfloat16 f8e4m3 f8e5m2; do
    echo "== allreduce -np $np -G --wire $wire"
    out=$("$kolorun" -np "$np" "$perf" allreduce -G --wire "$wire" -o all -b 4 -e 6M -f 64 -n 1 -w 1 -c 1 2>&1 || true)
    echo "$out" | tail -3
    grep -q "# Out of bounds values : 0 OK" <<< "$out"
    grep -q "# wire: $wire" <<< "$out"
  done
done
# Registered buffers (--registered: kolo_mem_alloc, then kolo_mem_register), read in place
# by the peers: every collective x dtype x op, out of place and in place, as 2 and 5
# processes and as 3 threads. The plan log must show the zero-copy form ran (alltoall has
# none: it must run, from the slots). The one-kernel forms are off here
# (KOLO_DEVICE_FLAGGED=0): they take the small sizes, and these runs are about zero-copy.
for np in 2 5 1x3; do
  for coll in allreduce allgather allgatherv broadcast reduce reduce_scatter alltoall; do
    procs=${np%x*} threads=1
    [ "$np" != "$procs" ] && threads=${np#*x}
    echo "== $coll -np $procs -t $threads --registered"
    out=$(KOLO_DEVICE_FLAGGED=0 KOLO_DEBUG=INFO KOLO_DEBUG_SUBSYS=PLAN "$kolorun" -np "$procs" "$perf" "$coll" --registered -t "$threads" \
          -d all -o all -b 8 -e 4M -f 32 -n 1 -w 1 -c 1 -r $((procs * threads - 1)) 2>&1)
    echo "$out" | grep "Out of bounds"
    grep -q "# Out of bounds values : 0 OK" <<< "$out"
    grep -q "registered (read in place" <<< "$out"
    if [ "$coll" != alltoall ]; then grep -q "$coll of .*device_ipc .*protocol zero_copy"; fi <<< "$out"
  done
done
# The ring on device_ipc (KOLO_ALGO=ring: the model picks it only where neighbours' links
# are faster), every dtype x op, odd sizes down to fewer elements than ranks, two chunks.
for shape in 2x1 5x1 1x3; do
  echo "== allreduce -np ${shape%x*} -t ${shape#*x}, KOLO_ALGO=ring"
  out=$(KOLO_ALGO=ring KOLO_DEBUG=INFO KOLO_DEBUG_SUBSYS=PLAN "$kolorun" -np "${shape%x*}" "$perf" allreduce \
        -t "${shape#*x}" -G -d all -o all -b 4 -e 12M -f 24 -n 1 -w 1 -c 1 2>&1)
  grep -q "# Out of bounds values : 0 OK" <<< "$out"
  grep -q "allreduce of .*device_ipc ring" <<< "$out"
done
# Captured into a CUDA graph (--graph: the emulated device records and replays the
# stream's work), as processes and as threads, with and without registered buffers.
for shape in 3x1 1x3; do
  for reg in "" --registered; do
    for coll in allreduce allgather reduce_scatter broadcast; do
      echo "== $coll -np ${shape%x*} -t ${shape#*x} --graph $reg"
      # shellcheck disable=SC2086
      out=$("$kolorun" -np "${shape%x*}" "$perf" "$coll" -t "${shape#*x}" --graph $reg -b 8 -e 8M -f 64 -n 3 -w 1 -c 1 2>&1)
      grep -q "graph: 1" <<< "$out"
      grep -q "# Out of bounds values : 0 OK" <<< "$out"
    done
  done
done
# ... and refused where it does not apply.
if "$kolorun" -np 1 "$perf" allreduce -G --wire half -o max -n 1 2>/dev/null; then echo "--wire with max accepted"; exit 1; fi
echo "kolo-perf -G: every collective checked on the emulated device"
