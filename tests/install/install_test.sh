#!/bin/bash
# install_test.sh BUILD_DIR CONSUMER_SRC CC [SANITIZE]
# Installs BUILD_DIR into a scratch prefix, checks the layout and that
# every relative link in the installed documentation resolves, then builds
# and runs the consumer against it: with pkg-config, and with
# find_package(pcache) linking pcache::pcache by either signature of
# target_link_libraries. SANITIZE is the build's -fsanitize= list, which a
# program loading an instrumented libpcache must be built with too.
set -euo pipefail

build=$1 consumer=$2 cc=$3 sanitize=${4:-}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/pcache-install-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
prefix=$scratch/prefix
san_flags=()
[ -n "$sanitize" ] && san_flags=(-fsanitize="$sanitize" -fno-omit-frame-pointer)

fail() { echo "install_test: FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$scratch/install.log" 2>&1 ||
  { cat "$scratch/install.log" >&2; fail "cmake --install"; }

# The layout README.md promises.
pc=$(find "$prefix" -name pcache.pc -path '*/pkgconfig/*' | head -n1)
[ -n "$pc" ] || fail "no pcache.pc under $prefix"
libdir=$(dirname "$(dirname "$pc")")
for f in include/pcache/pcache.h include/pcache/version.h bin/pcached bin/pcachectl \
         lib/systemd/user/pcached.socket lib/systemd/user/pcached.service \
         lib/systemd/user/pcache-detect.path lib/systemd/user/pcache-detect.service \
         share/doc/pcache/README.md share/doc/pcache/docs/README.md \
         share/doc/pcache/docs/operations.md; do
  [ -e "$prefix/$f" ] || fail "$f is not installed"
done
# The top-level README and the docs index are two files, not one over the
# other; and every relative link in the installed docs leads somewhere.
cmp -s "$prefix/share/doc/pcache/README.md" "$prefix/share/doc/pcache/docs/README.md" &&
  fail "share/doc/pcache/README.md and docs/README.md are the same file"
python3 "$(dirname "$0")/doc_links.py" "$prefix/share/doc/pcache" ||
  fail "the installed documentation has broken links"
# The units' Documentation= names the operations guide where it installs
# (under the configured prefix, which --prefix above does not change).
grep -q "^Documentation=file:///.*/share/doc/pcache/docs/operations.md$" \
  "$prefix/lib/systemd/user/pcached.socket" || fail "pcached.socket names no installed documentation"
for f in "$libdir/cmake/pcache/pcacheConfig.cmake" "$libdir/cmake/pcache/pcacheConfigVersion.cmake" \
         "$libdir/cmake/pcache/pcacheTargets.cmake" "$libdir/libpcache.so"; do
  [ -e "$f" ] || fail "$f is not installed"
done
soname=$(objdump -p "$libdir/libpcache.so" | awk '$1 == "SONAME" { print $2 }')
[ "$soname" = "libpcache.so.0" ] || fail "SONAME is '$soname', expected libpcache.so.0"
[ -e "$libdir/$soname" ] || fail "$soname is not installed"
# Only what pcache.h declares is exported (-fvisibility=hidden, PCACHE_API).
stray=$(nm -D --defined-only "$libdir/libpcache.so" | awk '$2 ~ /^[TDBVWRi]$/ { print $3 }' |
        grep -v '^pcache_' | grep -v '^_\(init\|fini\|edata\|end\|_bss_start\)$' || true)
[ -z "$stray" ] || fail "libpcache.so exports symbols outside pcache_*: $(echo $stray)"
# Nothing internal is exported either (pcache__ is the internal prefix).
if nm -D --defined-only "$libdir/libpcache.so" | awk '{ print $3 }' | grep -q '^pcache__'; then
  fail "libpcache.so exports pcache__ internals"
fi

# libpcache finds the Vulkan loader at run time, through the app's
# vkGetInstanceProcAddr or dlopen: an app with a GL fallback must start on a
# machine without libvulkan.so.1, and no vk* name may be bound to a
# program's global of that name (client/loader.c).
if readelf -d "$libdir/libpcache.so" | grep -q 'NEEDED.*libvulkan'; then
  fail "libpcache.so needs libvulkan.so.1 at load time"
fi
if nm -D --undefined-only "$libdir/libpcache.so" | awk '{ print $2 }' | grep -q '^vk'; then
  fail "libpcache.so references Vulkan symbols: $(nm -D --undefined-only "$libdir/libpcache.so" | grep ' vk' | tr '\n' ' ')"
fi

# The Vulkan layer: its manifest where the loader looks for implicit layers,
# off unless PCACHE_LAYER=1, naming the installed library by its configured
# path. The library exports only the loader's entry point and references no
# Vulkan symbol: an app's (or plugin's) globals named like Vulkan functions
# could be bound in their place.
manifest=$prefix/share/vulkan/implicit_layer.d/VkLayer_pcache.json
[ -e "$manifest" ] || fail "the layer manifest is not installed"
[ -e "$libdir/libVkLayer_pcache.so" ] || fail "libVkLayer_pcache.so is not installed"
python3 - "$manifest" <<'PY' || fail "the layer manifest is wrong"
import json, os, sys
layer = json.load(open(sys.argv[1]))["layer"]
assert layer["name"] == "VK_LAYER_PCACHE_pipeline_cache", layer["name"]
assert layer["type"] == "GLOBAL"
assert os.path.isabs(layer["library_path"]), layer["library_path"]
assert os.path.basename(layer["library_path"]) == "libVkLayer_pcache.so"
assert layer["enable_environment"] == {"PCACHE_LAYER": "1"}, layer["enable_environment"]
assert layer["disable_environment"] == {"PCACHE_LAYER_DISABLE": "1"}
PY
exported=$(nm -D --defined-only "$libdir/libVkLayer_pcache.so" | awk '$2 ~ /^[TDBVWRi]$/ { print $3 }' |
           grep -v '^_\(init\|fini\|edata\|end\|_bss_start\)$' || true)
[ "$exported" = "vkNegotiateLoaderLayerInterfaceVersion" ] ||
  fail "the layer exports more than its entry point: $(echo $exported)"
if nm -D --undefined-only "$libdir/libVkLayer_pcache.so" | awk '{ print $2 }' | grep -q '^vk'; then
  fail "the layer references Vulkan symbols: $(nm -D --undefined-only "$libdir/libVkLayer_pcache.so" | grep ' vk' | tr '\n' ' ')"
fi
# The loader dlopens the layer: static TLS could make that fail in a
# process that used up its reserve, and a shared protobuf-c could be a
# program's own.
# (Sanitizer builds keep static TLS: client/CMakeLists.txt says why.)
if [ -z "$sanitize" ] && readelf -d "$libdir/libVkLayer_pcache.so" | grep -q STATIC_TLS; then
  fail "the layer uses static TLS"
fi
if readelf -d "$libdir/libVkLayer_pcache.so" | grep -q 'NEEDED.*libprotobuf-c'; then
  fail "the layer loads the shared protobuf-c"
fi
# The fleet tier's libraries (hiredis, libsodium: docs/fleet.md) are
# pcached's alone: no program that uses pcache loads them.
for lib in libpcache.so libVkLayer_pcache.so; do
  if readelf -d "$libdir/$lib" | grep -Eq 'NEEDED.*(libsodium|libhiredis)'; then
    fail "$lib loads the fleet tier's libsodium or hiredis"
  fi
done

# 1. pkg-config
export PKG_CONFIG_PATH=$libdir/pkgconfig
[ "$(pkg-config --modversion pcache)" = "$(sed -n 's/.*PCACHE_VERSION_STRING "\(.*\)"/\1/p' \
  "$prefix/include/pcache/version.h")" ] || fail "pcache.pc version differs from version.h"
# shellcheck disable=SC2046
"$cc" -std=c11 -Wall -Werror "${san_flags[@]}" -o "$scratch/consumer-pc" "$consumer/consumer.c" \
  $(pkg-config --cflags --libs pcache) -Wl,-rpath,"$(pkg-config --variable=libdir pcache)" ||
  fail "building with pkg-config"
out=$("$scratch/consumer-pc") || fail "consumer built with pkg-config failed"
echo "pkg-config:   $out"

# 2. find_package(pcache)
cmake -S "$consumer" -B "$scratch/consumer-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="${san_flags[*]}" >"$scratch/cmake.log" 2>&1 ||
  { cat "$scratch/cmake.log" >&2; fail "configuring with find_package(pcache)"; }
cmake --build "$scratch/consumer-build" >"$scratch/build.log" 2>&1 ||
  { cat "$scratch/build.log" >&2; fail "building with find_package(pcache)"; }
out=$("$scratch/consumer-build/consumer") || fail "consumer built with find_package failed"
echo "find_package: $out"
out=$("$scratch/consumer-build/consumer_plain") ||
  fail "consumer linked by the plain signature failed"
echo "find_package, plain signature: $out"
# Mixing the signatures on one target is CMake's error, not pcache's: the
# one docs/client.md quotes.
if cmake -S "$consumer" -B "$scratch/consumer-mixed" -DCMAKE_PREFIX_PATH="$prefix" \
     -DCMAKE_C_COMPILER="$cc" -DPCACHE_CONSUMER_MIXED=ON >"$scratch/mixed.log" 2>&1; then
  fail "CMake accepted both signatures on one target: docs/client.md says it does not"
fi
grep -q 'The plain signature for target_link_libraries has already been used with' \
  "$scratch/mixed.log" || { cat "$scratch/mixed.log" >&2; fail "mixing signatures failed otherwise"; }
echo "install_test: ok ($prefix)"
