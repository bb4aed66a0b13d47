#!/usr/bin/env bash
# A host added to a training job: kolo.torch.elastic's example on 3 test hosts, a 4th listed
# by the discovery script mid-training (tests/python/elastic_test.py, mode (d)).
#   elastic_torch_test.sh KOLORUN PYTHON PREFIX
set -euo pipefail
kolorun=$1 python=$2 prefix=$3
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
"$python" -c "import torch" 2>/dev/null || { echo "SKIP: $python cannot import torch"; exit "$SKIP"; }
hosts_up "$prefix" 4
root=$(cd "$(dirname "$0")/../.." && pwd)
# The ranks load torch and the example from the shared folders, and the commit file of
# the reference runs goes through /tmp, which the test hosts share. Bit for bit against
# the reference needs the same order of float sums in every run: one algorithm (the
# planner would choose by the network it measures, which varies between runs).
KOLO_ALGO=ring KOLO_NET_CALIBRATE=0 KOLO_TIMEOUT=30 "$python" "$root/tests/python/elastic_test.py" "$kolorun" "$python" "$root/examples" \
  --hosts "$prefix" "$LAUNCHER"
