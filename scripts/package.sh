#!/bin/bash
# package.sh - build pcache's Debian packages from the CMake install, with
# CPack's DEB generator (cmake/PcachePackage.cmake, docs/packaging.md):
# pcache_<version>_<arch>.deb (everything that runs) and
# libpcache-dev_<version>_<arch>.deb (headers, pcache.pc, CMake package).
#
#   scripts/package.sh [--build-dir DIR] [--no-deps]
#
#   --build-dir DIR  build and put the packages here (default: build-pkg/ in
#                    the source tree)
#   --no-deps        do not check or install Debian packages
#
# Then: sudo apt install ./build-pkg/pcache_*.deb
# Environment: PCACHE_JOBS (parallel build jobs, default: number of CPUs).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$src/build-pkg
jobs=${PCACHE_JOBS:-$(nproc)}
deps=1

while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=${2:?--build-dir needs a directory}; shift 2 ;;
    --no-deps) deps=0; shift ;;
    -h|--help) sed -n '2,14s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "package.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
case $build in /*) ;; *) build=$PWD/$build ;; esac

[ "$deps" = 0 ] || "$src/scripts/setup-deps.sh"

# Debian's build flags (dpkg-buildflags: hardening, -ffile-prefix-map so no
# build path is in the binaries) on top of the RelWithDebInfo build the
# tests run; every option is given, so a build directory configured
# otherwise before is reconfigured, not silently kept.
export DEB_BUILD_MAINT_OPTIONS=hardening=+all
cflags="$(cd "$src" && dpkg-buildflags --get CFLAGS) $(dpkg-buildflags --get CPPFLAGS)"
ldflags=$(dpkg-buildflags --get LDFLAGS)

mkdir -p "$build"
log=$build/package.log
echo "package.sh: building in $build (log: $log)"
if ! { cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
         -DPCACHE_BUILD_TESTS=OFF -DPCACHE_BUILD_BENCH=OFF -DPCACHE_BUILD_EXAMPLES=OFF \
         -DPCACHE_WERROR=OFF -DPCACHE_SANITIZE= -DPCACHE_FUZZ=OFF -DPCACHE_PC_RELOCATABLE=OFF \
         -DCMAKE_C_FLAGS="$cflags" -DCMAKE_EXE_LINKER_FLAGS="$ldflags" \
         -DCMAKE_SHARED_LINKER_FLAGS="$ldflags" -DCMAKE_MODULE_LINKER_FLAGS="$ldflags" &&
       cmake --build "$build" -j "$jobs" &&
       rm -f "$build"/*.deb &&
       (cd "$build" && cpack -G DEB); } >"$log" 2>&1; then
  tail -n 60 "$log" >&2
  echo "package.sh: failed (full log: $log)" >&2
  exit 1
fi

for deb in "$build"/*.deb; do
  echo "$deb"
  dpkg-deb --field "$deb" Package Version Architecture Depends | sed 's/^/  /'
done
