#!/usr/bin/env bash
# Keeps kolo's documentation true about two things that went stale before (issue 34): the
# README pointed at a design file outside the repository, and docs went on saying the GPU
# path had never run after it had run on an H100 (bench/results/2026-11-26-*). Prints one
# `FILE:LINE: what` per finding and exits 1, else a one-line summary and exits 0 (ctest
# `docs_true`; `docs_true_self_test` runs --self-test). Only bash, find, GNU sed, awk.
#
#   tools/check_docs.sh [REPO_ROOT]   check the tree (default: the current folder)
#   tools/check_docs.sh --self-test   prove on a fake tree that the check can fail
#
# Rule a, links. In every Markdown file (bench/results/ included) a Markdown link
# `[text](target)` or `[ref]: target` whose target is not a URL (scheme:), not a bare
# #anchor and, without its #fragment, not an existing path relative to the file's folder
# is a finding; so is a backticked path that starts with ./ or ../ and does not exist.
# A target outside the repository counts as missing: the project must not point outside
# itself. Absolute paths are findings too.
#
# Rule b, "never run on a GPU". A GPU run is a bench/results/*.md that names the device
# as nvidia-smi does ("NVIDIA H100", "NVIDIA H200"); files that only cite H100 figures
# are not runs. While one exists, in every *.md outside bench/results/ and in
# tools/demo.sh (case-insensitive):
#   1. a whole-path denial is always a finding: WHOLE below ("no GPU has run this path",
#      "this path has never run", "the device path has not run", "nothing has run on a GPU");
#   2. a narrower "not run on a GPU" phrase (NOTRUN below: "never run on a GPU", "has not
#      yet been run on an H100", "never ran on a GPU", "not tested on a GPU", ...) is a
#      finding unless the same line, outside the phrase, says what it is set against: the
#      GPU run (H100, H200, or a bench/results/ file) or what the part was tested on
#      instead (the emulated device). E.g. "tested on the emulated device: **never run on a
#      GPU**" passes; "(-G: ...; never run on a GPU yet)" does not.
# Lines are checked one by one: a sentence broken across lines is read in pieces.
set -uo pipefail

WHOLE='no GPU (has|have) (ever |yet )?(been )?run (this|these|that|the|it|kolo|any)|(device|GPU|CUDA|this|that) (path|code)( has| have)? (never|not)( yet)?( been)? (run|ran)|nothing( here)?( has)?( yet)?( been)? (run|ran) on (a|an|any) (GPU|H100|H200)'
NOTRUN='(never|not)( yet)?( been)?( yet)? (run|ran|tried|tested) on (a |an |any |the |real )?(GPU|H100|H200)|never on (a|an|any) (GPU|H100|H200)'
SCOPE='H100|H200|emulated|bench/results/'
GPU_RUN='NVIDIA H[12]00'

