#!/bin/bash
# stacking.sh BUILD PCACHED - where pcache's layer sits among other implicit
# layers decides whether their own pipelines are cached (docs/layer.md,
# "Other layers"): vkcube on lavapipe under Xvfb, with MangoHud and vkBasalt
# turned on (MANGOHUD=1 ENABLE_VKBASALT=1), against a private pcached.
#   - pcache's manifest found first (XDG_DATA_HOME, searched before
#     /usr/share where theirs are): pcache sits nearest the program and
#     sees vkcube's pipelines only, as many as without the other layers;
#   - found last (a directory after /usr/share in XDG_DATA_DIRS): it sits
#     below them and sees theirs too, and the second run serves them all.
# Exit 77 (skipped) when vkcube, Xvfb, MangoHud or vkBasalt is missing.
set -euo pipefail

build=$1 pcached=$2
skip() { echo "stacking: SKIP: $*"; exit 77; }
command -v vkcube >/dev/null || skip "no vkcube (vulkan-tools)"
command -v xvfb-run >/dev/null || skip "no xvfb-run (xvfb)"
manifests=/usr/share/vulkan/implicit_layer.d
[ -e "$manifests/MangoHud.json" ] || skip "no MangoHud (Debian: mangohud)"
[ -e "$manifests/vkBasalt.json" ] || skip "no vkBasalt (Debian: vkbasalt)"
icd=$(ls /usr/share/vulkan/icd.d/lvp_icd.*"$(uname -m)"*.json 2>/dev/null | head -n1 || true)
[ -n "$icd" ] || skip "no lavapipe ICD (mesa-vulkan-drivers)"

TEST_NAME=stacking
# shellcheck source=../common/scratch.sh
. "$(dirname "${BASH_SOURCE[0]}")/../common/scratch.sh"
fail() { echo "stacking: FAIL: $*" >&2; exit 1; }

# A world of its own: nothing of the caller's layers, caches or pcache settings.
mkdir -m 0700 "$scratch/run" "$scratch/home"
mkdir -p "$scratch/late/vulkan/implicit_layer.d" "$scratch/none"
cp "$build/share/vulkan/implicit_layer.d/VkLayer_pcache.json" "$scratch/late/vulkan/implicit_layer.d/"
socket=$scratch/run/pcache/socket
base=(env -i PATH="$PATH" HOME="$scratch/home" XDG_RUNTIME_DIR="$scratch/run"
      XDG_CONFIG_HOME="$scratch/home/.config" XDG_CACHE_HOME="$scratch/home/.cache"
      XDG_CONFIG_DIRS="$scratch/none" VK_ICD_FILENAMES="$icd" PCACHE_SOCKET="$socket"
      MESA_SHADER_CACHE_DISABLE=1 LC_ALL=C.UTF-8)

"$pcached" --socket "$socket" --data-dir "$scratch/data" 2>"$scratch/pcached.log" &
daemon_pid=$!
for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.05; done
[ -S "$socket" ] || { cat "$scratch/pcached.log" >&2; fail "pcached did not start"; }

# run NAME VAR=VALUE...: vkcube through the layer; echoes its report's
# "pipelines daemon_hits".
run() {
  local name=$1
  shift
  if ! "${base[@]}" "$@" PCACHE_LAYER=1 PCACHE_LAYER_STATS_FILE="$scratch/$name.stats" \
      xvfb-run -a -s '-screen 0 640x480x24' timeout 60 vkcube --c 20 \
      >"$scratch/$name.out" 2>&1; then
    cat "$scratch/$name.out" >&2
    fail "$name: vkcube failed"
  fi
  [ -s "$scratch/$name.stats" ] || { cat "$scratch/$name.out" >&2; fail "$name: no layer report"; }
  sed -n 's/^pcache-layer .* pipelines=\([0-9]*\) .* daemon_hits=\([0-9]*\) .*/\1 \2/p' \
    "$scratch/$name.stats" | head -n1
}

# vkcube alone, for its own count.
read -r alone _ < <(run alone XDG_DATA_HOME="$build/share" XDG_DATA_DIRS=/usr/local/share:/usr/share)
[ "${alone:-0}" -gt 0 ] || fail "vkcube alone: the layer saw no pipeline"

# pcache found first: above MangoHud and vkBasalt.
read -r first _ < <(run first XDG_DATA_HOME="$build/share" XDG_DATA_DIRS=/usr/local/share:/usr/share \
  MANGOHUD=1 ENABLE_VKBASALT=1)
echo "pcache found first: $first pipelines (vkcube alone: $alone)"
[ "$first" = "$alone" ] || fail "pcache above the other layers saw $first pipelines, not vkcube's $alone"

# pcache found last: below them, their pipelines are cached too.
late=(XDG_DATA_HOME="$scratch/none" XDG_DATA_DIRS="/usr/local/share:/usr/share:$scratch/late"
      MANGOHUD=1 ENABLE_VKBASALT=1)
read -r last1 _ < <(run last1 "${late[@]}")
read -r last2 hits2 < <(run last2 "${late[@]}")
echo "pcache found last: $last1 pipelines, then $last2 with $hits2 daemon hits"
[ "$last1" -gt "$alone" ] || fail "pcache below the other layers saw only $last1 pipelines (vkcube: $alone)"
[ "$hits2" = "$last2" ] || fail "the second run had $hits2 daemon hits of $last2 pipelines"
echo "stacking: PASS"
