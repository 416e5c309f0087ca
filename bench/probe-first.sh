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
  rm -rf "$W/home-$2"
  mkdir -p "$W/home-$2/.cache"
  pair_run "$1" "$2" "$W/home-$2" first
}
for set in $SETS; do
  pair_rounds first "$set" "$ROUNDS" 0
done
