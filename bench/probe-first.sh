#!/usr/bin/env bash
# probe-first.sh BUILD_DIR [ROUNDS] - the first run ever, interleaved round
# by round so that the machine's swing between processes falls on both
# sides alike: each round runs the plain program in a fresh HOME (the
# driver's disk cache empty, at its defaults) and the same program through
# the layer in another fresh HOME with an empty pcached, for the heavy set
# (pcache-demo --plain, 256) and the light set (bench_warm mode a, 2048).
# One line a round, then the medians and their ratios as key=value.
set -eu
B=$(cd "$1" && pwd)
ROUNDS=${2:-5}
HEAVY=${HEAVY:-256}
LIGHT=${LIGHT:-2048}
W=$(mktemp -d /tmp/pcache-probe-first.XXXXXX)
BUILD_DIR=$B WORK_DIR=$W
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
trap 'stop_daemon; rm -rf "$W"' EXIT
layer_manifest "$W/share" "$B/layer/libVkLayer_pcache.so"
# one SET CLIENT: one process in a fresh HOME; prints ms per pipeline.
one() {
  local set=$1 client=$2
  local home=$W/home-$client args envs=()
  rm -rf "$home"; mkdir -p "$home/.cache"
  if [ "$set" = heavy ]; then
    args=("$B/examples/pcache-demo" --plain --pipelines "$HEAVY" --app-name first-heavy)
  else
    args=("$B/bench/bench_warm" --mode a --phase measure --n "$LIGHT" --app first-light)
  fi
  if [ "$client" = layer ]; then
    start_daemon "first-$set"
    daemon_settle
    envs=(PCACHE_LAYER=1 PCACHE_SOCKET="$DAEMON_SOCKET")
  else
    envs=(PCACHE_DISABLE=1)
  fi
  env -u XDG_CACHE_HOME -u __GL_SHADER_DISK_CACHE -u MESA_SHADER_CACHE_DIR HOME="$home" \
    XDG_DATA_HOME="$W/share" PCACHE_LAYER_FLUSH_MS=60000 "${envs[@]}" "${args[@]}" 2>/dev/null |
    sed -n 's/^ms_per_pipeline=//p'
  [ "$client" = layer ] && stop_daemon
  return 0
}
for set in heavy light; do
  p=() l=()
  for k in $(seq 1 "$ROUNDS"); do
    p+=("$(one "$set" plain)")
    l+=("$(one "$set" layer)")
    echo "# first_$set round $k: plain ${p[-1]} layer ${l[-1]}"
  done
  mp=$(median "${p[@]}"); ml=$(median "${l[@]}")
  echo "first_${set}_plain_ms=$mp"
  echo "first_${set}_layer_ms=$ml"
  echo "first_${set}_ratio=$(ratio "$ml" "$mp")"
done
