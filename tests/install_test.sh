#!/usr/bin/env bash
# Installs kolo into a temporary prefix and builds a C program against it twice: with
# find_package(kolo) and with pkg-config. The program runs a one-rank allreduce.
set -euo pipefail
build=$1 source=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
mkdir "$tmp/consumer"
cat >"$tmp/consumer/main.c" <<'C'
#include <kolo/kolo.h>
#include <stdio.h>
int main(void) {
  kolo_comm_t comm;
  if (kolo_init(&comm) != KOLO_SUCCESS) { fprintf(stderr, "%s\n", kolo_last_error()); return 1; }
  float x = 2, y = 0;
  if (kolo_allreduce(&x, &y, 1, KOLO_FLOAT32, KOLO_SUM, comm, NULL) != KOLO_SUCCESS || y != 2) return 1;
  kolo_comm_destroy(comm);
  puts("consumer ok");
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
cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer/build" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/consumer/build/consumer"
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
cc "$tmp/consumer/main.c" $(pkg-config --cflags --libs kolo) -o "$tmp/consumer/with_pkgconfig"
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/consumer/with_pkgconfig"
# The Python package, installed under the library's directory, finds the library itself.
PYTHONPATH="$(echo "$tmp"/prefix/lib*/python3/dist-packages)" /usr/bin/python3 -c \
  'import kolo._capi as c; assert c.lib.kolo_version() > 0; print("python package ok")'
# The NCCL drop-in, installed in a folder of its own, finds the installed libkolo.
dropin=$(echo "$tmp"/prefix/lib*/kolo/nccl/libnccl.so.2)
# A here-string, not a pipe: grep -q stops reading early, and under pipefail ldd's broken
# pipe would fail the check.
grep -q "libkolo.so.0 => $tmp/prefix/" <<< "$(ldd "$dropin")" || { ldd "$dropin"; echo "drop-in does not find the installed libkolo"; exit 1; }
echo "nccl drop-in ok"
