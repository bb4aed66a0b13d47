#!/usr/bin/env bash
# The whole test suite on a fresh machine: set-up, build, then every ctest label
# (unit, multiproc, fault, multihost; gpu tests skip without a GPU), then the unit tests
# and a multi-process sample under ASan+UBSan and under TSan, then every fuzz target for
# 60 s. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bash tools/build.sh
ctest --preset default -j2 --timeout 900
# The unit tests again, built with AddressSanitizer and UBSan (preset "asan": a UBSan report
# fails the test; leak checks are off, as the libraries kolo loads with dlopen leave
# allocations LSan reports from unknown modules), and a sample of the multi-process suite
# (22 tests, one of each kind: collectives, split, p2p, mixed transports, tcp, shm, groups,
# compressed across hosts, the runtime, device collectives, faults, elastic shrink and
# rebuild; CMakePresets.json).
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan
ctest --preset asan-multiproc
# The same with ThreadSanitizer (preset "tsan", without UCX, whose memory hooks crash it):
# the unit tests but ThreadRanks.CompressedAllreduceThroughIpcKernels (5 thread ranks on
# 2 cores run past 15 minutes under TSan) and ThreadRanks.HostBarriersWorkForThreadsOfOneProcess
# (TSan reports a slot copied in by one thread-rank and read by another's reduce as racing
# through the host barrier's event, word and release chain; not understood yet, open in
# docs/device.md), and the same multi-process sample but the fault test that times how
# fast ranks stop (TSan slows them past its limits).
cmake --preset tsan >/dev/null
cmake --build --preset tsan
ctest --preset tsan
ctest --preset tsan-multiproc
# Every fuzz target for 60 s from its seed corpus (fuzz/README.md; clang, ASan, UBSan).
bash tools/fuzz.sh 60
