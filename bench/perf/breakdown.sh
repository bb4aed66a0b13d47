#!/usr/bin/env bash
# Where a small host allreduce's time goes, phase by phase (issue 52): builds kolo with the
# breakdown probes (-DKOLO_BREAKDOWN=ON, support/probe.h) in a folder of its own and runs
# bench/perf/kolo_breakdown on 2 ranks: each phase's median and p99, the whole call, and the
# floor (the same exchange without kolo). A plain build's kolo_breakdown gives the last two.
#   bench/perf/breakdown.sh [BUILD_DIR (default build-breakdown)] [kolo_breakdown flags: -b 8 -n 20000]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-breakdown}
shift || true
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKOLO_ENABLE_CUDA=OFF -DKOLO_BREAKDOWN=ON \
      -DKOLO_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target kolo_breakdown kolorun -j "$(nproc)" >/dev/null
echo "# CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; shared-memory copy rate: $(KOLO_DEBUG=INFO KOLO_DEBUG_SUBSYS=TRANSPORT "$build/tools/kolorun/kolorun" -np 2 --no-prefix --no-trace "$build/bench/perf/kolo_breakdown" -n 10 -w 0 2>&1 | grep -oiE "[0-9.]+ GB/s" | head -n 1)"
"$build/tools/kolorun/kolorun" -np 2 --no-prefix --no-trace "$build/bench/perf/kolo_breakdown" "$@"
