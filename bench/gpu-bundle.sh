#!/usr/bin/env bash
# gpu-bundle.sh - build the benchmark set and the demo here (Release) and
# gather everything a bare GPU machine needs to run them into one folder:
# the binaries in the build-tree layout run-all.sh expects, the shared
# libraries they load that such a machine lacks (libuv, LMDB, protobuf-c,
# libsystemd and its own), and the Vulkan loader packages.
#
#   bench/gpu-bundle.sh [OUT_DIR]     (default: out/gpubench, git-ignored)
#
# Then, on the GPU machine, from a copy of the tree that carries OUT_DIR:
#   bench/gpu-run.sh OUT_DIR
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$SRC/out/gpubench}
BUILD=${PCACHE_GPU_BUILD_DIR:-$SRC/build-gpu}

# PCACHE_GPU_CMAKE_ARGS: more -D options, e.g. -DPCACHE_PHASE_TIMING=ON for
# bench/probe-phases.sh (with a PCACHE_GPU_BUILD_DIR of its own: the option
# is set OFF here otherwise, so a timed build never leaks into a bundle).
# shellcheck disable=SC2086
cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPCACHE_BUILD_TESTS=OFF \
  -DPCACHE_BUILD_EXAMPLES=ON -DPCACHE_BUILD_BENCH=ON -DPCACHE_PHASE_TIMING=OFF \
  ${PCACHE_GPU_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target pcached pcachectl pcache-demo bench_warm \
  bench_delivery bench_ingest bench_tiers bench_desc bench_merge bench_gpl VkLayer_pcache \
  pcache-replay bench_rekey bench_floor bench_binary >/dev/null

rm -rf "$OUT"
mkdir -p "$OUT/daemon" "$OUT/bench" "$OUT/tools" "$OUT/examples" "$OUT/lib" "$OUT/debs" "$OUT/layer"
cp "$BUILD/daemon/pcached" "$BUILD/daemon/pcache-replay" "$OUT/daemon/"
cp "$BUILD/tools/pcachectl" "$OUT/tools/"
cp "$BUILD/examples/pcache-demo" "$OUT/examples/"
cp "$BUILD"/bench/bench_{warm,delivery,ingest,tiers,desc,merge,rekey,gpl,floor,binary} "$OUT/bench/"
cp "$BUILD/layer/libVkLayer_pcache.so" "$OUT/layer/"
strip "$OUT"/daemon/* "$OUT"/tools/* "$OUT"/examples/* "$OUT"/bench/* "$OUT"/layer/*

# Every library ldd resolves outside glibc and the Vulkan loader (which
# comes from the packages below, as the device README prescribes).
ldd "$OUT"/daemon/* "$OUT"/tools/* "$OUT"/examples/* "$OUT"/bench/* "$OUT"/layer/* |
  awk '/=> \// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libvulkan)\.so' |
  while read -r lib; do cp -L "$lib" "$OUT/lib/"; done

# The Vulkan loader and GL dispatch packages, amd64, from Debian's archive.
lists=$(mktemp -d)
o="-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=$lists -oAPT::Sandbox::User=root"
mkdir -p "$lists/partial"
apt-get $o update >/dev/null
(cd "$OUT/debs" && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 \
  libgles2 >/dev/null 2>&1)
rm -rf "$lists"
cp "$SRC/bench/gpu-run.sh" "$SRC/bench/probe-binary.sh" "$SRC/layer/VkLayer_pcache.json.in" "$OUT/"
du -sh "$OUT"
