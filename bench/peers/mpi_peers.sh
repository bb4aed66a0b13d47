# shellcheck shell=bash disable=SC2034  # sets variables for the script that sources it
# Sourced by the comparison scripts (needs $build and $np): which MPIs this machine has and
# how to start them. Sets ompirun, mpichrun, mpich_bind and peers=(kolo [ompi] [mpich]),
# printing a note for each one skipped; note() is the scripts' way to say so.
note() { echo "# note: $*"; }
cores=$(nproc)
ompirun=$(command -v mpirun.openmpi || true)
[ -z "$ompirun" ] && [[ $(mpirun --version 2>/dev/null || true) == *"Open MPI"* ]] && ompirun=$(command -v mpirun)
mpichrun=$(command -v mpiexec.mpich || true)
mpich_bind=()
[ "$np" -le "$cores" ] && mpich_bind=(-bind-to core)
peers=(kolo)
if [ -x "$build/bench/peers/mpi_allreduce_perf" ] && [ -n "$ompirun" ]; then peers+=(ompi)
else note "Open MPI skipped (needs $build/bench/peers/mpi_allreduce_perf and mpirun.openmpi)"; fi
if [ -x "$build/bench/peers/mpich_allreduce_perf" ] && [ -n "$mpichrun" ]; then peers+=(mpich)
else note "MPICH skipped (needs libmpich-dev and mpich: $build/bench/peers/mpich_allreduce_perf, mpiexec.mpich)"; fi