check_tree() {
  local root real_root f dir n line t target full bad=0 gpu_runs
  root=$1; real_root=$(realpath "$root")
  [[ -f "$root/README.md" ]] || { echo "check_docs: no README.md in $root" >&2; return 2; }
  cd "$root" || return 2
  mapfile -t mds < <(find . \( -path ./.git -o -path './build*' -o -path ./.cache \) -prune \
                          -o -name '*.md' -type f -print | sed 's|^\./||' | sort)
  finding() { echo "$1:$2: $3"; bad=$((bad + 1)); }

  # Rule a.
  for f in "${mds[@]}"; do
    dir=$(dirname "$f")
    while IFS=$'\t' read -r n target; do
      t=${target%%#*}
      [[ -z "$t" || "$t" =~ ^[A-Za-z][A-Za-z0-9+.-]*: ]] && continue
      if [[ "$t" == /* ]]; then finding "$f" "$n" "absolute path $target (link relative to the file)"; continue; fi
      full=$(realpath -m "$dir/$t")
      if [[ "$full" != "$real_root" && "$full" != "$real_root"/* ]]; then
        finding "$f" "$n" "$target leaves the repository"
      elif [[ ! -e "$full" ]]; then
        finding "$f" "$n" "$target does not exist (relative to $dir/)"
      fi
    done < <(awk '{
        s = $0
        while (match(s, /\]\([^) ]+/)) { print FNR "\t" substr(s, RSTART + 2, RLENGTH - 2); s = substr(s, RSTART + RLENGTH) }
        if (match($0, /^ *\[[^]]+\]: *[^ ]+/)) { t = substr($0, RSTART, RLENGTH); sub(/^ *\[[^]]+\]: */, "", t); print FNR "\t" t }
        s = $0
        while (match(s, /`\.\.?\/[^` ]*`/)) { print FNR "\t" substr(s, RSTART + 1, RLENGTH - 2); s = substr(s, RSTART + RLENGTH) }
      }' "$f" | tr -d '<>')
  done

  # Rule b.
  gpu_runs=$(grep -lE "$GPU_RUN" bench/results/*.md 2>/dev/null | sed -n 1p)
  if [[ -n "$gpu_runs" ]]; then
    for f in "${mds[@]}" tools/demo.sh; do
      [[ "$f" == bench/results/* || ! -f "$f" ]] && continue
      while IFS=: read -r n line; do
        if grep -qiE "$WHOLE" <<<"$line"; then
          finding "$f" "$n" "says the whole GPU path never ran, but $gpu_runs records a GPU run"
        elif grep -qiE "$NOTRUN" <<<"$line" &&
             ! sed -E "s/$NOTRUN//Ig" <<<"$line" | grep -qiE "$SCOPE"; then
          finding "$f" "$n" "says something has not run on a GPU; the line names neither the GPU run ($gpu_runs) nor what it was tested on instead"
        fi
      done < <(grep -niE "$WHOLE|$NOTRUN" "$f")
    done
  fi

  if (( bad > 0 )); then echo "check_docs: $bad finding(s)" >&2; return 1; fi
  echo "check_docs: ${#mds[@]} Markdown files, links and GPU-run claims true${gpu_runs:+ (GPU run: $gpu_runs)}"
}

self_test() {
  local tmp out rc
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
  mkdir -p "$tmp/docs" "$tmp/bench/results" "$tmp/tools"
  printf '# x\nSee [a](docs/a.md#top), [web](https://example.com), [me](#x).\n' >"$tmp/README.md"
  printf 'Tested on the emulated device, **never run on a GPU**.\n' >"$tmp/docs/a.md"
  echo '# GPU 0: NVIDIA H100 80GB HBM3' >"$tmp/bench/results/run.md"
  echo '# -G: never run on a GPU yet' >"$tmp/tools/demo.sh"
  # shellcheck disable=SC2016  # the backticks are Markdown
  printf 'No GPU has run this path.\n[b](../outside.md) [c](missing.md) `../../x.md`\n' >"$tmp/docs/b.md"
  out=$(check_tree "$tmp" 2>&1); rc=$?
  local want
  for want in 'tools/demo.sh:1: says something' 'docs/b.md:1: says the whole' \
              'docs/b.md:2: ../outside.md does not' 'docs/b.md:2: missing.md does not' \
              'docs/b.md:2: ../../x.md leaves' 'check_docs: 5 finding'; do
    grep -qF "$want" <<<"$out" || { echo "self-test: missing '$want' in:"$'\n'"$out" >&2; return 1; }
  done
  [[ $rc -eq 1 ]] || { echo "self-test: exit $rc, want 1" >&2; return 1; }
  rm -f "$tmp/tools/demo.sh" "$tmp/docs/b.md"
  out=$(check_tree "$tmp" 2>&1) || { echo "self-test: clean tree failed:"$'\n'"$out" >&2; return 1; }
  echo "check_docs self-test: passed (5 planted findings found, clean tree passes)"
}

case "${1:-}" in
  --self-test) self_test ;;
  -h|--help) sed -n '2,30p' "$0" ;;
  *) check_tree "${1:-.}" ;;
esac
