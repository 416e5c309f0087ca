#!/usr/bin/env bash
# run-warm.sh - warm-start cost per pipeline, modes (a)-(e) side by side,
# each measure in a fresh process (bench/bench_warm.c says what each mode
# is). Prints key=value lines warm_n<N>_<mode>_<key>=... and the ratios.
#
#   run-warm.sh --build-dir DIR [--sizes "256 2048"] [--work-dir DIR]
#
# Env: PCACHED (the daemon binary), BENCH_BIN (dir of bench_warm),
# DRIVER_KIND (nvidia|mesa|other, else detected), BENCH_LONG_TIMEOUT_MS
# (client timeout of the dlong run, default 5000). The d and e runs use the
# client's default timeout (50 ms, or PCACHE_TIMEOUT_MS if the caller set it).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD_DIR=""
SIZES="256 2048"
WORK_DIR=""
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --work-dir) WORK_DIR=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$BUILD_DIR" ] || { echo "--build-dir is required" >&2; exit 2; }
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
WORK_DIR=${WORK_DIR:-$BUILD_DIR/bench-work}
mkdir -p "$WORK_DIR"
# shellcheck source=lib.sh
. "$HERE/lib.sh"
trap stop_daemon EXIT

probe_driver
echo "driver_kind=$DRIVER_KIND"

# One untimed process first, so the first measured mode does not pay for
# paging in the driver and its compiler.
# shellcheck disable=SC2046
env $(cache_off) "$BENCH_BIN/bench_warm" --mode a --phase measure --n 16 >/dev/null \
  || die "bench_warm warm-up failed"

# run_one LABEL N MODE PHASE ENV...: one fresh process of bench_warm; its
# output in warm-LABEL-N.txt; keys printed as warm_n<N>_<LABEL>_<key>.
run_one() {
  local label=$1 n=$2 mode=$3 phase=$4; shift 4
  local out=$WORK_DIR/warm-$label-$n.txt
  env "$@" "$BENCH_BIN/bench_warm" --mode "$mode" --phase "$phase" --n "$n" \
    --cache-file "$WORK_DIR/app-cache-$n.bin" --app "pcache-bench-warm-$n" >"$out" \
    2>"$WORK_DIR/warm-$label-$n.err" || {
    cat "$WORK_DIR/warm-$label-$n.err" >&2
    die "bench_warm $label (n=$n) failed"
  }
  for key in ms_per_pipeline total_ms setup_ms driver_hits hit_rate prefetched snapshot_loaded daemon_hits \
             compiles rejected_blobs uploaded upload_queue cache_bytes no_prefetch_env; do
    local v
    v=$(kv "$out" $key)
    if [ -n "$v" ]; then echo "warm_n${n}_${label}_${key}=$v"; fi
  done
  return 0
}

for n in $SIZES; do
  off=$(cache_off)
  # (a) no cache of any kind.
  # shellcheck disable=SC2086
  run_one a "$n" a measure $off
  # (b) the driver's disk cache, private dir: fill, then measure warm.
  dcache=$WORK_DIR/driver-cache-$n
  rm -rf "$dcache"; mkdir -p "$dcache"
  # shellcheck disable=SC2086
  run_one bfill "$n" b fill $(cache_on "$dcache") >/dev/null
  # shellcheck disable=SC2086
  run_one b "$n" b measure $(cache_on "$dcache")
  echo "warm_n${n}_b_driver_cache_kib=$(du -sk "$dcache" | cut -f1)"
  # (c) one app-level VkPipelineCache in a file; driver disk cache off.
  rm -f "$WORK_DIR/app-cache-$n.bin"
  # shellcheck disable=SC2086
  run_one cfill "$n" c fill $off >/dev/null
  # shellcheck disable=SC2086
  run_one c "$n" c measure $off
  # (d) and (e): a private pcached; the fill run uploads through libpcache.
  start_daemon "warm-$n"
  # shellcheck disable=SC2086
  run_one dfill "$n" d fill $off PCACHE_SOCKET="$DAEMON_SOCKET" | grep -E 'uploaded|upload_queue'
  # shellcheck disable=SC2086
  run_one d "$n" d measure $off PCACHE_SOCKET="$DAEMON_SOCKET"
  # (d) again with a long client timeout: what the prefetch can do when
  # the default 50 ms does not cut it short.
  # shellcheck disable=SC2086
  run_one dlong "$n" d measure $off PCACHE_SOCKET="$DAEMON_SOCKET" \
    PCACHE_TIMEOUT_MS="${BENCH_LONG_TIMEOUT_MS:-5000}"
  # shellcheck disable=SC2086
  run_one e "$n" e measure $off PCACHE_SOCKET="$DAEMON_SOCKET" PCACHE_NO_PREFETCH=1
  # (e) with the segment's blobs alone (no snapshot: each miss loads its
  # own blob), as before the first miss loaded the segment's snapshot.
  # shellcheck disable=SC2086
  run_one eblob "$n" e measure $off PCACHE_SOCKET="$DAEMON_SOCKET" PCACHE_NO_PREFETCH=1 \
    PCACHE_NO_SNAPSHOT=1
  # (e) and (d) over the socket alone, as before shared-memory segments.
  # shellcheck disable=SC2086
  run_one esock "$n" e measure $off PCACHE_SOCKET="$DAEMON_SOCKET" PCACHE_NO_PREFETCH=1 \
    PCACHE_NO_SEGMENT=1
  # shellcheck disable=SC2086
  run_one dsock "$n" d measure $off PCACHE_SOCKET="$DAEMON_SOCKET" PCACHE_NO_SEGMENT=1
  stop_daemon

  ms() { kv "$WORK_DIR/warm-$1-$n.txt" ms_per_pipeline; }
  echo "warm_n${n}_ratio_d_over_c=$(ratio "$(ms d)" "$(ms c)")"
  echo "warm_n${n}_ratio_a_over_d=$(ratio "$(ms a)" "$(ms d)")"
  echo "warm_n${n}_ratio_b_over_d=$(ratio "$(ms b)" "$(ms d)")"
  echo "warm_n${n}_ratio_e_over_c=$(ratio "$(ms e)" "$(ms c)")"
  echo "warm_n${n}_ratio_dlong_over_c=$(ratio "$(ms dlong)" "$(ms c)")"
  echo "warm_n${n}_ratio_eblob_over_c=$(ratio "$(ms eblob)" "$(ms c)")"
  echo "warm_n${n}_ratio_esock_over_c=$(ratio "$(ms esock)" "$(ms c)")"
  echo "warm_n${n}_ratio_dsock_over_c=$(ratio "$(ms dsock)" "$(ms c)")"
done
