#!/usr/bin/env bash
# The whole test suite on a fresh machine: set-up, build, then every ctest label
# (unit, multiproc, fault, multihost; gpu tests skip without a GPU), then the unit tests
# and a multi-process sample under ASan+UBSan and under TSan, then every fuzz target for
# 20 s (tools/fuzz.sh runs 60 s by hand). CI runs exactly this.
#
# Each step is a phase with a budget in seconds (the table "Phase budgets" in
# tests/README.md, the one place they are set). At the end a table prints each phase's
# time against its budget, a warning for each phase past it, and the 20 slowest tests of
# each ctest run. The run fails when the total passes KOLO_CI_LIMIT_S (default 3000 s,
# 50 minutes), so the suite keeps CI's budget itself.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/ci_phases.sh
source tools/ci_phases.sh

phase setup            bash tools/setup.sh
phase build            bash tools/build.sh
phase ctest            ctest_logged default ctest --preset default -j2 --timeout 900
# The unit tests again, built with AddressSanitizer and UBSan (preset "asan": a UBSan report
# fails the test; leak checks are off, as the libraries kolo loads with dlopen leave
# allocations LSan reports from unknown modules; libkolo_opens_with_dlopen is left out, as the
# sanitizers' runtimes reach their thread-locals initial-exec and a sanitized library is only
# ever loaded with its runtime preloaded), and a sample of the multi-process suite
# (22 tests, one of each kind: collectives, split, p2p, mixed transports, tcp, shm, groups,
# compressed across hosts, the runtime, device collectives, faults, elastic shrink and
# rebuild; CMakePresets.json).
phase build-asan       sh -c 'cmake --preset asan >/dev/null && cmake --build --preset asan'
phase ctest-asan       ctest_logged asan ctest --preset asan
phase ctest-asan-mp    ctest_logged asan-multiproc ctest --preset asan-multiproc
# The same with ThreadSanitizer (preset "tsan", without UCX, whose memory hooks crash it):
# the unit tests but ThreadRanks.CompressedAllreduceThroughIpcKernels (5 thread ranks on
# 2 cores run past 15 minutes under TSan) and ThreadRanks.HostBarriersWorkForThreadsOfOneProcess
# (TSan reports a slot copied in by one thread-rank and read by another's reduce as racing
# through the host barrier's event, word and release chain; not understood yet, open in
# docs/device.md), nor the suites that start no thread (Verifier, PlannerAlgorithms,
# PlannerModel, LocalProgramVerify, Schedules: schedules and plans checked in one thread,
# where TSan has nothing to find; they ran 4 minutes under it. The default build and ASan
# run them), and the same multi-process sample but the fault test that times how fast ranks
# stop (TSan slows them past its limits).
phase build-tsan       sh -c 'cmake --preset tsan >/dev/null && cmake --build --preset tsan'
phase ctest-tsan       ctest_logged tsan ctest --preset tsan
phase ctest-tsan-mp    ctest_logged tsan-multiproc ctest --preset tsan-multiproc
# Every fuzz target for 20 s from its seed corpus (fuzz/README.md; clang, ASan, UBSan).
phase fuzz             bash tools/fuzz.sh --preset asan "${KOLO_CI_FUZZ_SECONDS:-20}"
