#!/usr/bin/env bash
# Packs what tools/gpu-check.sh runs into DIR, for a GPU machine that cannot build kolo
# (no package network, other system libraries): the binaries in their build-tree layout,
# and every shared library they load except glibc's and the driver's in DIR/lib. NCCL is
# left out (217 MB); env.sh finds the machine's own libnccl.so.2 (PyTorch's pip package
# ships one). On the GPU machine: `. DIR/env.sh; tools/gpu-check.sh --prebuilt DIR`.
# usage: tools/gpu-bundle.sh BUILD_DIR DIR [TARBALL]   (BUILD_DIR configured with CUDA and
#        built; NCCL_TESTS_DIR=<tools/nccl-tests-build.sh's OUT_DIR> adds nccl-tests)
# TARBALL: DIR also packed as a .tgz (about 22 MB where DIR is 73 MB: the CUDA fatbins
# compress well), for a transfer with a size limit; unpack it in the tree's root.
set -euo pipefail
build=$1 dir=$2 tarball=${3:-}
bins=(tools/kolorun/kolorun bench/perf/kolo-perf tests/multiproc/kolo_test_worker tests/multiproc/kolo_soak
      tests/gpu/kolo_gpu_tests bench/kernels/kolo_kernels_cuda_bench)
rm -rf "$dir"; mkdir -p "$dir/lib"
for b in "${bins[@]}"; do
  [ -x "$build/$b" ] || { echo "gpu-bundle: $build/$b is not built" >&2; exit 1; }
  mkdir -p "$dir/$(dirname "$b")"; cp "$build/$b" "$dir/$b"; strip --strip-debug "$dir/$b"
done
# libkolo itself, for kolo.torch (KOLO_LIBRARY; the Python package comes with the tree),
# and kolo's libnccl.so.2 where it was built (kolorun --nccl finds it in nccl-dropin/; it
# finds libkolo.so.0 through env.sh's LD_LIBRARY_PATH).
cp -L "$build/libkolo.so" "$dir/lib/libkolo.so.0"; strip --strip-debug "$dir/lib/libkolo.so.0"
ln -s lib/libkolo.so.0 "$dir/libkolo.so"  # one copy: the bundle travels under a size limit
if [ -e "$build/nccl-dropin/libnccl.so.2" ]; then
  mkdir -p "$dir/nccl-dropin"; cp -L "$build/nccl-dropin/libnccl.so.2" "$dir/nccl-dropin/libnccl.so.2"
fi
# NVIDIA's nccl-tests, where built here (NCCL_TESTS_DIR, tools/nccl-tests-build.sh): the
# check runs them on NVIDIA's library and on kolo's.
if [ -n "${NCCL_TESTS_DIR:-}" ]; then
  mkdir -p "$dir/nccl-tests"; cp "$NCCL_TESTS_DIR"/*_perf "$dir/nccl-tests/"
fi
# Shared libraries by what ldd resolves; glibc's own and libcuda (the driver's) stay behind.
for b in "${bins[@]}"; do ldd "$build/$b"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libcuda|libnccl)\.so' |
  while read -r lib; do cp -L "$lib" "$dir/lib/"; strip --strip-debug "$dir/lib/$(basename "$lib")"; done
cat >"$dir/env.sh" <<'EOF'
# Sourced on the GPU machine: the bundle's libraries first, then a libnccl.so.2 found there.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
nccl=$(find /usr/local /opt /usr/lib -name libnccl.so.2 2>/dev/null | sed -n 1p)
export LD_LIBRARY_PATH=$here/lib${nccl:+:$(dirname "$nccl")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "bundle: libraries from $here/lib; NCCL: ${nccl:-none found}"
EOF
du -sh "$dir"
if [ -n "$tarball" ]; then
  mkdir -p "$(dirname "$tarball")"
  tar -czf "$tarball" -C "$(dirname "$dir")" "$(basename "$dir")"
  du -sh "$tarball"
fi
