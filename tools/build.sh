#!/usr/bin/env bash
# Configures and builds kolo with the default preset (CUDA kernels when nvcc is found).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset default >/dev/null
cmake --build --preset default
