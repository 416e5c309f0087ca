#!/usr/bin/env bash
# run-replay.sh - replay after a simulated driver update (issue 16,
# docs/replay.md), on the demo's heavy set (pcache-demo's N distinct PBR
# variants, as run-layer.sh's heavy set). Every launch is a fresh process
# with the driver's disk cache off. What it measures, keys replay_<key>:
#
#   launch   pcache-demo through libpcache and pcached: cold (empty store),
#            warm (REPEATS times, median), and the first launch after the
#            update once replay is done (first_*). Target: first launch
#            <= 1.3x warm (ratio_first_over_warm_*). launch_ms is the
#            process's wall time (instance, device, prefetch, creation,
#            exit), create_ms the creation of the N pipelines alone.
#   update   the cold run's store exported (pcachectl export), its driver
#            version lowered by one (bench_rekey), imported into a fresh
#            pcached; a client naming the real device key (bench_warm, one
#            pipeline of another set) sets the replay off. With
#            --self-detect no client names it: `pcachectl replay --detect`
#            (pcached's own probe of the drivers, as pcache-detect.path
#            runs it; the probe at pcached's start notes the key the same
#            way) sets it off, and the first launch after the update is
#            measured with the driver's disk cache at its defaults (an
#            empty XDG_CACHE_HOME of its own, as a new driver's cache is),
#            against warm launches with it at its defaults too (their own
#            XDG_CACHE_HOME, warmed by one launch first): first_default_*,
#            warm_default_*, ratio_first_over_warm_default_launch (issue
#            29's target: <= 1.2). With --fill-driver-cache the replayer
#            builds with the driver's disk cache on
#            (PCACHE_REPLAY_DRIVER_CACHE=1) in the XDG_CACHE_HOME the first
#            launch then uses: whether the replay can warm the driver's own
#            cache too.
#   replay   throughput with 1 thread and with THREADS (default: pcached's
#            own choice, half the cores, at most 4): pcache-replay's own
#            time (its "built N pipelines in T ms" line, which pcached
#            relays into its log) and the wall time to the end of
#            `pcachectl replay --wait`; pipelines/s and per core (/threads).
#            Against compiling the same pipelines directly with as many
#            threads (pcache-demo --plain --threads T, no cache), run just
#            before each replay, ROUNDS times. Target: replay >= 80% of
#            direct (ratio_replay_tT_over_direct_tT, the median of the
#            rounds' ratios; replay_rounds_tT_ratios lists them). With
#            --probes, each round then compiles them again in a scrambled
#            order (--shuffle), every other one into an empty cache of its
#            own (--alternate --fresh-caches, as the replayer must) or with
#            a layout and render pass made for it (--alternate
#            --fresh-objects, as the replayer makes them from a
#            description), and each destroyed as soon as it is made
#            (--destroy-each, as a replayer that kept none alive would):
#            direct_shuffled_*, direct_fresh_*, direct_objects_*,
#            direct_destroyed_*; direct_fresh_*_cost and
#            direct_objects_*_cost are the probed half's time per pipeline
#            over the other half's, in one process. item_* say where a
#            replayed item's time went (ms, summed over threads: claim,
#            decode, objects, compile, data, upload) and, as totals, how
#            many shader modules the threads made and reused and the
#            process's page faults and context switches;
#            direct_tT_minor_faults is the program's page faults.
#            PCACHE_REPLAY_QUIET_MS=0 here, so the client that sets it off
#            does not hold it back, and PCACHE_REPLAY_PSI=100 (the throttle
#            off: the psi part measures it; an idle machine never engages it).
#   fg       a foreground app (bench_warm's mixed set, FG_N pipelines, all
#            compiled: an app pcache has not seen) alone (twice, the mean)
#            and while a replay (every setting at its default)
#            runs, through pcached (mode d: pcached sees it and pauses the
#            replay) and without pcache (mode a: pcached cannot see it; the
#            replayer's nice 19 and SCHED_IDLE are all that keeps out of
#            its way). The replay's progress during each is reported.
#   psi      replay throughput (the throttle on) with no hogs, then while
#            CPU hogs (busy loops at normal priority) run on half the
#            cores, then on every core, each until the replay ends or for
#            PSI_S seconds: the slowdown factor
#            (replay_psi_<k>hogs_slowdown = rate without / rate with k).
#
#   run-replay.sh --build-dir DIR [--heavy N] [--threads T] [--fg N]
#                 [--psi-seconds S] [--work-dir DIR] [--rounds R]
#                 [--throughput-only] [--probes] [--concurrent] [--self-detect]
#                 [--fill-driver-cache]
#
# --rounds: direct-then-replay pairs per thread count (default 3; the
# ratio is their median). --concurrent: each round's direct compile runs
# beside its replay, started as the replay is, instead of just before it:
# the lent machines' speed drifts by up to half from one run to the next
# (bench/HISTORY.md, 2026-11-27, session 8), and two runs at the same
# time see the same machine. With T threads each, they share 2T cores.
# --throughput-only stops after launch, direct and replay (no fg, no
# psi).
#
# Env: PCACHED, BENCH_BIN (as run-warm.sh), DRIVER_KIND, REPEATS (3);
# PCACHE_REPLAY_TEST_DEVICE reaches the replayer (docs/replay.md).
# Needs, in the build tree: daemon/pcached and daemon/pcache-replay,
# tools/pcachectl, examples/pcache-demo, bench/bench_warm, bench/bench_rekey.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD_DIR=""
WORK_DIR=""
HEAVY=256
THREADS=""
FG_N=256
PSI_S=10
REPEATS=${REPEATS:-3}
ROUNDS=3
THROUGHPUT_ONLY=0
PROBES=0
CONCURRENT=0
SELF_DETECT=0
FILL_DRIVER_CACHE=0
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --heavy) HEAVY=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --fg) FG_N=$2; shift 2 ;;
    --psi-seconds) PSI_S=$2; shift 2 ;;
    --work-dir) WORK_DIR=$2; shift 2 ;;
    --throughput-only) THROUGHPUT_ONLY=1; shift ;;
    --probes) PROBES=1; shift ;;
    --concurrent) CONCURRENT=1; shift ;;
    --self-detect) SELF_DETECT=1; shift ;;
    --fill-driver-cache) FILL_DRIVER_CACHE=1; shift ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    -h|--help) sed -n '2,70p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$BUILD_DIR" ] || { echo "--build-dir is required" >&2; exit 2; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "--rounds must be 1 or more" >&2; exit 2; }
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
WORK_DIR=${WORK_DIR:-$BUILD_DIR/bench-work/replay}
mkdir -p "$WORK_DIR"
# shellcheck source=lib.sh
. "$HERE/lib.sh"
HOGS=()
stop_hogs() {
  local p
  for p in "${HOGS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${HOGS[@]}"; do wait "$p" 2>/dev/null || true; done
  HOGS=()
}
trap 'stop_hogs; stop_daemon' EXIT
DEMO=$BUILD_DIR/examples/pcache-demo
CTL=$BUILD_DIR/tools/pcachectl
REKEY=$BENCH_BIN/bench_rekey
for f in "$DEMO" "$CTL" "$REKEY" "$BUILD_DIR/daemon/pcache-replay" "$BENCH_BIN/bench_warm"; do
  [ -x "$f" ] || die "no $f"
