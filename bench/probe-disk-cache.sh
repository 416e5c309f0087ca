#!/usr/bin/env bash
# probe-disk-cache.sh - what the driver's own shader disk cache gives a
# plain program under each way a user may have it configured, on the heavy
# set (pcache-demo --plain: N distinct PBR variants). For each
# configuration: a first run fills the cache, the size of what it wrote is
# printed, then REPEATS fresh runs measure it. Keys:
#   diskprobe_<config>_fill_ms_per_pipeline, _bytes, _files,
#   diskprobe_<config>_ms_per_pipeline (median), _driver_hits
# Configurations (NVIDIA's variables; Mesa's drivers ignore them):
#   default      nothing set, a scratch HOME (the driver's own path, size
#                limit and clean-up)
#   desktop      the same, but the HOME has a ~/.cache, as a user's has
#   skipcleanup  a scratch HOME, __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1
#   bigsize      a scratch HOME, __GL_SHADER_DISK_CACHE_SIZE=8 GiB
#   path         __GL_SHADER_DISK_CACHE_PATH=scratch, nothing else
#   pathskip     the path and SKIP_CLEANUP=1 (what run-layer.sh's disk
#                mode uses)
#   pathskipapp  the same, the program passing an empty cache of its own
#
#   probe-disk-cache.sh --build-dir DIR [--pipelines N] [--work-dir DIR]
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD_DIR=""
WORK_DIR=""
N=256
REPEATS=${REPEATS:-3}
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --pipelines) N=$2; shift 2 ;;
    --work-dir) WORK_DIR=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$BUILD_DIR" ] || { echo "--build-dir is required" >&2; exit 2; }
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
WORK_DIR=${WORK_DIR:-$BUILD_DIR/bench-work/diskprobe}
mkdir -p "$WORK_DIR"
# shellcheck source=lib.sh
. "$HERE/lib.sh"
DEMO=${DEMO:-$BUILD_DIR/examples/pcache-demo}

# one CONFIG OUT [--app] : a fresh process with CONFIG's environment
one() {
  local config=$1 out=$2 app=${3:-} dir=$WORK_DIR/$1
  local args=("$DEMO" --plain --pipelines "$N") envs=(HOME="$dir/home")
  [ -n "$app" ] && { rm -f "$dir/empty.bin"; args+=(--cache-file "$dir/empty.bin"); }
  case $config in
    skipcleanup) envs+=(__GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1) ;;
    bigsize) envs+=(__GL_SHADER_DISK_CACHE_SIZE=8589934592) ;;
    path) envs+=(__GL_SHADER_DISK_CACHE_PATH="$dir/cache") ;;
    pathskip*) envs+=(__GL_SHADER_DISK_CACHE_PATH="$dir/cache" __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1) ;;
  esac
  env -u __GL_SHADER_DISK_CACHE -u __GL_SHADER_DISK_CACHE_PATH -u __GL_SHADER_DISK_CACHE_SIZE \
    -u __GL_SHADER_DISK_CACHE_SKIP_CLEANUP -u XDG_CACHE_HOME -u PCACHE_LAYER \
    "${envs[@]}" "${args[@]}" >"$out" 2>"$out.err" || { cat "$out.err" >&2; die "$config failed"; }
}

for config in default desktop skipcleanup bigsize path pathskip pathskipapp; do
  dir=$WORK_DIR/$config
  rm -rf "$dir"; mkdir -p "$dir/home" "$dir/cache"
  [ "$config" = desktop ] && mkdir -p "$dir/home/.cache"
  app=""; [ "$config" = pathskipapp ] && app=1
  one "$config" "$dir/fill.txt" "$app"
  echo "diskprobe_${config}_fill_ms_per_pipeline=$(kv "$dir/fill.txt" ms_per_pipeline)"
  echo "diskprobe_${config}_bytes=$(du -sb "$dir" | cut -f1)"
  echo "diskprobe_${config}_files=$(find "$dir" -type f ! -name '*.txt*' ! -name empty.bin | wc -l)"
  find "$dir" -type d | sed "s|^$WORK_DIR/|# dir |" | head -n 8
  ms=()
  for _ in $(seq 1 "$REPEATS"); do
    one "$config" "$dir/measure.txt" "$app"
    ms+=("$(kv "$dir/measure.txt" ms_per_pipeline)")
  done
  echo "diskprobe_${config}_ms_per_pipeline=$(median "${ms[@]}")"
  echo "diskprobe_${config}_driver_hits=$(kv "$dir/measure.txt" driver_cache_hits)"
done
