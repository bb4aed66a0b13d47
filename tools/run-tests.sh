#!/usr/bin/env bash
# The whole test suite on a fresh machine: set-up, build, then every ctest label
# (unit, multiproc, fault; gpu tests skip without a GPU). CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bash tools/build.sh
ctest --preset default -j2 --timeout 900