done
cores=$(nproc)
if [ -z "$THREADS" ]; then
  THREADS=$((cores / 2)); [ "$THREADS" -ge 1 ] || THREADS=1; [ "$THREADS" -le 4 ] || THREADS=4
fi

probe_driver
echo "driver_kind=$DRIVER_KIND"
echo "replay_cores=$cores"
echo "replay_heavy_n=$HEAVY"
echo "replay_psi_cpu_some_avg10_at_start=$(sed -n 's/^some avg10=\([0-9.]*\).*/\1/p' /proc/pressure/cpu 2>/dev/null || echo na)"
OFF=$(cache_off)
APP=pcache-bench-replay

now_ms() { echo $(($(date +%s%N) / 1000000)); }
# median X...: of the numbers among them ("na" and empty ones left out).
median() {
  printf '%s\n' "$@" | { grep -E '^[0-9.]+([eE][-+]?[0-9]+)?$' || true; } | sort -g |
    awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "na" }'
}

# demo OUT ARGS...: one launch of the heavy set against the daemon; the
# wall time goes into OUT as launch_ms.
# DISK, when set, replaces the disk cache's setting ($OFF) with its own
# assignments (env(1) form).
demo() {
  local out=$1 t0; shift
  t0=$(now_ms)
  # shellcheck disable=SC2086
  env -u PCACHE_LAYER -u __GL_SHADER_DISK_CACHE -u __GL_SHADER_DISK_CACHE_PATH -u XDG_CACHE_HOME \
    ${DISK:-$OFF} PCACHE_SOCKET="$DAEMON_SOCKET" "$DEMO" --pipelines "$HEAVY" --app-name "$APP" "$@" \
    >"$out" 2>"$out.err" || { cat "$out.err" >&2; die "pcache-demo $* failed"; }
  echo "launch_ms=$(($(now_ms) - t0))" >>"$out"
}

