#!/usr/bin/env bash
# gpu-build-run.sh - on a GPU machine that has a compiler and CMake but no
# Debian libraries: unpack the packages bench/gpu-deps.sh fetched into a
# private sysroot, configure and build pcache (Release) from this clean
# tree against it, then run the demo and the whole benchmark set
# (bench/gpu-run.sh). One command:
#
#   bench/gpu-build-run.sh DEPS_DIR [run-all.sh options...]
#
# Env: BUILD_DIR (default /tmp/pcache-gpu-build), SYSROOT (default
# /tmp/pcache-sysroot), OUT, WARM_REPEATS, VK_DRIVER_FILES (see gpu-run.sh).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
DEPS=$(cd "$1" && pwd)
shift
SYSROOT=${SYSROOT:-/tmp/pcache-sysroot}
BUILD=${BUILD_DIR:-/tmp/pcache-gpu-build}
multiarch=usr/lib/x86_64-linux-gnu

rm -rf "$SYSROOT" "$BUILD"
mkdir -p "$SYSROOT" "$BUILD"
for f in "$DEPS"/*.deb; do dpkg -x "$f" "$SYSROOT"; done
# pkg-config and its tools from the sysroot; its .pc files name /usr, which
# PKG_CONFIG_SYSROOT_DIR rewrites into the sysroot.
ln -sf pkgconf "$SYSROOT/usr/bin/pkg-config"
export PATH=$SYSROOT/usr/bin:$PATH
export LD_LIBRARY_PATH=$SYSROOT/$multiarch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_LIBDIR=$SYSROOT/$multiarch/pkgconfig:$SYSROOT/usr/share/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$SYSROOT

cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DPCACHE_BUILD_TESTS=OFF \
  -DPKG_CONFIG_EXECUTABLE="$SYSROOT/usr/bin/pkgconf" >"$BUILD/configure.log" 2>&1 ||
  { tail -n 40 "$BUILD/configure.log"; exit 1; }
cmake --build "$BUILD" -j"$(nproc)" --target pcached pcachectl pcache-demo bench_warm \
  bench_delivery bench_ingest bench_tiers bench_desc bench_merge >"$BUILD/build.log" 2>&1 ||
  { tail -n 40 "$BUILD/build.log"; exit 1; }
echo "built in $BUILD"

# gpu-run.sh wants the bundle layout: binaries as in a build tree, the
# libraries in lib/, the loader packages in debs/.
ln -sfn "$SYSROOT/$multiarch" "$BUILD/lib"
ln -sfn "$DEPS" "$BUILD/debs"
exec "$SRC/bench/gpu-run.sh" "$BUILD" "$@"
