#!/usr/bin/env bash
# Checks every `#include "..."` of kolo's layers against the layering of cmake/layers.txt
# ("Layers and folders"):   api -> engine -> {transport, topology, kernels} -> support,
# and "a generic layer never includes one of its own backends" (backends register in a
# table, in the few files allowed below).
#
#   tools/check_layering.sh [REPO_ROOT]   check the tree (default: this script's ../)
#   tools/check_layering.sh --self-test   prove on a fake tree that the check can fail
#
# Prints one `file:line: includes X (...)` per violation and exits 1, else prints a
# one-line summary and exits 0. Only bash, find and POSIX awk (mawk): CI's python may
# lack packages. System includes (<...>) and quoted paths that do not start with a layer
# name ("gtest/...", "perf_data.h") are ignored; bench/ tools/ tests/ may include anything.
set -euo pipefail

# --- The rules. Edit these, not the code below. -------------------------------------

# The layers, and the layers each may include (itself first): cmake/layers.txt, which the
# build reads too (each layer compiles against a view holding only those).
RULES_FILE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/cmake/layers.txt
LAYERS=""
declare -A MAY_INCLUDE=()
while IFS=: read -r layer deps; do
  [[ "$layer" =~ ^[a-z]+$ ]] || continue
  LAYERS+="${LAYERS:+ }$layer"
  MAY_INCLUDE[$layer]=$(echo $deps)
done <"$RULES_FILE"

# The public C API header lives at api/include/kolo/ and every target has api/include on
# its include path, so "kolo/..." is the api layer too.
INCLUDE_ALIASES="kolo/=api/include/kolo/"

# The files that register transports in the table of transports: the only files outside
# a transport backend that may include that backend's headers. Rename here when they move.
ALLOWED_BACKEND_INCLUDERS="transport/transports.cc"

# Backends: one rule per line, four fields separated by ';':
#   name ; backend (ERE on the included path; what it matches names one backend, and
#   a file that matches it with the same text is inside that backend) ; not a backend
#   (ERE, empty for none) ; who else may include it (exact files, or folders ending '/').
BACKEND_RULES="
transport backend;^transport/[^/]+/;^transport/(bootstrap|ipc)/;$ALLOWED_BACKEND_INCLUDERS
device runtime backend;^support/device/(cuda|emulated);;support/device/
"

# --- The check. ----------------------------------------------------------------------

