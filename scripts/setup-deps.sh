#!/bin/bash
# setup-deps.sh - install the Debian packages pcache builds, packages, tests
# and demos with, only those missing. scripts/demo.sh, scripts/test.sh and
# scripts/package.sh run it; it is safe to run again. Debian 12 (bookworm)
# is the reference system.
#
#   scripts/setup-deps.sh [--check]   --check: list what is missing, install nothing
set -euo pipefail

PCACHE_DEBIAN_PACKAGES=(
  build-essential cmake pkg-config
  libuv1-dev liblmdb-dev lmdb-utils libprotobuf-c-dev protobuf-c-compiler libxxhash-dev
  libsystemd-dev systemd
  # The fleet tier: hiredis with its libuv adapter, libsodium for its
  # signatures, and a Redis for its tests (openssl: the tests make a key
  # with it too, the libsodium-free way docs/fleet.md gives).
  libhiredis-dev libsodium-dev redis-server openssl
  libvulkan-dev mesa-vulkan-drivers glslang-tools vulkan-tools
  python3
  clang libclang-rt-14-dev
  # The Vulkan layer's tests with real programs (tests/layer/, docs/testing.md).
  # glmark2 dlopens libGL/libEGL/libGLESv2, so they are not its dependencies.
  xvfb xauth mesa-utils libgl1 libegl1 libgles2
  glmark2-x11 glmark2-es2-x11 mpv ffmpeg
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-bad
  vulkan-validationlayers
  # Other implicit layers, for how pcache's stacks with them (docs/layer.md,
  # "Other layers"); off unless MANGOHUD=1 / ENABLE_VKBASALT=1.
  mangohud vkbasalt
  # The Debian package (scripts/package.sh: CPack runs dpkg-shlibdeps and
  # file) and its test in a fresh chroot (tests/install/package_test.sh).
  dpkg-dev file debootstrap
)

missing=()
for pkg in "${PCACHE_DEBIAN_PACKAGES[@]}"; do
  # "install ok installed" is the only state in which the package is usable.
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$pkg")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-deps: all ${#PCACHE_DEBIAN_PACKAGES[@]} packages present"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "setup-deps: missing: ${missing[*]}"
  exit 1
fi

echo "setup-deps: installing ${missing[*]}"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup-deps: not root and no sudo; install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  "${missing[@]}" </dev/null
