#!/usr/bin/env bash
# The layering is enforced by the build (CMakeLists.txt: each layer compiles against a view
# holding only the layers cmake/layers.txt lets it include). Compiles one-line probes the
# way a layer's files are compiled: an include a layer may make must compile, one it may
# not make must fail with the compiler's "No such file or directory" (clang: "file not found"), which is printed.
#   tests/layering_build_test.sh CXX VIEWS_DIR
set -uo pipefail
cxx=$1 views=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
probe() {  # probe LAYER INCLUDE ok|refused
  local layer=$1 include=$2 want=$3 out
  printf '#include "%s"\n' "$include" >"$work/probe.cc"
  if out=$("$cxx" -std=c++20 -fsyntax-only -I"$views/$layer" "$work/probe.cc" 2>&1); then got=ok; else got=refused; fi
  if [ "$got" != "$want" ]; then
    echo "FAIL: layer $layer including \"$include\": $got, expected $want"; echo "$out" | sed -n 1,5p
    failures=$((failures + 1))
  elif [ "$want" = refused ]; then
    if ! grep -qE "No such file or directory|file not found" <<<"$out"; then  # gcc, clang
      echo "FAIL: layer $layer including \"$include\" failed for another reason:"; echo "$out" | sed -n 1,5p
      failures=$((failures + 1))
    else
      echo "refused as it should be: layer $layer: $(grep -m1 'fatal error' <<<"$out" | sed 's/.*fatal error/fatal error/')"
    fi
  fi
}
probe engine engine/collective.h ok
probe engine support/status.h ok
probe engine transport/link.h ok
probe api engine/communicator.h ok
probe engine api/api_support.h refused
probe transport engine/communicator.h refused
probe kernels transport/link.h refused
probe topology kernels/dtype.h refused
probe support kernels/dtype.h refused
[ "$failures" -eq 0 ] && echo "layering in the build: 9 probes as expected" || exit 1
