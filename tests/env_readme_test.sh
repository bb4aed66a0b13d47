#!/usr/bin/env bash
# README.md's table of environment variables is `kolorun --help-env=markdown`, the table
# of support/env.cc, line for line (issue 34: the two had drifted apart).
#   tests/env_readme_test.sh BUILD_DIR SOURCE_DIR           check
#   tests/env_readme_test.sh BUILD_DIR SOURCE_DIR --write   rewrite README.md's table
# The table is the lines starting with '|' under "## Environment variables".
set -uo pipefail
build=${1:?usage: env_readme_test.sh BUILD_DIR SOURCE_DIR [--write]}
readme=${2:?usage: env_readme_test.sh BUILD_DIR SOURCE_DIR [--write]}/README.md
want=$(mktemp)
trap 'rm -f "$want"' EXIT
if ! "$build/tools/kolorun/kolorun" --help-env=markdown >"$want"; then
  echo "FAIL: kolorun --help-env=markdown failed"
  exit 1
fi
if [ "${3:-}" = --write ]; then
  awk -v table="$want" '
    /^## Environment variables/ { s = 1 }
    s && /^## / && !/^## Environment variables/ { s = 0 }
    s && /^\|/ { if (!done) { while ((getline line < table) > 0) print line; done = 1 } next }
    { print }' "$readme" >"$readme.new" && mv "$readme.new" "$readme"
  echo "rewrote the table in $readme"
  exit 0
fi
have=$(awk '/^## Environment variables/ { s = 1; next } s && /^## / { s = 0 } s && /^\|/' "$readme")
if diff -u <(echo "$have") "$want"; then
  echo "README.md's environment table is kolorun --help-env=markdown"
  exit 0
fi
echo "FAIL: README.md's environment table differs from support/env.cc's table (above: - README, + table)."
echo "Regenerate it: bash tests/env_readme_test.sh <build dir> <source dir> --write"
exit 1
