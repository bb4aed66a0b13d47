#!/usr/bin/env bash
# Installs what kolo needs to build and test on Debian/Ubuntu (run as root or with sudo).
# The CUDA toolkit is optional and not installed here: when nvcc is present (e.g. in
# /usr/local/cuda) the CUDA kernels are compiled too.
set -euo pipefail
packages=(cmake g++ make pkg-config libssl-dev libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
          libopenmpi-dev openmpi-bin libhwloc-dev libpugixml-dev libgloo-dev python3-torch iproute2
          mpich libmpich-dev libucx-dev clang libclang-rt-14-dev python3-pip python3-setuptools python3-venv ccache)
# Daemons whose packages may try to start them: installed on their own, and a failure there
# only skips the tests that need them (tests/cluster says why).
optional=(slurmctld slurmd slurm-client munge)
# MPICH is a peer of the benchmarks (bench/peers); Open MPI stays the default mpirun/mpicc
# (its alternatives priority is higher), which the tests use.
# clang and libclang-rt-14-dev build the fuzz targets (the `fuzz` preset, tools/fuzz.sh).
# ccache keeps compiled objects between builds (CMakeLists.txt uses it when present;
# KOLO_CCACHE=OFF turns it off).
# slurmctld, slurmd, slurm-client and munge run a real Slurm on test hosts (tests/cluster).
# Optional, not needed to build or test: graphviz (kolo-topo --png).
missing_of() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
mapfile -t missing < <(missing_of "${packages[@]}")
mapfile -t missing_optional < <(missing_of "${optional[@]}")
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
if [ ${#missing[@]} -gt 0 ] || [ ${#missing_optional[@]} -gt 0 ]; then
  $sudo_cmd apt-get update -qq
fi
if [ ${#missing[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ ${#missing_optional[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing_optional[@]}" ||
    echo "setup: could not install ${missing_optional[*]}: the cluster tests that need them are skipped"
fi
