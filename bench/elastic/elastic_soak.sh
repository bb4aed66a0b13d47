#!/usr/bin/env bash
# Repeated faults in an elastic job: TRIALS runs of examples/elastic_cnn.py under
#   kolorun -H localhost:4 --min-np 2 --max-np 4 --host-discovery-script <file>
# each with a random worker SIGKILLed at a random batch of the first quarter; the discovery file lists 3 slots
# until the kill, then, after a random 0-2 s, 4 again, so that a new worker is added and
# let in at a later commit. Per trial: the exit status (124 = hung), whether rank 0's
# commits are every commit point once and in order (none lost), the final loss against a
# run without faults, and the time from the kill to the first step on the rebuilt world.
#   bench/elastic/elastic_soak.sh [build] [trials] [python]
set -u
build=${1:-build} trials=${2:-20} python=${3:-/usr/bin/python3}
root=$(cd "$(dirname "$0")/../.." && pwd)
kolorun=$build/tools/kolorun/kolorun
export PYTHONPATH=$root/api/python KOLO_LIBRARY=$build/libkolo.so KOLO_TIMEOUT=${KOLO_TIMEOUT:-30}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
epochs=16 per_epoch=12 every=4
args=(--epochs $epochs --batches-per-epoch $per_epoch --commit-every $every)
echo "localhost:4" >"$work/hosts"
timeout 300 "$kolorun" -np 4 "$python" "$root/examples/elastic_cnn.py" "${args[@]}" >"$work/ref.log" 2>&1
ref=$(sed -n 's/.*final loss=\([^ ]*\).*/\1/p' "$work/ref.log")
[ -n "$ref" ] || { cat "$work/ref.log"; echo "the run without faults failed"; exit 1; }
expected=$(seq $every $every $((epochs * per_epoch)) | tr '\n' ' ')
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores; KOLO_TIMEOUT=$KOLO_TIMEOUT"
echo "reference (no fault, 4 ranks): final loss $ref"
printf '%-5s %-6s %-6s %-6s %-5s %-8s %-7s %-12s %-9s %s\n' trial worker batch status hung commits joined final_loss vs_ref kill_to_step_s
hangs=0 lost=0 failed=0 joins=0 times=()
for t in $(seq 1 "$trials"); do
  worker=$((RANDOM % 4)) batch=$((1 + RANDOM % (epochs * per_epoch / 4)))
  delay=$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", (r % 200) / 100 }')
  echo "localhost:3" >"$work/hosts"
  log=$work/trial$t.log
  ELASTIC_CNN_DIE_WORKER=$worker ELASTIC_CNN_DIE_AT_BATCH=$batch timeout 300 "$kolorun" -H localhost:4 --min-np 2 --max-np 4 \
    --host-discovery-script "cat $work/hosts" "$python" "$root/examples/elastic_cnn.py" "${args[@]}" >"$log" 2>&1 &
  job=$!
  for _ in $(seq 1 3000); do grep -q "dying worker" "$log" && break; kill -0 $job 2>/dev/null || break; sleep 0.02; done
  sleep "$delay"
  echo "localhost:4" >"$work/hosts"
  wait $job
  rc=$?
  hung=no; [ $rc -eq 124 ] && { hung=yes; hangs=$((hangs + 1)); }
  got=$(sed -n 's/.*\] commit epoch=\([0-9]*\) batch=\([0-9]*\) .*/\1 \2/p' "$log" | awk -v n=$per_epoch '{ printf "%d ", $1 * n + $2 }')
  commits=ok; [ "$got" = "$expected" ] || { commits=LOST; lost=$((lost + 1)); }
  final=$(sed -n 's/.*final loss=\([^ ]*\).*/\1/p' "$log")
  died=$(sed -n 's/.*dying worker=.* at=\([0-9.]*\).*/\1/p' "$log")
  # The rebuild after the failure is epoch 1 (a later one lets the new worker in): its last
  # survivor's first step.
  first=$(sed -n 's/.*\] rebuilt epoch=1 .* at=\([0-9.]*\).*/\1/p' "$log" | sort -n | tail -1)
  took=$(awk -v a="$died" -v b="$first" 'BEGIN { if (a == "" || b == "") print "-"; else printf "%.2f", b - a }')
  [ "$took" != "-" ] && times+=("$took")
  vs=$(awk -v a="$final" -v b="$ref" 'BEGIN { if (a == "") print "-"; else printf "%.1e", (a > b ? a - b : b - a) }')
  [ $rc -eq 0 ] && [ -n "$final" ] || failed=$((failed + 1))
  joined=no; grep -q "\] joined epoch=" "$log" && { joined=yes; joins=$((joins + 1)); }
  printf '%-5s %-6s %-6s %-6s %-5s %-8s %-7s %-12s %-9s %s\n' "$t" "$worker" "$batch" "$rc" "$hung" "$commits" "$joined" "${final:--}" "$vs" "$took"
  [ $rc -eq 0 ] || tail -5 "$log"
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
n=${#times[@]}
echo "trials $trials: failed $failed, hangs $hangs, lost commits $lost, a new worker let in $joins; kill to first step on the rebuilt world (s):" \
     "min $(echo "$sorted" | head -1), median $(echo "$sorted" | sed -n "$(( (n + 1) / 2 ))p"), max $(echo "$sorted" | tail -1)"
[ $failed -eq 0 ] && [ $hangs -eq 0 ] && [ $lost -eq 0 ]