# fg MODE OUT: the foreground app, bench_warm's mixed set, every pipeline
# compiled (a fresh app name each time, a store that never saw the set).
FG_K=0
fg() {
  local mode=$1 out=$2
  FG_K=$((FG_K + 1))
  # shellcheck disable=SC2086
  env -u __GL_SHADER_DISK_CACHE -u __GL_SHADER_DISK_CACHE_PATH $OFF \
    PCACHE_SOCKET="${DAEMON_SOCKET:-/nonexistent}" "$BENCH_BIN/bench_warm" --mode "$mode" \
    --phase measure --n "$FG_N" --app "pcache-bench-fg-$FG_K" >"$out" 2>"$out.err" ||
    { cat "$out.err" >&2; die "bench_warm --mode $mode failed"; }
}

# progress KEY: a field of the (one) replay in pcachectl status --json.
progress() {
  "$CTL" --socket "$DAEMON_SOCKET" --json status |
    tr -d ' \n' | sed -n "s/.*\"replay\":\[{[^]]*\"$1\":\([a-z0-9]*\).*/\1/p"
}

# updated NAME THREADS [pcached env...]: a fresh pcached holding only the
# update's old-key store, and the client that names the new key. The
# replay is under way when it returns.
updated() {
  local name=$1 threads=$2; shift 2
  # The replayer inherits pcached's environment: the driver's disk cache
  # as a user has it (no setting, its default place under
  # XDG_CACHE_HOME), empty, as after a driver update (a directory of its
  # own: none of an earlier run's hits).
  rm -rf "$WORK_DIR/xdg-$name"
  mkdir -p "$WORK_DIR/xdg-$name"
  PCACHED_ENV=("PCACHE_REPLAY_THREADS=$threads" "XDG_CACHE_HOME=$WORK_DIR/xdg-$name" "$@")
  # --fill-driver-cache: the replayer builds with the driver's disk cache
  # on, in the directory the first launch will use.
  if [ "$FILL_DRIVER_CACHE" = 1 ]; then PCACHED_ENV+=(PCACHE_REPLAY_DRIVER_CACHE=1); fi
  LAST_XDG=$WORK_DIR/xdg-$name
  start_daemon_env "$name"
  "$CTL" --socket "$DAEMON_SOCKET" import "$WORK_DIR/old.pca" >"$WORK_DIR/import-$name.txt" ||
    die "import failed"
  if [ "$SELF_DETECT" = 1 ]; then
    # No client: pcached's probe of the drivers finds the new key.
    "$CTL" --socket "$DAEMON_SOCKET" --timeout 120 replay --detect >"$WORK_DIR/detect-$name.txt" ||
      die "pcachectl replay --detect failed: $(cat "$WORK_DIR/detect-$name.txt")"
    grep -q '^1 replay pending$' "$WORK_DIR/detect-$name.txt" ||
      die "pcached's probe started no replay: $(cat "$WORK_DIR/detect-$name.txt")"
    return 0
  fi
  # shellcheck disable=SC2086
  env $OFF PCACHE_SOCKET="$DAEMON_SOCKET" "$BENCH_BIN/bench_warm" --mode d --phase measure --n 1 \
    --app pcache-bench-replay-touch >"$WORK_DIR/touch-$name.txt" 2>&1 || die "touch failed"
}

# start_daemon with pcached's environment from PCACHED_ENV and its log at
# info (the replayer's timing line).
PCACHED_ENV=()
start_daemon_env() {
  local v
  for v in "${PCACHED_ENV[@]}"; do export "${v?}"; done
  : >"$WORK_DIR/pcached-$1.log"
  start_daemon "$1" --log-level info
  for v in "${PCACHED_ENV[@]}"; do unset "${v%%=*}"; done
}

