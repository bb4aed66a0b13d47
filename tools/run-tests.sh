#!/usr/bin/env bash
# The whole test suite on a fresh machine: set-up, build, then every ctest label
# (unit, multiproc, fault, multihost; gpu tests skip without a GPU), then the unit tests
# under ASan and UBSan. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bash tools/build.sh
ctest --preset default -j2 --timeout 900
# The unit tests again, built with AddressSanitizer and UBSan (preset "asan": a UBSan report
# fails the test; leak checks are off, as the libraries kolo loads with dlopen leave
# allocations LSan reports from unknown modules).
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan
