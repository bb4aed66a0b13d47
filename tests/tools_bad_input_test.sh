#!/usr/bin/env bash
# Bad flags, missing files and unreadable paths for every command-line tool (kolorun,
# kolo-perf, kolo-topo, kolo-plan): each must exit non-zero with a message, never crash
# (no signal: exit status below 128, but 127 for a program kolorun cannot find) and never
# hang (20 s each); and --help answers with exit 0. Usage: tools_bad_input_test.sh BUILD_DIR
set -u
build=${1:?usage: tools_bad_input_test.sh BUILD_DIR}
kolorun=$build/tools/kolorun/kolorun perf=$build/bench/perf/kolo-perf
topo=$build/tools/kolo_topo/kolo-topo plan=$build/tools/kolo_plan/kolo-plan
trace=$build/tools/kolo_trace/kolo-trace
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/unreadable" && chmod 000 "$dir/unreadable"  # (root reads it anyway: used where that does not matter)
printf 'not json' >"$dir/garbage.json"
failures=0 cases=0
# bad EXPECTED_TEXT COMMAND...: fails cleanly and says EXPECTED_TEXT (a regex).
bad() {
  local want=$1 rc
  shift
  cases=$((cases + 1))
  timeout 20 "$@" </dev/null >"$dir/out" 2>&1
  rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || { [ "$rc" -ge 128 ] && [ "$rc" -ne 127 ]; }; then
    echo "FAIL (exit $rc): $*"; head -5 "$dir/out"; failures=$((failures + 1))
  elif ! grep -qE -- "$want" "$dir/out"; then
    echo "FAIL (no '$want' in the message): $*"; head -5 "$dir/out"; failures=$((failures + 1))
  fi
}
# kolorun
bad "no program" "$kolorun"
bad "needs a value" "$kolorun" -np
bad "not a number of ranks" "$kolorun" -np x true
bad "not a number of ranks" "$kolorun" -np 0 true
bad "not a number of ranks" "$kolorun" -np 100000 true
bad "unknown option" "$kolorun" --bogus true
bad "cannot find program" "$kolorun" -np 2 "$dir/missing-program"
bad "is a directory" "$kolorun" -np 2 "$dir/unreadable"
printf '#!/bin/sh\n' >"$dir/not-executable"
bad "not executable" "$kolorun" -np 1 "$dir/not-executable"
bad "empty host name" "$kolorun" -H :2 true
bad "bad slot count" "$kolorun" -H h0:x true
bad "not a positive number" "$kolorun" --timeout -5 -np 1 true
# kolo-perf
bad "missing collective" "$perf"
bad "unknown collective" "$perf" bogus
bad "missing value" "$perf" allreduce -b
bad "bad size" "$perf" allreduce -b 1X
bad "at least -b" "$perf" allreduce -e 1 -b 10
bad "unknown datatype" "$perf" allreduce -d nope
bad "unknown op" "$perf" allreduce -o nope
bad "-n takes 1 to" "$perf" allreduce -n -1
bad "-a takes 0 to 3" "$perf" allreduce -a 5
bad "-a takes 0 to 3" "$perf" allreduce -a -1
bad "-w takes 0 to" "$perf" allreduce -w -2
bad "-c takes 0 to 1" "$perf" allreduce -c 7
bad "KOLO_DEVICE=emulated" env KOLO_DEVICE=none "$perf" allreduce -G -b 8 -e 8
bad "greater than 1" "$perf" allreduce -f 0.5
bad "threads" "$perf" allreduce -t 0
bad "out of range" "$perf" broadcast -r 99 -b 8 -e 8
bad "cannot write" "$perf" allreduce --json "$dir/missing/x.json" -b 8 -e 8
bad "cannot write" "$perf" allreduce --json "$dir/garbage.json/x.json" -b 8 -e 8  # under a file
bad "--wire" "$perf" alltoall --wire half
bad "--wire" "$perf" allreduce --wire int8
# kolo-topo
bad "cannot open" "$topo" --file "$dir/missing.json"
bad "malformed|cannot" "$topo" --file "$dir/garbage.json"
bad "malformed|cannot|directory" "$topo" --file "$dir"
bad "unknown argument" "$topo" --bogus
bad "needs a value" "$topo" --file
bad "cannot|write|open" "$topo" --quiet --json "$dir/missing/x.json"
# kolo-plan
bad "the fixtures are:.*dgx_h100" "$plan" --fixture nope
bad "positive number" "$plan" --hosts 0
bad "positive number" "$plan" --hosts x
bad "--memory 'gpu': give host or device" "$plan" --memory gpu
bad "unknown collective" "$plan" --coll nope
bad "--min-bytes is above --max-bytes" "$plan" --min-bytes 10 --max-bytes 1
bad "needs an algorithm" "$plan" --dump nope --bytes 8
bad "malformed" "$plan" --file "$dir/garbage.json"
bad "unknown argument" "$plan" --bogus
bad "positive number" "$plan" --chunk 0
# kolo-trace
bad "usage" "$trace"
bad "usage" "$trace" a b
bad "cannot open the folder" "$trace" "$dir/missing-folder"
mkdir "$dir/dumps" && cp "$dir/garbage.json" "$dir/dumps/kolo-trace.x.rank0.json"
bad "not JSON, or cut short" "$trace" "$dir/dumps"
printf '{"format": "kolo-flight-recorder", "version": 1, "comm": "c", "rank": 5, "size": 2, "calls": []}' >"$dir/dumps/kolo-trace.x.rank0.json"
bad "out of range" "$trace" "$dir/dumps"
printf '{"format": "kolo-flight-recorder", "version": 1, "comm": "c", "rank": 0, "size": 2, "calls": [{"seq": "x"}]}' >"$dir/dumps/kolo-trace.x.rank0.json"
bad "missing or of the wrong type" "$trace" "$dir/dumps"
# --help answers on stdout with exit 0, for every tool.
for tool in "$kolorun" "$perf" "$topo" "$plan" "$trace"; do
  cases=$((cases + 1))
  if ! timeout 20 "$tool" --help >"$dir/out" 2>&1 || ! grep -qi "usage" "$dir/out"; then
    echo "FAIL: $tool --help (exit $?)"; head -3 "$dir/out"; failures=$((failures + 1))
  fi
done
echo "$cases cases, $failures failed"
[ "$failures" -eq 0 ]
