#!/usr/bin/env bash
# probe-first.sh BUILD_DIR [ROUNDS] - the first run ever, interleaved round
# by round so that the machine's swing between processes falls on both
# sides alike: each round runs the plain program in a fresh HOME (the
# driver's disk cache empty, at its defaults) and the same program through
# each client in another fresh HOME with an empty pcached, for the heavy
# set (pcache-demo --plain, 256) and the light set (bench_warm mode a,
# 2048). CLIENTS (default "layer"): layer, lib (pcache-demo / bench_warm
# mode d) and lib-app (the same with PCACHE_PIPELINES_APP, --app-owned);
# SETS (default "heavy light"). One line a round, then the medians and
# their ratios (the median of the rounds' ratios) as key=value.
set -eu
B=$(cd "$1" && pwd)
ROUNDS=${2:-5}
HEAVY=${HEAVY:-256}
LIGHT=${LIGHT:-2048}
CLIENTS=${CLIENTS:-layer}
SETS=${SETS:-heavy light}
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
  local owned=()
  [ "$client" = lib-app ] && owned=(--app-owned)
  case $set/$client in
    heavy/lib | heavy/lib-app | heavy/lib-norep)
      args=("$B/examples/pcache-demo" "${owned[@]}" --pipelines "$HEAVY" --app-name first-heavy) ;;
    heavy/*) args=("$B/examples/pcache-demo" --plain --pipelines "$HEAVY" --app-name first-heavy) ;;
    light/lib | light/lib-app | light/lib-norep)
      args=("$B/bench/bench_warm" --mode d "${owned[@]}" --phase measure --n "$LIGHT" --app first-light) ;;
    *) args=("$B/bench/bench_warm" --mode a --phase measure --n "$LIGHT" --app first-light) ;;
  esac
  case $client in
    plain) envs=(PCACHE_DISABLE=1) ;;
    lib-norep)
      PCACHE_REPLAYER=true start_daemon "first-$set"
      daemon_settle
      envs=(PCACHE_SOCKET="$DAEMON_SOCKET")
      ;;
    layer | lib | lib-app)
      start_daemon "first-$set"
      daemon_settle
      envs=(PCACHE_SOCKET="$DAEMON_SOCKET")
      [ "$client" = layer ] && envs+=(PCACHE_LAYER=1)
      ;;
  esac
  env -u XDG_CACHE_HOME -u __GL_SHADER_DISK_CACHE -u MESA_SHADER_CACHE_DIR HOME="$home" \
    XDG_DATA_HOME="$W/share" PCACHE_LAYER_FLUSH_MS=60000 "${envs[@]}" "${args[@]}" 2>/dev/null |
    sed -n 's/^ms_per_pipeline=//p'
  [ "$client" = plain ] || stop_daemon
  return 0
}
for set in $SETS; do
  p=()
  declare -A ms=() ratios=()
  for k in $(seq 1 "$ROUNDS"); do
    p+=("$(one "$set" plain)")
    line="# first_$set round $k: plain ${p[-1]}"
    for c in $CLIENTS; do
      v=$(one "$set" "$c")
      ms[$c]="${ms[$c]:-} $v"
      ratios[$c]="${ratios[$c]:-} $(ratio "$v" "${p[-1]}")"
      line+=" $c $v"
    done
    echo "$line"
  done
  echo "first_${set}_plain_ms=$(median "${p[@]}")"
  for c in $CLIENTS; do
    # shellcheck disable=SC2086
    echo "first_${set}_${c}_ms=$(median ${ms[$c]})"
    # shellcheck disable=SC2086
    echo "first_${set}_${c}_ratio=$(median ${ratios[$c]})"
  done
  unset ms ratios
done
