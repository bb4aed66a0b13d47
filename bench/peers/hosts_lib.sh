# shellcheck shell=bash
# Sourced by the benchmarks across test hosts (tools/testhosts.sh): brings up HOSTS test
# hosts under PREFIX with links shaped to RATE, takes them down again at exit (with the
# temporary folder $tmp), and sets $list, kolorun's -H list with PER_HOST ranks each.
# The median of a space-separated list, for the scripts' awk summaries.
MEDIAN_AWK='function median(list,   n, a, i, j, x) {
  n = split(list, a, " ")
  for (i = 2; i <= n; ++i) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; --j) a[j + 1] = a[j]; a[j + 1] = x }
  return a[int((n + 1) / 2)]
}'

#   bench_hosts_up NAME PREFIX HOSTS PER_HOST RATE
bench_hosts_up() {
  local name=$1 i
  prefix=$2
  testhosts="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../../tools/testhosts.sh"
  tmp=$(mktemp -d)
  trap '"$testhosts" --prefix "$prefix" down >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
  "$testhosts" check >/dev/null || { echo "$name: cannot make test hosts here (needs root and ip netns)"; exit 1; }
  "$testhosts" --prefix "$prefix" down >/dev/null 2>&1 || true
  "$testhosts" --prefix "$prefix" up "$3" --rate "$5" >/dev/null
  list=
  for i in $(seq 0 $(($3 - 1))); do list+=${list:+,}$prefix-h$i:$4; done
}