# replayer_ms LOG: pcache-replay's own time, summed over its runs, and the
# pipelines it built ("built N pipelines in T ms").
replayer_sum() {
  sed -n 's/.*replay: built \([0-9]*\) pipelines in \([0-9.]*\) ms.*/\1 \2/p' "$1" |
    awk '{ n += $1; ms += $2 } END { printf "%d %.1f\n", n, ms }'
}

# --- launch: cold, warm; the update's store
start_daemon replay-src --log-level info
demo "$WORK_DIR/cold.txt"
# Every pipeline compiled, or found in the driver's own in-memory cache
# (driver first: two variants the driver compiles alike; the second is
# served from the first within the process, as it is in every launch).
cold_built=$(($(kv "$WORK_DIR/cold.txt" compiles) + $(kv "$WORK_DIR/cold.txt" driver_hits)))
[ "$cold_built" = "$HEAVY" ] || die "the cold launch compiled or found $cold_built of $HEAVY"
echo "replay_cold_compiles=$(kv "$WORK_DIR/cold.txt" compiles)"
echo "replay_cold_driver_hits=$(kv "$WORK_DIR/cold.txt" driver_hits)"
w_launch=() w_create=()
for k in $(seq 1 "$REPEATS"); do
  demo "$WORK_DIR/warm.txt"
  w_launch+=("$(kv "$WORK_DIR/warm.txt" launch_ms)"); w_create+=("$(kv "$WORK_DIR/warm.txt" create_ms)")
  echo "replay_warm_repeat${k}_launch_ms=${w_launch[-1]} create_ms=${w_create[-1]} daemon_hits=$(kv "$WORK_DIR/warm.txt" daemon_hits)"
done
# What the cold run staged (docs/client.md "Staging": on NVIDIA its misses)
# is built by the replayer before the store is exported.
echo "replay_cold_builds_ms=$(wait_builds)"
rm -f "$WORK_DIR/export.pca"
"$CTL" --socket "$DAEMON_SOCKET" export "$WORK_DIR/export.pca" --app "$APP" >/dev/null
stop_daemon
"$REKEY" "$WORK_DIR/export.pca" "$WORK_DIR/old.pca" | sed 's/^/replay_/'
cold_launch=$(kv "$WORK_DIR/cold.txt" launch_ms); cold_create=$(kv "$WORK_DIR/cold.txt" create_ms)
warm_launch=$(median "${w_launch[@]}"); warm_create=$(median "${w_create[@]}")
echo "replay_cold_launch_ms=$cold_launch"
echo "replay_cold_create_ms=$cold_create"
echo "replay_warm_launch_ms=$warm_launch"
echo "replay_warm_create_ms=$warm_create"

# probes ROUND T: after a round's replay, the program's compile again in
# a fixed scrambled order (pcache-demo --shuffle; the replay takes an
# app's pipelines by state hash, an order unrelated to the app's), with
# every other pipeline into an empty VkPipelineCache of its own, its data
# read back (--fresh-caches, as the replayer must to get a pipeline's own
# blob) or with its sampler, layouts and render pass made for it alone
# (--fresh-objects), and with each destroyed once made (--destroy-each):
# what each alone costs the driver.
probes() {
  local round=$1 t=$2 kind f
  for kind in shuffled fresh objects destroyed; do
    f=$WORK_DIR/direct-$kind-t$t.txt
    case $kind in
      shuffled) set -- --shuffle ;;
      # Within one process, every other pipeline (--alternate): a
      # compile's time moves by up to half from one process to the next,
      # but not between two halves of one run.
      fresh) set -- --alternate --fresh-caches ;;
      objects) set -- --alternate --fresh-objects ;;
      destroyed) set -- --destroy-each ;;
    esac
    direct "$t" "$f" "$@"
    echo "replay_round${round}_direct_${kind}_t${t}_create_ms=$(kv "$f" create_ms)"
    if [ "$1" = --alternate ]; then
      # What the probe costs a pipeline: probed half over unprobed half.
      echo "replay_round${round}_direct_${kind}_t${t}_cost=$(ratio "$(kv "$f" \
        alternate_probed_ms_per_pipeline)" "$(kv "$f" alternate_unprobed_ms_per_pipeline)")"
    fi
  done
}

