#!/usr/bin/env bash
# Builds the `fuzz` preset (clang, libFuzzer, ASan + UBSan) and runs every fuzz target of
# kolo for the given seconds each (default 60), one after the other, each from its seed
# corpus (fuzz/corpus/<target>/, topology/fixtures for the topology parsers). New inputs
# go to BUILD/fuzz-corpus/<target>/ (kept between runs), findings to BUILD/fuzz-artifacts/,
# each run's log to BUILD/fuzz-logs/<target>.log, BUILD being the preset's folder.
# Prints one line per target (runs, coverage, time); exits 1 if any target found a crash,
# a leak, a timeout or an out-of-memory, 2 when the build fails.
#
#   tools/fuzz.sh [--preset P] [seconds] [target...]   e.g. tools/fuzz.sh 600 store_protocol_fuzz
#   --preset asan       the targets from the asan preset's build (clang, ASan + UBSan, the same
#                       instrumentation), which CI has built anyway: one build less
#   KOLO_FUZZ_JOBS=N    build jobs (default 2)
set -uo pipefail
cd "$(dirname "$0")/.."

preset=fuzz
if [ "${1:-}" = "--preset" ]; then preset=${2:-}; shift 2 || true; fi
case "$preset" in fuzz|asan) ;; *) echo "usage: tools/fuzz.sh [--preset fuzz|asan] [seconds] [target...]" >&2; exit 2 ;; esac
build=build-$preset
seconds=${1:-60}
shift $(( $# > 0 ? 1 : 0 ))
case "$seconds" in ''|*[!0-9]*) echo "usage: tools/fuzz.sh [--preset fuzz|asan] [seconds] [target...]" >&2; exit 2 ;; esac

all=(store_protocol_fuzz tcp_link_fuzz shm_offer_fuzz shm_link_fuzz runtime_message_fuzz env_fuzz schedule_json_fuzz
     topo_json_fuzz topo_nccl_xml_fuzz)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")

if ! cmake --preset "$preset" >/dev/null; then echo "fuzz.sh: configuring the $preset preset failed" >&2; exit 2; fi
if ! cmake --build "$build" -j "${KOLO_FUZZ_JOBS:-2}" --target kolo_fuzzers >"$build/fuzz-build.log" 2>&1; then
  tail -n 30 "$build/fuzz-build.log" >&2
  echo "fuzz.sh: building the fuzz targets failed ($build/fuzz-build.log)" >&2
  exit 2
fi

# UBSan reports count as findings (by default it prints and goes on, unseen by libFuzzer).
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
mkdir -p "$build/fuzz-corpus" "$build/fuzz-artifacts" "$build/fuzz-logs"
failed=0
for t in "${targets[@]}"; do
  case "$t" in
    topo_*) binary=$build/topology/fuzz/$t; seeds=(fuzz/corpus/$t topology/fixtures) ;;
    *) binary=$build/fuzz/$t; seeds=(fuzz/corpus/$t) ;;
  esac
  if [ ! -x "$binary" ]; then echo "$t: no such fuzz target ($binary)" >&2; failed=1; continue; fi
  work=$build/fuzz-corpus/$t
  log=$build/fuzz-logs/$t.log
  mkdir -p "$work"
  start=$(date +%s)
  "$binary" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$build/fuzz-artifacts/$t-" "$work" "${seeds[@]}" >"$log" 2>&1
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  runs=$(sed -n 's/^Done \([0-9]*\) runs in.*/\1/p' "$log" | tail -n 1)
  [ -z "$runs" ] && runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -n 1)
  if [ $rc -eq 0 ]; then
    result=ok
  else
    failed=1
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    result="FAILED (exit $rc${artifact:+, input $artifact}; see $log)"
  fi
  printf '%-22s runs %-10s %-22s time %ss  %s\n' "$t" "${runs:-?}" "${cov:-cov: ?}" "$elapsed" "$result"
done
exit $failed
