#!/usr/bin/env bash
# probe-warm.sh BUILD_DIR [ROUNDS] - where a warm run's time goes, the
# light set (bench_warm, 2048 pipelines) with pcached holding what its
# first run staged and the replayer built (run-scenarios.sh's "warm"), the
# driver's disk cache at its defaults in a HOME of its own. Interleaved
# process by process, ROUNDS rounds (5): plain (mode a), libpcache (mode
# d), libpcache with the prefetch in pcache_device_create
# (PCACHE_PREFETCH=now; NVIDIA's default leaves it to the driver's first
# miss), libpcache with PCACHE_PIPELINES_APP (--app-owned), through the
# layer, and through the layer with PCACHE_PREFETCH=now. Each prints
# total_ms (bench_warm's span: libpcache's pcache_device_create is in it,
# the layer's work in vkCreateDevice is not: layer_setup_us, from its
# report), device_ms (instance and device creation), setup_ms (mode d's
# pcache_client_open and pcache_device_create), objects_ms and
# pipelines_ms (the two parts of the span after setup).
set -u
B=$(cd "$1" && pwd)
ROUNDS=${2:-5}
W=$(mktemp -d /tmp/pcache-probe-warm.XXXXXX)
mkdir -p "$W/home/.cache"
export BUILD_DIR=$B WORK_DIR=$W
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
layer_manifest "$W/share" "$B/layer/libVkLayer_pcache.so"
trap 'stop_daemon; rm -rf "$W"' EXIT
saved=$HOME; export HOME=$W/home
start_daemon warm
export HOME=$saved
# run MODE [VAR=VALUE...] [-- BENCH_WARM_ARGS...]
run() {
  local mode=$1 envs=() args=()
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  [ $# -gt 0 ] && shift && args=("$@")
  clean_env HOME="$W/home" XDG_DATA_HOME="$W/share" PCACHE_SOCKET="$DAEMON_SOCKET" "${envs[@]}" \
    "$B/bench/bench_warm" --mode "$mode" --phase measure --n 2048 --app pw "${args[@]}" \
    >"$W/out.txt" 2>"$W/err.txt"
  echo "total=$(kv "$W/out.txt" total_ms) device=$(kv "$W/out.txt" device_ms)" \
    "layer_setup_us=$(layer_kv "$W/err.txt" setup_us)" \
    "setup=$(kv "$W/out.txt" setup_ms) objects=$(kv "$W/out.txt" objects_ms)" \
    "pipelines=$(kv "$W/out.txt" pipelines_ms) prefetched=$(kv "$W/out.txt" prefetched)" \
    "snapshot=$(kv "$W/out.txt" snapshot_loaded)"
}
# As run-scenarios.sh's warm: libpcache's first run ever, its driver
# cache empty, compiles what it misses and stages it (on NVIDIA), and the
# replayer builds it into the store; then one plain run.
run d >/dev/null
echo "probe_warm_first: $(cat "$W/out.txt" | tr '\n' ' ')"
echo "probe_warm_builds_ms=$(wait_builds)"
run a PCACHE_DISABLE=1 >/dev/null
for k in $(seq 1 "$ROUNDS"); do
  echo "round $k plain: $(run a PCACHE_DISABLE=1)"
  echo "round $k lib: $(run d)"
  echo "round $k lib_prefetch_now: $(run d PCACHE_PREFETCH=now)"
  echo "round $k lib_app_owned: $(run d -- --app-owned)"
  echo "round $k layer: $(run a PCACHE_LAYER=1 PCACHE_LAYER_STATS=1)"
  echo "round $k layer_prefetch_now: $(run a PCACHE_LAYER=1 PCACHE_LAYER_STATS=1 PCACHE_PREFETCH=now)"
done
