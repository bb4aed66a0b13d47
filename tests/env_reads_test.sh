#!/usr/bin/env bash
# Every KOLO_* variable kolo reads goes through the table of support/env.cc, so that
# `kolorun --help-env` lists it and a communicator's init checks its value (issue 34):
#   1. no C/C++ source outside support/env.cc calls getenv("KOLO_...") (tests/ and build
#      trees aside); a program that cannot link kolo's internals (a peer's benchmark, a
#      program on the public API alone) marks the line `env-table: exempt` and says why
#      above it;
#   2. every KOLO_* variable the Python package or the examples read (os.environ,
#      os.getenv) is in the table too.
#   tests/env_reads_test.sh SOURCE_DIR
set -uo pipefail
cd "${1:?usage: env_reads_test.sh SOURCE_DIR}" || exit 2
status=0

hits=$(grep -rn --include='*.c' --include='*.cc' --include='*.cpp' --include='*.cu' --include='*.h' \
         --include='*.hpp' --include='*.cuh' --exclude-dir=tests --exclude-dir='build*' --exclude-dir=.git \
         'getenv("KOLO_' . | grep -v '^\./support/env\.cc:' | grep -v 'env-table: exempt')
if [ -n "$hits" ]; then
  echo "FAIL: KOLO_* read with getenv, not through support/env.h (env_string, env_int, ...):"
  echo "$hits"
  status=1
fi

python_names=$(grep -rhoE --include='*.py' --exclude-dir=build \
                 '(environ\.get\(|environ\[|getenv\()"KOLO_[A-Z0-9_]+' api/python examples |
               grep -oE 'KOLO_[A-Z0-9_]+' | sort -u)
for name in $python_names; do
  if ! grep -q "\"$name\"" support/env.cc; then
    echo "FAIL: $name is read by Python (api/python, examples) but is not in support/env.cc's table"
    status=1
  fi
done

[ $status = 0 ] && echo "every KOLO_* read goes through the table ($(wc -w <<<"$python_names") read by Python too)"
exit $status
