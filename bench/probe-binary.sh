#!/usr/bin/env bash
# probe-binary.sh - bench_binary's phases in order, in one fresh HOME whose
# ~/.cache holds the driver's disk cache at its defaults (nothing set):
# cold (fills it), warm x3, frombin x3, then emptied (the disk cache
# removed), and frombin with the disk cache off (__GL_SHADER_DISK_CACHE=0:
# a probe, the floor of a creation from binaries already in memory).
#
#   bench/probe-binary.sh BUILD_DIR [PIPELINES]     (default 256)
set -euo pipefail
B=$(cd "$1" && pwd)
N=${2:-256}
w=$(mktemp -d /tmp/pcache-binprobe.XXXXXX)
export HOME=$w/home
mkdir -p "$HOME/.cache"
unset XDG_CACHE_HOME __GL_SHADER_DISK_CACHE __GL_SHADER_DISK_CACHE_PATH MESA_SHADER_CACHE_DIR
run() {
  echo "# bench_binary $* --pipelines $N"
  "$B/bench/bench_binary" "$@" --pipelines "$N" --dir "$w/bin" |
    grep -Ev '^(device_name|vendor_id|device_id|driver_id|api_version)='
}
run --phase cold
for _ in 1 2 3; do run --phase warm; done
for _ in 1 2 3; do run --phase frombin; done
rm -rf "${HOME:?}/.cache"/*
run --phase emptied
rm -rf "${HOME:?}/.cache"/*
echo "# probe: the driver's disk cache off"
__GL_SHADER_DISK_CACHE=0 run --phase frombin
du -sh "$HOME/.cache" "$w/bin" 2>/dev/null || true
rm -rf "$w"