# --- direct against replay, ROUNDS times: in each round, for each thread
# count, the same pipelines compiled by the app itself (pcache-demo
# --plain --threads T, no cache), then replayed with T threads. The
# driver's disk cache as a user has it on both sides, in its default place
# under an empty XDG_CACHE_HOME: the first compiles after a driver update.
# A compile's time varies by up to half from run to run on the lent GPU
# machines, so each round's ratio pairs runs made next to each other, and
# the target's ratio is the median over the rounds.
# direct T [OUT [ARGS...]]: the program's compile with T threads (and
# pcache-demo's ARGS), under an empty XDG_CACHE_HOME, into OUT
# (direct-tT.txt).
direct() {
  local t=$1 out=${2:-$WORK_DIR/direct-t$1.txt}
  shift $(($# < 2 ? $# : 2))
  rm -rf "$WORK_DIR/xdg-direct-t$t" && mkdir -p "$WORK_DIR/xdg-direct-t$t"
  DISK="XDG_CACHE_HOME=$WORK_DIR/xdg-direct-t$t" demo "$out" --plain --threads "$t" "$@"
}
tlist="1"; [ "$THREADS" -gt 1 ] && tlist="1 $THREADS"
declare -A round_ratios direct_all
first_launches=() warm_launches=() first_ratios=()
for round in $(seq 1 "$ROUNDS"); do
for t in $tlist; do
  direct_pid=""
  if [ "$CONCURRENT" = 1 ]; then
    updated "replay-t$t" "$t" PCACHE_REPLAY_QUIET_MS=0 PCACHE_REPLAY_PSI=100
    direct "$t" &
    direct_pid=$!
  else
    direct "$t"
    updated "replay-t$t" "$t" PCACHE_REPLAY_QUIET_MS=0 PCACHE_REPLAY_PSI=100
  fi
  t0=$(now_ms)
  "$CTL" --socket "$DAEMON_SOCKET" replay --wait >/dev/null 2>&1 || die "replay --wait failed"
  wall=$(($(now_ms) - t0))
  if [ -n "$direct_pid" ]; then wait "$direct_pid" || die "the direct compile failed"; fi
  direct_ms=$(kv "$WORK_DIR/direct-t$t.txt" create_ms)
  direct_rate=$(awk -v n="$HEAVY" -v ms="$direct_ms" 'BEGIN { printf "%.3f\n", n * 1000 / ms }')
  direct_all[$t]="${direct_all[$t]:-} $direct_ms"
  echo "replay_round${round}_direct_t${t}_create_ms=$direct_ms"
  echo "replay_round${round}_direct_t${t}_pipelines_per_s=$direct_rate"
  echo "replay_round${round}_direct_t${t}_minor_faults=$(kv "$WORK_DIR/direct-t$t.txt" minor_faults)"
  [ "$(progress finished)" = true ] || die "the replay did not finish"
  # Its timing line comes as it exits, just after the replay finished.
  for _ in $(seq 1 200); do
    grep -q "replay: built" "$WORK_DIR/pcached-replay-t$t.log" && [ "$(progress running)" = false ] && break
    sleep 0.05
  done
  done_n=$(progress "done"); failed_n=$(progress failed)
  read -r built ms < <(replayer_sum "$WORK_DIR/pcached-replay-t$t.log")
  rate=$(awk -v n="$built" -v ms="$ms" 'BEGIN { if (ms > 0) printf "%.3f\n", n * 1000 / ms; else print "na" }')
  r=$(ratio "$rate" "$direct_rate")
  round_ratios[$t]="${round_ratios[$t]:-} $r"
  echo "replay_round${round}_t${t}_pipelines_per_s=$rate"
  echo "replay_round${round}_ratio_replay_t${t}_over_direct_t${t}=$r"
  if [ "$round" -eq "$ROUNDS" ]; then
    echo "replay_t${t}_done=$done_n"
    echo "replay_t${t}_failed=$failed_n"
    echo "replay_t${t}_built=$built"
    echo "replay_t${t}_replayer_ms=$ms"
    echo "replay_t${t}_wall_ms=$wall"
    echo "replay_t${t}_pipelines_per_s=$rate"
    echo "replay_t${t}_pipelines_per_s_per_core=$(ratio "$rate" "$t")"
    echo "replay_t${t}_wall_pipelines_per_s=$(awk -v n="$done_n" -v ms="$wall" 'BEGIN { printf "%.3f\n", n * 1000 / ms }')"
    # Where an item's time went, per item, summed over the threads (the
    # replayer's last run's line; ms).
    sed -n 's/.*replay: per item (ms): //p' "$WORK_DIR/pcached-replay-t$t.log" | tail -n 1 |
      sed 's/modules made/modules_made/; s/[;,]/ /g' |
      awk -v t="$t" '{ for (i = 1; i + 1 <= NF; i += 2) printf "replay_t%s_item_%s=%s\n", t, $i, $(i + 1) }'
  fi
  if [ "$t" = "${tlist##* }" ] && [ "$SELF_DETECT" = 1 ]; then
    # The first launch after the update, no program before it, the replay
    # done, and the driver's disk cache at its defaults (empty: a new
    # driver's); then warm launches with it at its defaults. Every round
    # (each its own update and replay): one first launch is one sample,
    # and a launch's wall time moves by tens of ms from one process to
    # the next; the ratio is the median of the rounds'.
    rm -rf "$WORK_DIR/xdg-first" "$WORK_DIR/xdg-warm"
    mkdir -p "$WORK_DIR/xdg-first" "$WORK_DIR/xdg-warm"
    first_xdg=$WORK_DIR/xdg-first
    [ "$FILL_DRIVER_CACHE" = 1 ] && first_xdg=$LAST_XDG
    DISK="XDG_CACHE_HOME=$first_xdg" demo "$WORK_DIR/first.txt"
    f=$WORK_DIR/first.txt
    # Where a launch's time went: instance and device, pcache's start
    # (connection, prefetch), the pipelines.
    echo "replay_round${round}_first_default launch_ms=$(kv "$f" launch_ms)" \
      "device_ms=$(kv "$f" device_ms) setup_ms=$(kv "$f" setup_ms) create_ms=$(kv "$f" create_ms)" \
      "daemon_hits=$(kv "$f" daemon_hits) compiles=$(kv "$f" compiles) driver_hits=$(kv "$f" driver_hits)"
    first_launches+=("$(kv "$f" launch_ms)")
    DISK="XDG_CACHE_HOME=$WORK_DIR/xdg-warm" demo "$WORK_DIR/warm-default.txt"
    wd=()
    for k in $(seq 1 "$REPEATS"); do
      f=$WORK_DIR/warm-default.txt
      DISK="XDG_CACHE_HOME=$WORK_DIR/xdg-warm" demo "$f"
      wd+=("$(kv "$f" launch_ms)")
      echo "replay_round${round}_warm_default_repeat$k launch_ms=$(kv "$f" launch_ms)" \
        "device_ms=$(kv "$f" device_ms) setup_ms=$(kv "$f" setup_ms) create_ms=$(kv "$f" create_ms)"
    done
    warm_launches+=("$(median "${wd[@]}")")
    first_ratios+=("$(ratio "${first_launches[-1]}" "${warm_launches[-1]}")")
    if [ "$round" -eq "$ROUNDS" ]; then
      echo "replay_first_default_launch_ms=$(median "${first_launches[@]}")"
      echo "replay_first_default_daemon_hits=$(kv "$WORK_DIR/first.txt" daemon_hits)"
      echo "replay_first_default_compiles=$(kv "$WORK_DIR/first.txt" compiles)"
      echo "replay_first_default_driver_hits=$(kv "$WORK_DIR/first.txt" driver_hits)"
      echo "replay_warm_default_launch_ms=$(median "${warm_launches[@]}")"
      echo "replay_rounds_first_over_warm_default_launch=$(echo "${first_ratios[@]}" | tr ' ' ',')"
      echo "replay_ratio_first_over_warm_default_launch=$(median "${first_ratios[@]}")"
    fi
  elif [ "$round" -eq "$ROUNDS" ] && [ "$t" = "${tlist##* }" ]; then
    # The first launch after the update, the replay done.
    demo "$WORK_DIR/first.txt"
    echo "replay_first_launch_ms=$(kv "$WORK_DIR/first.txt" launch_ms)"
    echo "replay_first_create_ms=$(kv "$WORK_DIR/first.txt" create_ms)"
    echo "replay_first_daemon_hits=$(kv "$WORK_DIR/first.txt" daemon_hits)"
    echo "replay_first_compiles=$(kv "$WORK_DIR/first.txt" compiles)"
    echo "replay_ratio_first_over_warm_launch=$(ratio "$(kv "$WORK_DIR/first.txt" launch_ms)" "$warm_launch")"
    echo "replay_ratio_first_over_warm_create=$(ratio "$(kv "$WORK_DIR/first.txt" create_ms)" "$warm_create")"
    echo "replay_ratio_cold_over_first_launch=$(ratio "$cold_launch" "$(kv "$WORK_DIR/first.txt" launch_ms)")"
  fi
  stop_daemon
  if [ "$PROBES" = 1 ]; then probes "$round" "$t"; fi
done
done
for t in $tlist; do
  # shellcheck disable=SC2086
  echo "replay_direct_t${t}_create_ms=$(median ${direct_all[$t]})"
  # The target's comparison: replay against the direct compile with the
  # same number of threads, the median of the rounds' ratios.
  # shellcheck disable=SC2086
  echo "replay_ratio_replay_t${t}_over_direct_t${t}=$(median ${round_ratios[$t]})"
  echo "replay_rounds_t${t}_ratios=$(echo ${round_ratios[$t]} | tr ' ' ',')"
done

[ "$THROUGHPUT_ONLY" = 1 ] && exit 0

# --- a foreground app, alone and during a replay
for mode in d a; do
  start_daemon "fg-alone-$mode"
  fg "$mode" "$WORK_DIR/fg-alone-$mode.txt"
  stop_daemon
  start_daemon "fg-alone2-$mode"
  fg "$mode" "$WORK_DIR/fg-alone2-$mode.txt"
  stop_daemon
  updated "fg-during-$mode" "$THREADS"
  for _ in $(seq 1 600); do [ "$(progress running)" = true ] && break; sleep 0.05; done
  d0=$(progress "done")
  fg "$mode" "$WORK_DIR/fg-during-$mode.txt"
  d1=$(progress "done"); fin=$(progress finished)
  stop_daemon
  a=$(awk -v x="$(kv "$WORK_DIR/fg-alone-$mode.txt" ms_per_pipeline)" \
    -v y="$(kv "$WORK_DIR/fg-alone2-$mode.txt" ms_per_pipeline)" 'BEGIN { printf "%.4f\n", (x + y) / 2 }')
  b=$(kv "$WORK_DIR/fg-during-$mode.txt" ms_per_pipeline)
  echo "replay_fg_${mode}_alone_ms_per_pipeline=$a"
  echo "replay_fg_${mode}_during_ms_per_pipeline=$b"
  echo "replay_fg_${mode}_ratio_during_over_alone=$(ratio "$b" "$a")"
  echo "replay_fg_${mode}_replayed_during=$((d1 - d0))"
  echo "replay_fg_${mode}_finished_during=$fin"
done

# --- CPU pressure: the replay's rate with no hogs, with hogs on half the
# cores, then on every core (the throttle on, as users have it); each
# window ends when the replay does or after PSI_S seconds.
psi_rates=()
for hogs in 0 $(( cores / 2 > 0 ? cores / 2 : 1 )) "$cores"; do
  updated "psi-$hogs" "$THREADS" PCACHE_REPLAY_QUIET_MS=0
  for _ in $(seq 1 600); do [ "$(progress running)" = true ] && break; sleep 0.05; done
  d0=$(progress "done"); t0=$(now_ms); end=$((t0 + PSI_S * 1000))
  for _ in $(seq 1 "$hogs"); do (while :; do :; done) & HOGS+=($!); done
  while [ "$(now_ms)" -lt "$end" ] && [ "$(progress finished)" != true ]; do sleep 0.1; done
  d1=$(progress "done"); t1=$(now_ms)
  psi=$(sed -n 's/^some avg10=\([0-9.]*\).*/\1/p' /proc/pressure/cpu 2>/dev/null || echo na)
  stop_hogs
  stop_daemon
  prate=$(awk -v n=$((d1 - d0)) -v ms=$((t1 - t0)) 'BEGIN { printf "%.3f\n", n * 1000 / ms }')
  psi_rates+=("$prate")
  echo "replay_psi_${hogs}hogs_cpu_some_avg10=$psi"
  echo "replay_psi_${hogs}hogs_replayed=$((d1 - d0))"
  echo "replay_psi_${hogs}hogs_window_ms=$((t1 - t0))"
  echo "replay_psi_${hogs}hogs_pipelines_per_s=$prate"
  echo "replay_psi_${hogs}hogs_slowdown=$(ratio "${psi_rates[0]}" "$prate")"
done
