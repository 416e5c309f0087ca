#!/usr/bin/env bash
# run-layer.sh - a plain Vulkan program (no pcache code at all) served by
# the Vulkan layer, side by side with what it has without pcache, on two
# pipeline sets, every measure a fresh process:
#   heavy  pcache-demo --plain: N distinct PBR variants (each its own
#          light count, so each compiles for long)
#   light  bench_warm's mixed set (modules shared by many variants)
# Modes:
#   cold   no cache of any kind (the driver's disk cache off)
#   disk   the driver's own disk cache, warm (filled by a first run)
#   file   the app's own VkPipelineCache file (filled by a first run)
#   lcold  the layer with an empty pcached: compiles and uploads
#   lwarm  the layer, the same pcached, a new process (driver disk cache off)
#   diskapp (heavy set) the driver's disk cache, warm, with the program
#          passing an empty VkPipelineCache of its own
# The warm modes are measured REPEATS times (default 3); the median is
# reported. Keys: layer_<set>_n<N>_<mode>_<key>=..., then the ratios the
# issue's targets are stated in, and the layer's overhead per hit in us.
#
#   run-layer.sh --build-dir DIR [--heavy N] [--light N] [--work-dir DIR]
#
# Env: PCACHED, BENCH_BIN (as run-warm.sh), DRIVER_KIND, REPEATS.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD_DIR=""
WORK_DIR=""
HEAVY=256
LIGHT=2048
REPEATS=${REPEATS:-3}
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --heavy) HEAVY=$2; shift 2 ;;
    --light) LIGHT=$2; shift 2 ;;
    --work-dir) WORK_DIR=$2; shift 2 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$BUILD_DIR" ] || { echo "--build-dir is required" >&2; exit 2; }
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
WORK_DIR=${WORK_DIR:-$BUILD_DIR/bench-work/layer}
mkdir -p "$WORK_DIR"
# shellcheck source=lib.sh
. "$HERE/lib.sh"
trap stop_daemon EXIT
DEMO=${DEMO:-$BUILD_DIR/examples/pcache-demo}
LAYER_LIB=$BUILD_DIR/layer/libVkLayer_pcache.so
[ -x "$DEMO" ] || die "no $DEMO"
[ -f "$LAYER_LIB" ] || die "no $LAYER_LIB"

# The layer's manifest, naming this build's library, where the loader
# looks for implicit layers under XDG_DATA_HOME.
share=$WORK_DIR/share
mkdir -p "$share/vulkan/implicit_layer.d"
cat >"$share/vulkan/implicit_layer.d/VkLayer_pcache.json" <<JSON
{ "file_format_version": "1.2.0",
  "layer": { "name": "VK_LAYER_PCACHE_pipeline_cache", "type": "GLOBAL",
             "library_path": "$LAYER_LIB", "api_version": "1.3.239",
             "implementation_version": "1", "description": "pcache (bench)",
             "enable_environment": { "PCACHE_LAYER": "1" },
             "disable_environment": { "PCACHE_LAYER_DISABLE": "1" } } }
JSON

probe_driver
echo "driver_kind=$DRIVER_KIND"

# median of the arguments
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# run SET N MODE OUT ENV...: one process of the set's program, without the
# layer unless the ENV says PCACHE_LAYER=1.
run() {
  local set=$1 n=$2 mode=$3 out=$4; shift 4
  local args=()
  if [ "$set" = heavy ]; then
    args=("$DEMO" --plain --pipelines "$n")
    case $mode in
      file*) args+=(--cache-file "$WORK_DIR/app-cache-heavy-$n.bin") ;;
      diskapp) rm -f "$WORK_DIR/empty-cache.bin"; args+=(--cache-file "$WORK_DIR/empty-cache.bin") ;;
    esac
  else
    local m=a
    case $mode in disk*) m=b ;; file*) m=c ;; esac
    args=("$BENCH_BIN/bench_warm" --mode "$m" --phase measure --n "$n"
          --cache-file "$WORK_DIR/app-cache-light-$n.bin" --app "pcache-bench-layer-$n")
    case $mode in filefill) args[4]=fill ;; esac
  fi
  env -u PCACHE_LAYER XDG_DATA_HOME="$share" "$@" "${args[@]}" >"$out" 2>"$out.err" ||
    { cat "$out.err" >&2; die "$set $mode (n=$n) failed"; }
}

# the per-pipeline time and start-up of one output, for either program
per_ms() { kv "$1" ms_per_pipeline; }
startup() { kv "$1" startup_ms; }

