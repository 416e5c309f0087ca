#!/usr/bin/env bash
# probe-light.sh BUILD_DIR [ROUNDS] - the light set's warm cost through the
# layer, interleaved process by process so that the machine's swing falls
# on every mode alike: bench_warm mode a (2048 pipelines, the driver's disk
# cache warm at its defaults in a HOME of its own) plain, through the
# layer, through the layer with driver first off, with the layer loaded but
# disabled (PCACHE_DISABLE=1: pass-through), and through the layer with
# no prefetch or snapshot; ROUNDS rounds (5), one line each.
set -u
B=$(cd "$1" && pwd)
ROUNDS=${2:-5}
W=$(mktemp -d /tmp/pcache-probe-light.XXXXXX)
mkdir -p $W/home/.cache $W/run; chmod 700 $W/run
BUILD_DIR=$B WORK_DIR=$W
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
layer_manifest "$W/share" "$B/layer/libVkLayer_pcache.so"
$B/daemon/pcached --socket $W/run/sock --data-dir $W/data --log-level warn & dpid=$!
sleep 0.5
run() { env HOME=$W/home XDG_DATA_HOME=$W/share PCACHE_SOCKET=$W/run/sock "$@" $B/bench/bench_warm --mode a --phase measure --n 2048 --app lp 2>/dev/null | sed -n 's/^ms_per_pipeline=//p'; }
run PCACHE_DISABLE=1 >/dev/null; run PCACHE_DISABLE=1 >/dev/null
for k in $(seq 1 "$ROUNDS"); do
  echo "round $k plain=$(run PCACHE_DISABLE=1) layer=$(run PCACHE_LAYER=1) layer_nodf=$(run PCACHE_LAYER=1 PCACHE_DRIVER_FIRST=0) layer_disabled=$(run PCACHE_LAYER=1 PCACHE_DISABLE=1) layer_noprefetch=$(run PCACHE_LAYER=1 PCACHE_NO_PREFETCH=1 PCACHE_NO_SNAPSHOT=1)"
done
kill $dpid
wait $dpid 2>/dev/null
rm -rf "$W"
