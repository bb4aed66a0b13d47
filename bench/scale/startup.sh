#!/usr/bin/env bash
# Start-up at scale: for each rank count, one job of kolo-startup-probe (startup_probe.cc)
# under kolorun, on this host or across test hosts, and its figures as JSON lines plus a
# table: launch to the last rank's first allreduce, the communicator's start-up phases
# (max over ranks), CPU per rank, sockets and threads per rank, memory, and the 8 B and
# 1 MB allreduce. The machine (CPU, cores, memcpy bandwidth) heads the output.
#
#   bench/scale/startup.sh [--build DIR] [--ranks "8 16 32"] [--hosts H] [--runs R] [--env "K=V ..."]
#
#   --hosts H   H test hosts (tools/testhosts.sh, root), the ranks dealt evenly over them
#   --runs R    jobs per rank count (default 3); the table gives the median run (by launch
#               to first allreduce)
#   --env       variables for every rank (e.g. "KOLO_LAZY_CONNECT=0")
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$root/build
ranks="8 16 32 64 128 256"
hosts=0
runs=3
extra_env=""
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --env) extra_env=$2; shift 2 ;;
    *) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
probe=$build/bench/scale/kolo-startup-probe
kolorun=$build/tools/kolorun/kolorun
for f in "$probe" "$kolorun"; do [ -x "$f" ] || { echo "startup.sh: $f is missing (build the default preset)" >&2; exit 2; }; done

cpu=$(lscpu | sed -n 's/^Model name: *//p' | sed -n 1p)
copy=$("$build/tools/kolo_plan/kolo-plan" 2>/dev/null | sed -n 's/.*memcpy of 4 MiB \([0-9.]*\) GB\/s.*/\1/p' | sed -n 1p || true)
echo "# $(date -u +%F) $cpu, $(nproc) cores, memcpy ${copy:-?} GB/s (4 MiB); kolo $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "# $( [ "$hosts" -gt 0 ] && echo "$hosts test hosts (TCP between them)" || echo "one host (shared memory)"); env: ${extra_env:-none}"

prefix=kscale
launch_args=()
if [ "$hosts" -gt 0 ]; then
  "$root/tools/testhosts.sh" --prefix "$prefix" down >/dev/null
  "$root/tools/testhosts.sh" --prefix "$prefix" up "$hosts" >/dev/null
  trap '"$root/tools/testhosts.sh" --prefix "$prefix" down >/dev/null' EXIT
  launch_args=(--launcher "$root/tools/testhosts.sh exec {host}")
fi

results=$(mktemp)
trap 'rm -f "$results"; [ "$hosts" -gt 0 ] && "$root/tools/testhosts.sh" --prefix "$prefix" down >/dev/null; true' EXIT
# A job of 256 processes needs room: descriptors for kolorun's pipes and store.
ulimit -n 65536 2>/dev/null || true
for n in $ranks; do
  host_args=()
  if [ "$hosts" -gt 0 ]; then
    per=$(( (n + hosts - 1) / hosts )) list="" left=$n
    for h in $(seq 0 $((hosts - 1))); do
      take=$(( left < per ? left : per )); [ "$take" -gt 0 ] || break
      list+="${list:+,}$prefix-h$h:$take"; left=$((left - take))
    done
    host_args=(-H "$list")
  else
    host_args=(-np "$n")
  fi
  for run in $(seq 1 "$runs"); do
    launch=$(date +%s.%N)
    # shellcheck disable=SC2086  # extra_env is a list of K=V words
    if ! line=$(env STARTUP_BENCH_LAUNCH="$launch" $extra_env "$kolorun" --no-prefix --timeout 600 "${launch_args[@]}" "${host_args[@]}" \
                  "$probe" 2>/tmp/kolo-startup-err.$$ | grep '^{'); then
      echo "startup.sh: $n ranks, run $run failed:" >&2; tail -n 20 /tmp/kolo-startup-err.$$ >&2
      rm -f /tmp/kolo-startup-err.$$; exit 1
    fi
    rm -f /tmp/kolo-startup-err.$$
    echo "$line" | tee -a "$results"
  done
done

/usr/bin/python3 - "$results" "$runs" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by_n = {}
for r in rows: by_n.setdefault(r["ranks"], []).append(r)
print("\n| ranks | launch→first allreduce s | store | tree | hosts | topology | connect | barrier | first call | CPU/rank s | sockets/rank (max; rank 0) | threads max | RSS MB/rank | shared MB/rank | 8 B us | 1 MB us |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for n in sorted(by_n):
    runs = sorted(by_n[n], key=lambda r: r["launch_to_first_s"])
    m = runs[len(runs) // 2]; p = m["phases"]
    each = ", ".join("%.2f" % r["launch_to_first_s"] for r in runs)
    print(f"| {n} | {m['launch_to_first_s']:.2f} (runs {each}) | {p['store']:.3f} | {p['tree']:.3f} | {p['hosts']:.3f} | {p['topology']:.3f} | {p['connect']:.3f} | {p['barrier']:.3f} | {p['first_call']:.3f} | {m['cpu_per_rank_s']:.3f} | {m['sockets_max']:.0f}; {m['sockets_rank0']:.0f} | {m['threads_max']:.0f} | {m['rss_mb_median']:.0f} | {m['shared_mb_median']:.1f} | {m['allreduce_8b_us']:.1f} | {m['allreduce_1mb_us']:.0f} |")
PY