one_set() {
  local set=$1 n=$2 off dcache
  local p="layer_${set}_n${n}"
  off=$(cache_off)
  # cold
  # shellcheck disable=SC2086
  run "$set" "$n" cold "$WORK_DIR/$set-cold.txt" $off
  echo "${p}_cold_ms_per_pipeline=$(per_ms "$WORK_DIR/$set-cold.txt")"
  echo "${p}_cold_startup_ms=$(startup "$WORK_DIR/$set-cold.txt")"
  # disk: fill, then measure
  dcache=$WORK_DIR/driver-cache-$set-$n
  rm -rf "$dcache"; mkdir -p "$dcache"
  # shellcheck disable=SC2086
  run "$set" "$n" diskfill "$WORK_DIR/$set-diskfill.txt" $(cache_on "$dcache")
  # file: fill (the heavy demo saves at exit; bench_warm's fill phase)
  rm -f "$WORK_DIR/app-cache-$set-$n.bin"
  # shellcheck disable=SC2086
  run "$set" "$n" filefill "$WORK_DIR/$set-filefill.txt" $off
  # the layer: an empty daemon, one cold run that uploads
  start_daemon "layer-$set-$n"
  local lenv="PCACHE_LAYER=1 PCACHE_SOCKET=$DAEMON_SOCKET PCACHE_APP_NAME=bench-layer-$set-$n"
  # shellcheck disable=SC2086
  run "$set" "$n" lcold "$WORK_DIR/$set-lcold.txt" $off $lenv \
    PCACHE_LAYER_STATS_FILE="$WORK_DIR/$set-lcold.stats" PCACHE_LAYER_FLUSH_MS=60000
  echo "${p}_lcold_ms_per_pipeline=$(per_ms "$WORK_DIR/$set-lcold.txt")"
  sed 's/^/# /' "$WORK_DIR/$set-lcold.stats"
  # the warm modes, interleaved, REPEATS times
  local disk=() file=() lwarm=() sdisk=() sfile=() slwarm=() cdisk=() cfile=() clwarm=()
  for k in $(seq 1 "$REPEATS"); do
    # shellcheck disable=SC2086
    run "$set" "$n" disk "$WORK_DIR/$set-disk.txt" $(cache_on "$dcache")
    # shellcheck disable=SC2086
    run "$set" "$n" file "$WORK_DIR/$set-file.txt" $off
    # The driver's disk cache again, but the program passes a VkPipelineCache
    # of its own (empty): does the disk cache serve it as fast?
    if [ "$set" = heavy ]; then
      # shellcheck disable=SC2086
      run "$set" "$n" diskapp "$WORK_DIR/$set-diskapp.txt" $(cache_on "$dcache")
      echo "${p}_repeat${k}_diskapp=$(per_ms "$WORK_DIR/$set-diskapp.txt")"
    fi
    rm -f "$WORK_DIR/$set-lwarm.stats"
    # shellcheck disable=SC2086
    run "$set" "$n" lwarm "$WORK_DIR/$set-lwarm.txt" $off $lenv \
      PCACHE_LAYER_STATS_FILE="$WORK_DIR/$set-lwarm.stats"
    [ "$k" = 1 ] && sed 's/^/# /' "$WORK_DIR/$set-lwarm.stats"
    disk+=("$(per_ms "$WORK_DIR/$set-disk.txt")"); sdisk+=("$(startup "$WORK_DIR/$set-disk.txt")")
    file+=("$(per_ms "$WORK_DIR/$set-file.txt")"); sfile+=("$(startup "$WORK_DIR/$set-file.txt")")
    lwarm+=("$(per_ms "$WORK_DIR/$set-lwarm.txt")")
    slwarm+=("$(startup "$WORK_DIR/$set-lwarm.txt")")
    # creation alone (no device, no cache load): the driver's cost of a hit
    cfile+=("$(kv "$WORK_DIR/$set-file.txt" create_ms)$(kv "$WORK_DIR/$set-file.txt" total_ms)")
    clwarm+=("$(kv "$WORK_DIR/$set-lwarm.txt" create_ms)$(kv "$WORK_DIR/$set-lwarm.txt" total_ms)")
    echo "${p}_repeat${k}_disk=${disk[-1]} file=${file[-1]} lwarm=${lwarm[-1]}"
  done
  stop_daemon
  local md mf ml smd smf sml
  md=$(median "${disk[@]}"); mf=$(median "${file[@]}"); ml=$(median "${lwarm[@]}")
  smd=$(median "${sdisk[@]}"); smf=$(median "${sfile[@]}"); sml=$(median "${slwarm[@]}")
  echo "${p}_disk_ms_per_pipeline=$md"
  echo "${p}_file_ms_per_pipeline=$mf"
  echo "${p}_lwarm_ms_per_pipeline=$ml"
  echo "${p}_disk_startup_ms=$smd"
  echo "${p}_file_startup_ms=$smf"
  echo "${p}_lwarm_startup_ms=$sml"
  echo "${p}_lwarm_driver_hits=$(kv "$WORK_DIR/$set-lwarm.txt" driver_cache_hits)$(kv "$WORK_DIR/$set-lwarm.txt" driver_hits)"
  # The targets: warm through the layer <= 1.3x the app's own file (start-up,
  # each paying for its own cache), >= 100x faster than cold and >= 10x
  # faster than the driver's disk cache (per pipeline), and the layer's cost
  # per hit beyond the driver's (creation alone, layer vs file, in us).
  echo "${p}_ratio_lwarm_over_file_startup=$(ratio "$sml" "$smf")"
  echo "${p}_ratio_lwarm_over_file=$(ratio "$ml" "$mf")"
  echo "${p}_ratio_cold_over_lwarm=$(ratio "$(per_ms "$WORK_DIR/$set-cold.txt")" "$ml")"
  echo "${p}_ratio_disk_over_lwarm=$(ratio "$md" "$ml")"
  echo "${p}_overhead_us_per_hit=$(awk -v l="$(median "${clwarm[@]}")" -v f="$(median "${cfile[@]}")" \
    -v n="$n" 'BEGIN { printf "%.2f\n", (l - f) * 1000 / n }')"
}

one_set heavy "$HEAVY"
one_set light "$LIGHT"
