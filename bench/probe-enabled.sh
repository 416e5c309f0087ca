#!/usr/bin/env bash
# probe-enabled.sh BUILD_DIR [ROUNDS] - the first run after enabling pcache
# over a warm driver cache, paired round by round. run-scenarios.sh has
# one such run a repeat, set against one plain warm run, and a light-set
# process varies by a third between runs on the H200; this pairs many.
# One HOME (the driver's disk cache at its defaults) is warmed by two
# plain runs of each set; then ROUNDS (8) rounds of: a plain warm run, and
# for each client a run against a fresh, empty pcached (what enabling
# pcache gives a user whose driver cache is warm), the order of plain and
# the clients turned round every other round. SETS (heavy light): the
# heavy set (pcache-demo, HEAVY=256) and the light set (bench_warm,
# LIGHT=2048); CLIENTS (layer lib lib-app), as in probe-first.sh. One line
# a round, then the medians and their ratios (the median of the rounds'
# ratios) as key=value.
set -eu
B=$(cd "$1" && pwd)
ROUNDS=${2:-8}
HEAVY=${HEAVY:-256}
LIGHT=${LIGHT:-2048}
CLIENTS=${CLIENTS:-layer lib lib-app}
SETS=${SETS:-heavy light}
W=$(mktemp -d /tmp/pcache-probe-enabled.XXXXXX)
BUILD_DIR=$B WORK_DIR=$W
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
trap 'stop_daemon; rm -rf "$W"' EXIT
layer_manifest "$W/share" "$B/layer/libVkLayer_pcache.so"
mkdir -p "$W/home/.cache"

# one SET CLIENT: one process in the warm HOME; prints ms per pipeline.
one() { pair_run "$1" "$2" "$W/home" enabled; }

for set in $SETS; do
  one "$set" plain >/dev/null # the driver's cache, filled
  one "$set" plain >/dev/null
  pair_rounds enabled "$set" "$ROUNDS" 1
done
