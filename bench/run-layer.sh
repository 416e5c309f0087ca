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
#   diskdef, diskdefapp (heavy set) the same two, but with the driver's
#          defaults (its own path under a scratch HOME, its size limit and
#          clean-up): what a user who sets nothing gets
#   lwarmapp (heavy set) the layer warm, the program passing an empty
#          VkPipelineCache of its own (the layer fills it as it serves)
#   layersave, savedfile (heavy set) the layer warm with the program's
#          own cache file, then that file without the layer: it must hold
#          the program's pipelines (savedfile_driver_hits = N)
#   libdisk (heavy set) pcache-demo through libpcache with no daemon
#          (--no-daemon) and the driver's disk cache warm: libpcache's miss
#          path (a fresh cache per pipeline, its data read back) on top of a
#          disk-cache hit
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
layer_bench_setup

# run SET N MODE OUT ENV...: one process of the set's program, without the
# layer unless the ENV says PCACHE_LAYER=1.
run() {
  local set=$1 n=$2 mode=$3 out=$4; shift 4
  local args=()
  if [ "$set" = heavy ]; then
    args=("$DEMO" --plain --pipelines "$n")
    case $mode in
      file*) args+=(--cache-file "$WORK_DIR/app-cache-heavy-$n.bin") ;;
      diskapp | diskdefapp | lwarmapp)
        rm -f "$WORK_DIR/empty-cache.bin"; args+=(--cache-file "$WORK_DIR/empty-cache.bin") ;;
      libdisk*) args=("$DEMO" --no-daemon --pipelines "$n") ;;
      layersave | savedfile) args+=(--cache-file "$WORK_DIR/saved-by-layer.bin") ;;
    esac
  else
    local m=a
    case $mode in disk*) m=b ;; file*) m=c ;; esac
    args=("$BENCH_BIN/bench_warm" --mode "$m" --phase measure --n "$n"
          --cache-file "$WORK_DIR/app-cache-light-$n.bin" --app "pcache-bench-layer-$n")
    case $mode in filefill) args[4]=fill ;; esac
  fi
  clean_env XDG_DATA_HOME="$share" "$@" "${args[@]}" >"$out" 2>"$out.err" ||
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
  # heavy set: the driver's defaults (a scratch HOME, nothing else set) and
  # libpcache with no daemon over the disk cache, each filled by a first run
  local dhome=$WORK_DIR/home-$set-$n ldcache=$WORK_DIR/driver-cache-lib-$set-$n
  if [ "$set" = heavy ]; then
    rm -rf "$dhome" "$ldcache"; mkdir -p "$dhome" "$ldcache"
    run "$set" "$n" diskdeffill "$WORK_DIR/$set-diskdeffill.txt" HOME="$dhome"
    # shellcheck disable=SC2086
    run "$set" "$n" libdiskfill "$WORK_DIR/$set-libdiskfill.txt" $(cache_on "$ldcache")
  fi
  local xdef=() xdefapp=() xapp=() xlapp=() xlib=()
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
      run "$set" "$n" diskdef "$WORK_DIR/$set-diskdef.txt" HOME="$dhome"
      run "$set" "$n" diskdefapp "$WORK_DIR/$set-diskdefapp.txt" HOME="$dhome"
      # shellcheck disable=SC2086
      run "$set" "$n" lwarmapp "$WORK_DIR/$set-lwarmapp.txt" $off $lenv
      # shellcheck disable=SC2086
      run "$set" "$n" libdisk "$WORK_DIR/$set-libdisk.txt" $(cache_on "$ldcache")
      xapp+=("$(per_ms "$WORK_DIR/$set-diskapp.txt")")
      xdef+=("$(per_ms "$WORK_DIR/$set-diskdef.txt")")
      xdefapp+=("$(per_ms "$WORK_DIR/$set-diskdefapp.txt")")
      xlapp+=("$(per_ms "$WORK_DIR/$set-lwarmapp.txt")")
      xlib+=("$(per_ms "$WORK_DIR/$set-libdisk.txt")")
      echo "${p}_repeat${k}_diskapp=${xapp[-1]} diskdef=${xdef[-1]} diskdefapp=${xdefapp[-1]}" \
        "lwarmapp=${xlapp[-1]} libdisk=${xlib[-1]}"
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
  if [ "$set" = heavy ]; then
    local mapp mdef mdefapp mlapp
    mapp=$(median "${xapp[@]}"); mdef=$(median "${xdef[@]}"); mdefapp=$(median "${xdefapp[@]}")
    mlapp=$(median "${xlapp[@]}")
    echo "${p}_diskapp_ms_per_pipeline=$mapp"
    echo "${p}_diskdef_ms_per_pipeline=$mdef"
    echo "${p}_diskdefapp_ms_per_pipeline=$mdefapp"
    echo "${p}_lwarmapp_ms_per_pipeline=$mlapp"
    echo "${p}_libdisk_ms_per_pipeline=$(median "${xlib[@]}")"
    echo "${p}_diskdeffill_ms_per_pipeline=$(per_ms "$WORK_DIR/$set-diskdeffill.txt")"
    echo "${p}_lwarmapp_driver_hits=$(kv "$WORK_DIR/$set-lwarmapp.txt" driver_cache_hits)"
    # Saving its cache: the layer gives the program's cache its pipelines'
    # entries when it reads them, so the save of lwarmapp pays for them.
    echo "${p}_diskapp_cache_save_ms=$(kv "$WORK_DIR/$set-diskapp.txt" cache_save_ms)"
    echo "${p}_lwarmapp_cache_save_ms=$(kv "$WORK_DIR/$set-lwarmapp.txt" cache_save_ms)"
    echo "${p}_lwarmapp_cache_data_bytes=$(kv "$WORK_DIR/$set-lwarmapp.txt" cache_data_bytes)"
    # ... and the file it saved serves a later run without the layer.
    local saved=$WORK_DIR/saved-by-layer.bin
    rm -f "$saved"
    # shellcheck disable=SC2086
    run "$set" "$n" layersave "$WORK_DIR/$set-layersave.txt" $off $lenv
    # shellcheck disable=SC2086
    run "$set" "$n" savedfile "$WORK_DIR/$set-savedfile.txt" $off
    echo "${p}_savedfile_bytes=$(kv "$WORK_DIR/$set-savedfile.txt" cache_loaded_bytes)"
    echo "${p}_savedfile_driver_hits=$(kv "$WORK_DIR/$set-savedfile.txt" driver_cache_hits)"
    echo "${p}_savedfile_ms_per_pipeline=$(per_ms "$WORK_DIR/$set-savedfile.txt")"
    # each disk-cache mode against the layer serving the same kind of program
    echo "${p}_ratio_diskapp_over_lwarmapp=$(ratio "$mapp" "$mlapp")"
    echo "${p}_ratio_diskdef_over_lwarm=$(ratio "$mdef" "$ml")"
    echo "${p}_ratio_diskdefapp_over_lwarmapp=$(ratio "$mdefapp" "$mlapp")"
  fi
  echo "${p}_overhead_us_per_hit=$(awk -v l="$(median "${clwarm[@]}")" -v f="$(median "${cfile[@]}")" \
    -v n="$n" 'BEGIN { printf "%.2f\n", (l - f) * 1000 / n }')"
}

# --heavy 0 or --light 0 leaves a set out
if [ "$HEAVY" -gt 0 ]; then one_set heavy "$HEAVY"; fi
if [ "$LIGHT" -gt 0 ]; then one_set light "$LIGHT"; fi
