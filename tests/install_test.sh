#!/usr/bin/env bash
# What a newcomer does with an installed kolo, with nothing set in the environment (no
# LD_LIBRARY_PATH, PYTHONPATH or KOLO_LIBRARY): install to a fresh prefix; build the
# README's C program with CMake (find_package) and with pkg-config and run both under the
# installed kolorun at 2 and 4 ranks; run the installed kolo-perf and kolo-plan; import
# kolo.torch from the package cmake installed (its folder is where the interpreter looks
# for the default prefix) and from a venv with `pip install api/python`; run both examples
# on the venv; the NCCL drop-in finds the installed libkolo, and kolorun --nccl finds it.
set -euo pipefail
build=$1 source=$2
python=${KOLO_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
step() { echo "== $*"; }
# A clean environment: only PATH (system folders) and HOME.
clean() { env -i PATH=/usr/bin:/bin HOME="$tmp" "$@"; }

step "cmake --install to a fresh prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
mkdir "$tmp/consumer"
cat >"$tmp/consumer/main.c" <<'C'
#include <kolo/kolo.h>
#include <stdio.h>
int main(void) {
  kolo_comm_t comm;
  if (kolo_init(&comm) != KOLO_SUCCESS) { fprintf(stderr, "%s\n", kolo_last_error()); return 1; }
  float x = 1, y = 0;
  if (kolo_allreduce(&x, &y, 1, KOLO_FLOAT32, KOLO_SUM, comm, NULL) != KOLO_SUCCESS) {
    fprintf(stderr, "%s\n", kolo_last_error());
    return 1;
  }
  if (y != (float)kolo_comm_size(comm)) { fprintf(stderr, "allreduce gave %g\n", y); return 1; }
  if (kolo_comm_rank(comm) == 0) printf("consumer ok on %d ranks\n", kolo_comm_size(comm));
  kolo_comm_destroy(comm);
  return 0;
}
C
cat >"$tmp/consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(kolo REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer kolo::kolo)
CM
step "the C program with find_package(kolo) and with pkg-config"
cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/consumer/build" >/dev/null
libdir=$(dirname "$(echo "$prefix"/lib*/pkgconfig/kolo.pc)")
cc "$tmp/consumer/main.c" $(PKG_CONFIG_PATH="$libdir" pkg-config --cflags --libs kolo) -o "$tmp/consumer/with_pkgconfig"
for program in "$tmp/consumer/build/consumer" "$tmp/consumer/with_pkgconfig"; do
  for np in 2 4; do
    clean "$prefix/bin/kolorun" -np $np "$program"
  done
done

step "the installed kolo-perf and kolo-plan"
clean "$prefix/bin/kolorun" -np 2 "$prefix/bin/kolo-perf" allreduce -b 8 -e 64K -f 8 -c 1 | tail -3
clean "$prefix/bin/kolo-plan" --fixture dgx_h100 --hosts 2 --coll allreduce | tail -2
if clean "$prefix/bin/kolo-plan" --fixture nope --coll allreduce 2>"$tmp/err"; then echo "FAIL: --fixture nope"; exit 1; fi
grep -q "dgx_h100" "$tmp/err" || { cat "$tmp/err"; echo "FAIL: --fixture nope does not list the fixtures"; exit 1; }

step "the Python package cmake installed, where the interpreter looks for the default prefix"
site=$(echo "$prefix"/lib/python3*/*-packages)
[ -f "$site/kolo/__init__.py" ] || { ls -R "$prefix/lib" | sed -n 1,30p; echo "FAIL: no kolo package under $prefix/lib/python3*"; exit 1; }
relative=${site#"$prefix"/}
# With the default prefix (/usr/local), that folder is on the interpreter's own path.
"$python" -c "import sys; assert '/usr/local/$relative' in sys.path, ('/usr/local/$relative', sys.path)"
# The installed package finds the installed library by itself (the folder as a site folder:
# what /usr/local's would be).
clean "$python" -c "import site; site.addsitedir('$site'); import kolo._capi as c, kolo.torch
assert c.lib._name.startswith('$prefix'), c.lib._name
print('installed package ok:', c.lib._name)"

step "pip install api/python into a venv (libkolo carried inside), kolo.torch imported there"
"$python" -m venv --system-site-packages --without-pip "$tmp/venv"
clean KOLO_LIBRARY="$(echo "$libdir"/../libkolo.so.0)" "$tmp/venv/bin/python" -m pip install -q --no-build-isolation \
  --no-index "$source/api/python" >/dev/null
(cd "$tmp" && clean "$tmp/venv/bin/python" -c "import kolo._capi as c, kolo.torch
assert c.lib._name.startswith('$tmp/venv'), c.lib._name
print('venv package ok:', c.lib._name)")

step "both examples on the venv, under the installed kolorun"
(cd "$tmp" && clean "$prefix/bin/kolorun" -np 2 "$tmp/venv/bin/python" "$source/examples/pytorch_horovod.py" --steps 3 | tail -2)
(cd "$tmp" && clean "$prefix/bin/kolorun" -np 2 "$tmp/venv/bin/python" "$source/examples/pytorch_ddp.py" --steps 3 | tail -2)

step "the NCCL drop-in finds the installed libkolo; kolorun --nccl finds the drop-in"
dropin=$(find "$prefix" -path "*/kolo/nccl/libnccl.so.2" | sed -n 1p)
if [ -n "$dropin" ]; then
  # A here-string, not a pipe: grep -q stops reading early, and under pipefail ldd's broken
  # pipe would fail the check.
  grep -q "libkolo.so.0 => $prefix/" <<< "$(ldd "$dropin")" || { ldd "$dropin"; echo "FAIL: drop-in does not find the installed libkolo"; exit 1; }
  preload=$(clean "$prefix/bin/kolorun" --nccl --no-prefix -np 1 /bin/sh -c 'echo "$LD_PRELOAD"')
  [ "$(readlink -f "$preload")" = "$(readlink -f "$dropin")" ] || { echo "FAIL: kolorun --nccl preloads '$preload', not $dropin"; exit 1; }
  echo "nccl drop-in ok: $dropin"
else
  echo "(no NCCL drop-in built: no nccl.h at build time)"
fi
echo "install test passed"