check_tree() {
  local root=$1
  local dirs=() layer
  for layer in $LAYERS; do
    [[ -d "$root/$layer" ]] && dirs+=("$layer")
  done
  if [[ ${#dirs[@]} -eq 0 ]]; then
    echo "check_layering: no layer folder ($LAYERS) under $root" >&2
    return 2
  fi
  local may=""
  for layer in $LAYERS; do
    may+="$layer=${MAY_INCLUDE[$layer]}"$'\n'
  done

  # Paths relative to the root, sorted, so the report reads the same on every machine.
  (cd "$root" && find "${dirs[@]}" -type f \
      \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) -print |
    LC_ALL=C sort |
    KL_LAYERS="$LAYERS" KL_MAY="$may" KL_ALIASES="$INCLUDE_ALIASES" \
    KL_BACKENDS="$BACKEND_RULES" awk '
      function layer_of(path,   top) {
        top = path; sub(/\/.*/, "", top)
        return (top in is_layer && path ~ /\//) ? top : ""
      }
      # The backend a path belongs to (the text rule r matched), or "".
      function backend_of(path, r) {
        if (bk_not[r] != "" && path ~ bk_not[r]) return ""
        if (!match(path, bk_re[r])) return ""
        return substr(path, RSTART, RLENGTH)
      }
      function allowed_for(file, r,   n, i, a) {
        n = split(bk_allowed[r], a, " ")
        for (i = 1; i <= n; i++) {
          if (a[i] ~ /\/$/) { if (index(file, a[i]) == 1) return 1 }
          else if (file == a[i]) return 1
        }
        return 0
      }
      BEGIN {
        n = split(ENVIRON["KL_LAYERS"], l, " ")
        for (i = 1; i <= n; i++) is_layer[l[i]] = 1
        n = split(ENVIRON["KL_MAY"], lines, "\n")
        for (i = 1; i <= n; i++) {
          if (lines[i] == "") continue
          eq = index(lines[i], "=")
          from = substr(lines[i], 1, eq - 1)
          m = split(substr(lines[i], eq + 1), targets, " ")
          for (j = 1; j <= m; j++) may[from, targets[j]] = 1
        }
        n_alias = split(ENVIRON["KL_ALIASES"], al, " ")
        for (i = 1; i <= n_alias; i++) {
          eq = index(al[i], "=")
          alias_from[i] = substr(al[i], 1, eq - 1)
          alias_to[i] = substr(al[i], eq + 1)
        }
        n_bk = 0
        n = split(ENVIRON["KL_BACKENDS"], lines, "\n")
        for (i = 1; i <= n; i++) {
          if (lines[i] ~ /^[ \t]*$/) continue
          split(lines[i], f, ";")
          n_bk++
          bk_name[n_bk] = f[1]; bk_re[n_bk] = f[2]; bk_not[n_bk] = f[3]
          bk_allowed[n_bk] = f[4]
        }
        while ((getline file) > 0) {
          n_files++
          from = layer_of(file)
          line_no = 0
          while ((getline text < file) > 0) {
            line_no++
            # Forms that would go around the layer views of the build: a project header in
            # <...>, or a path climbing out with "..".
            if (text ~ /^[ \t]*#[ \t]*include[ \t]*</) {
              inc = text
              sub(/^[ \t]*#[ \t]*include[ \t]*</, "", inc)
              sub(/>.*/, "", inc)
              for (i = 1; i <= n_alias; i++) {
                if (index(inc, alias_from[i]) == 1) inc = alias_to[i] substr(inc, length(alias_from[i]) + 1)
              }
              if (layer_of(inc) != "") {
                printf "%s:%d: includes <%s> (a project header: use quotes, so the build checks the layering)\n", \
                       file, line_no, inc
                n_bad++
              }
              continue
            }
            if (text !~ /^[ \t]*#[ \t]*include[ \t]*"/) continue
            if (text ~ /"(\.\.\/|[^"]*\/\.\.\/)/) {
              inc = text
              sub(/^[ \t]*#[ \t]*include[ \t]*"/, "", inc)
              sub(/".*/, "", inc)
              printf "%s:%d: includes %s (a relative path with \"..\": name the header from the root of the tree)\n", \
                     file, line_no, inc
              n_bad++
              continue
            }
            inc = text
            sub(/^[ \t]*#[ \t]*include[ \t]*"/, "", inc)
            sub(/".*/, "", inc)
            shown = inc
            for (i = 1; i <= n_alias; i++) {
              if (index(inc, alias_from[i]) == 1) {
                inc = alias_to[i] substr(inc, length(alias_from[i]) + 1)
              }
            }
            to = layer_of(inc)
            if (to == "") continue
            n_includes++
            if (!((from, to) in may)) {
              printf "%s:%d: includes %s (layer %s may not include layer %s)\n", \
                     file, line_no, shown, from, to
              n_bad++
              continue
            }
            for (r = 1; r <= n_bk; r++) {
              b = backend_of(inc, r)
              if (b == "" || backend_of(file, r) == b || allowed_for(file, r)) continue
              printf "%s:%d: includes %s (%s may not include %s %s; only its own files and %s may)\n", \
                     file, line_no, shown, from, bk_name[r], b, bk_allowed[r]
              n_bad++
            }
          }
          close(file)
        }
        if (n_bad > 0) {
          printf "layering: %d violation(s) in %d files (rules: tools/check_layering.sh)\n", \
                 n_bad, n_files
          exit 1
        }
        printf "layering: OK, %d project includes in %d files follow the layering\n", \
               n_includes, n_files
      }')
}

# --- Self-test: a fake tree with known violations must fail with exactly those. ------

write_file() {  # write_file ROOT PATH LINE...
  local root=$1 path=$2
  shift 2
  mkdir -p "$(dirname "$root/$path")"
  printf '%s\n' "$@" > "$root/$path"
}

self_test() {
  local script
  script=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
  SELF_TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/kolo-layering.XXXXXX")
  trap 'rm -rf "$SELF_TEST_TMP"' EXIT
  local tmp=$SELF_TEST_TMP

  # A clean tree: every rule's allowed side, including the registration file.
  local clean=$tmp/clean
  write_file "$clean" support/status.h '#pragma once' '#include <string>'
  write_file "$clean" support/device/device.h '#include "support/status.h"'
  write_file "$clean" support/device/cuda/cuda_ops.cc \
    '#include "support/device/cuda/cuda_ops.h"' '#include "support/device/device.h"'
  write_file "$clean" support/device/cuda/cuda_ops.h '#include "support/status.h"'
  write_file "$clean" support/device/registry.cc '#include "support/device/cuda/cuda_ops.h"'
  write_file "$clean" kernels/k.h '#include "support/status.h"' '#include "kernels/k2.h"'
  write_file "$clean" kernels/cuda/k.cu '#include "kernels/k.h"'
  write_file "$clean" topology/graph.h '#include "support/status.h"'
  write_file "$clean" transport/link.h '#include "support/status.h"'
  write_file "$clean" transport/bootstrap/store.h '#include "transport/link.h"'
  write_file "$clean" transport/shm/shm_domain.h \
    '#include "transport/link.h"' '#include "transport/bootstrap/store.h"' \
    '#include "transport/shm/shm_layout.h"' '#include "support/status.h"'
  write_file "$clean" transport/fabric.h '#include "transport/link.h"' '#include "transport/bootstrap/store.h"'
  write_file "$clean" engine/z.h '#include "transport/fabric.h"' '#include "topology/graph.h"' \
    '#include "kernels/k.h"' '#include "gtest/gtest.h"' '#include <vector>'
  write_file "$clean" transport/transports.cc '#include "transport/shm/shm_domain.h"' '#include "transport/fabric.h"'
  write_file "$clean" api/c.cc '#include "kolo/kolo.h"' '#include "engine/z.h"'
  write_file "$clean" tests/t.cc '#include "transport/shm/shm_domain.h"' '#include "api/c.h"'

  # The same tree plus one file per rule that breaks it.
  local bad=$tmp/bad
  cp -R "$clean" "$bad"
  write_file "$bad" engine/x.cc '#include <memory>' '' '#include "transport/shm/shm_domain.h"'
  write_file "$bad" support/y.h '#include "support/status.h"' '#include "engine/z.h"'
  write_file "$bad" transport/fabric.cc '#include "transport/fabric.h"' ' #  include "transport/tcp/tcp_link.h"'
  write_file "$bad" transport/tcp/tcp_link.h '#include "transport/shm/shm_domain.h"'
  write_file "$bad" topology/t.cc '#include "transport/socket.h"'
  write_file "$bad" engine/e.h '#include "kolo/kolo.h"'
  write_file "$bad" kernels/d.cc '#include "support/device/emulated_ops.h"'
  write_file "$bad" engine/angle.cc '#include <transport/fabric.h>'
  write_file "$bad" engine/up.cc '#include "../api/c.h"'

  local expected actual rc=0 failed=0
  expected="engine/angle.cc:1: includes <transport/fabric.h> (a project header: use quotes, so the build checks the layering)
engine/e.h:1: includes kolo/kolo.h (layer engine may not include layer api)
engine/x.cc:3: includes transport/shm/shm_domain.h (engine may not include transport backend transport/shm/; only its own files and $ALLOWED_BACKEND_INCLUDERS may)
kernels/d.cc:1: includes support/device/emulated_ops.h (kernels may not include device runtime backend support/device/emulated; only its own files and support/device/ may)
support/y.h:2: includes engine/z.h (layer support may not include layer engine)
topology/t.cc:1: includes transport/socket.h (layer topology may not include layer transport)
transport/fabric.cc:2: includes transport/tcp/tcp_link.h (transport may not include transport backend transport/tcp/; only its own files and $ALLOWED_BACKEND_INCLUDERS may)
transport/tcp/tcp_link.h:1: includes transport/shm/shm_domain.h (transport may not include transport backend transport/shm/; only its own files and $ALLOWED_BACKEND_INCLUDERS may)"
  expected=$(printf '%s\n' "$expected" | sed '/^engine\/x.cc/i engine/up.cc:1: includes ../api/c.h (a relative path with ".."\x3a name the header from the root of the tree)' )

  actual=$(bash "$script" "$bad") || rc=$?
  if [[ $rc -ne 1 ]]; then
    echo "self-test: FAIL: a tree with violations exited $rc, not 1"; failed=1
  fi
  if [[ "$(grep -v '^layering:' <<<"$actual")" != "$expected" ]]; then
    echo "self-test: FAIL: wrong violations reported"
    diff <(echo "$expected") <(grep -v '^layering:' <<<"$actual") || true
    failed=1
  fi
  rc=0
  actual=$(bash "$script" "$clean") || rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "self-test: FAIL: a clean tree exited $rc, not 0:"; echo "$actual"; failed=1
  fi
  if [[ $failed -ne 0 ]]; then return 1; fi
  echo "self-test: OK (9 planted violations reported exactly, clean tree passes)"
}

if [[ "${1:-}" == "--self-test" ]]; then
  self_test
  exit $?
fi
ROOT=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
check_tree "$ROOT"
