#!/usr/bin/env bash
# gpu-deps.sh - fetch, from Debian's archive, every package a GPU machine
# with a compiler and CMake but no Debian libraries needs to build and run
# pcache's benchmark set from a clean tree: the -dev packages of libuv,
# LMDB, protobuf-c, xxHash, hiredis and libsodium (pcached's fleet tier needs
# them to build)
# and Vulkan, protoc-c, glslang, pkg-config, and the Vulkan loader and GL
# dispatch packages. No redis-server: the fleet benchmark runs here only
# (docs/fleet.md, bench/HISTORY.md).
#
#   bench/gpu-deps.sh [OUT_DIR]      (default: out/gpudeps, git-ignored)
#
# Then, on the GPU machine, from a copy of the tree that carries OUT_DIR:
#   bench/gpu-build-run.sh OUT_DIR
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$SRC/out/gpudeps}
PACKAGES="libuv1 libuv1-dev liblmdb0 liblmdb-dev libprotobuf-c1 libprotobuf-c-dev
  protobuf-c-compiler libhiredis0.14 libhiredis-dev libsodium23 libsodium-dev libprotoc32 libprotobuf32 libxxhash0 libxxhash-dev libvulkan1
  libvulkan-dev glslang-tools spirv-tools pkgconf pkgconf-bin libpkgconf3
  libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2"
rm -rf "$OUT"
mkdir -p "$OUT"
lists=$(mktemp -d)
mkdir -p "$lists/partial"
o="-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=$lists -oAPT::Sandbox::User=root"
# shellcheck disable=SC2086 # word splitting of the option and package lists is meant
{ apt-get $o update && (cd "$OUT" && apt-get $o download $PACKAGES); } >/dev/null
rm -rf "$lists"
du -sh "$OUT"
