#!/usr/bin/env bash
# run-scenarios.sh - what pcache costs or saves a user, scenario by
# scenario, against the same program with no pcache and the driver's disk
# cache at its defaults (a HOME with a ~/.cache, nothing set): the user's
# baseline. Each side has a HOME of its own; each repeat of a scenario
# that starts from nothing starts from nothing again (a new HOME, a new
# store). The two sides run in pairs, side by side: in each of REPEATS (3)
# repeats a client's runs sit next to plain runs of the same scenario
# (first runs one after the other, WARM_RUNS (3) warm processes a side
# taken in turn, the emptied runs together, and for "enabled" the
# program's own warm run just before pcache was enabled). A ratio is the
# median of the repeats' ratios; an ms figure the median of the repeats'.
# A machine that drifts over the minutes a set takes (it did: up to 0.74
# between two runs of the same code) moves both sides of a pair alike.
#
# Scenarios (key infix):
#   first     first run ever: empty driver cache, empty store
#   enabled   first run after enabling pcache over a warm driver cache
#             (the program ran twice without pcache first); set against
#             the second of those, a plain warm run
#   warm      the driver's cache and the store warm
#   emptied   the driver's cache emptied (same driver), the store warm
#   relearned (after "enabled") the driver's cache emptied: what the store
#             learned from a run the driver's cache served (staged builds,
#             docs/client.md "Staging"); scen_<set>_<client>_speedup_relearned
# Between a run and the next, the daemon's staged builds are waited for,
# as a user's machine has done them by the next launch; the wait is
# printed (scen_<set>_<client>_builds_ms: background work, not the
# program's). pcached runs with the HOME of the program, as a user's does,
# so that its replayer fills the same driver disk cache.
#   fleet     (--fleet, with redis-server on the PATH) a fleet's second
#             machine: pcached A (a publisher) and B (a reader that trusts
#             A's key) on stores of their own share one Redis; the program
#             runs once on A; B's pcached starts after A pushed, syncs
#             from the fleet and has its replayer build what it staged
#             (docs/fleet.md "Sync"; the wait, from B's start to the end of
#             both, is scen_<set>_<client>_fleet_sync_ms), as on a machine
#             that booted before the launch; then the program runs for the
#             first time on B (its own driver cache filled only by B's
#             replayer): its launch (wall time of the process) against B's
#             warm launches, scen_<set>_<client>_ratio_fleet_launch
#             (target: at most 1.3)
# Programs: heavy = pcache-demo's N distinct PBR variants (--plain without
# pcache and through the layer; libpcache's own demo for "lib"), light =
# bench_warm's mixed set (mode a without pcache and through the layer, mode
# d for "lib"); "lib-app" is libpcache with PCACHE_PIPELINES_APP
# (pcache-demo and bench_warm --app-owned). A figure per pipeline holds
# pcache's own start-up (the layer's work in vkCreateDevice, setup_us in
# its report; libpcache's pcache_device_create) divided over the set's
# pipelines: the program pays it. Keys: scen_<set>_<client>_<scenario>_ms (per pipeline),
# scen_<set>_plain_<scenario>_ms, then the ratios
# scen_<set>_<client>_ratio_<scenario> = pcache / plain (first, enabled,
# warm: at most 1.05, 1.1 and 1.05 are the targets) and
# scen_<set>_<client>_speedup_emptied = plain / pcache. The driver-update
# and fleet scenarios are run-replay.sh's and bench_fleet.sh's.
#
#   run-scenarios.sh --build-dir DIR [--heavy N] [--light N] [--work-dir DIR]
#                    [--clients "layer lib"] [--fleet | --fleet-only]
#
# Env: PCACHED, BENCH_BIN (lib.sh), REPEATS, WARM_RUNS.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD_DIR="" WORK_DIR="" HEAVY=256 LIGHT=2048 CLIENTS="layer lib" FLEET=0 ONLY_FLEET=0
REPEATS=${REPEATS:-3} WARM_RUNS=${WARM_RUNS:-3}
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --heavy) HEAVY=$2; shift 2 ;;
    --light) LIGHT=$2; shift 2 ;;
    --work-dir) WORK_DIR=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --fleet) FLEET=1; shift ;;
    --fleet-only) FLEET=1 ONLY_FLEET=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "run-scenarios.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
done
[ -n "$BUILD_DIR" ] || { echo "run-scenarios.sh: --build-dir is required" >&2; exit 2; }
[ "$REPEATS" -ge 1 ] && [ "$WARM_RUNS" -ge 1 ] ||
  { echo "run-scenarios.sh: REPEATS and WARM_RUNS must be at least 1" >&2; exit 2; }
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
WORK_DIR=${WORK_DIR:-$BUILD_DIR/bench-work/scenarios}
mkdir -p "$WORK_DIR"
WORK_DIR=$(cd "$WORK_DIR" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"
trap stop_daemon EXIT
layer_bench_setup

# run SET N CLIENT HOME OUT: one process. CLIENT: plain, layer or lib. The
# driver's disk cache is at its defaults under HOME; nothing else is set.
run() {
  local set=$1 n=$2 client=$3 home=$4 out=$5 args=() envs=()
  if [ "$set" = heavy ]; then
    case $client in
      lib) args=("$DEMO" --pipelines "$n" --app-name "scen-heavy") ;;
      lib-app) args=("$DEMO" --app-owned --pipelines "$n" --app-name "scen-heavy") ;;
      *) args=("$DEMO" --plain --pipelines "$n" --app-name "scen-heavy") ;;
    esac
  else
    case $client in
      lib) args=("$BENCH_BIN/bench_warm" --mode d --phase measure --n "$n" --app scen-light) ;;
      lib-app) args=("$BENCH_BIN/bench_warm" --mode d --app-owned --phase measure --n "$n" --app scen-light) ;;
      *) args=("$BENCH_BIN/bench_warm" --mode a --phase measure --n "$n" --app scen-light) ;;
    esac
  fi
  case $client in
    plain) envs=(PCACHE_DISABLE=1) ;;
    layer) envs=(PCACHE_LAYER=1 PCACHE_LAYER_STATS=1 PCACHE_SOCKET="$DAEMON_SOCKET" PCACHE_APP_NAME="scen-$set") ;;
    lib | lib-app) envs=(PCACHE_SOCKET="$DAEMON_SOCKET" PCACHE_APP_NAME="scen-$set") ;;
  esac
  clean_env -u MESA_SHADER_CACHE_DIR -u MESA_SHADER_CACHE_DISABLE -u PCACHE_DISABLE \
    HOME="$home" XDG_DATA_HOME="$share" PCACHE_LAYER_FLUSH_MS=60000 "${envs[@]}" \
    "${args[@]}" >"$out" 2>"$out.err" || { cat "$out.err" >&2; die "$set $client failed"; }
}
# ms FILE: ms per pipeline, pcache's own start-up included: the layer's
# (setup_us in its report: spent in vkCreateDevice, outside the program's
# pipeline span) and pcache-demo's (setup_ms: pcache_device_create, outside
# create_ms); bench_warm's span (total_ms) holds libpcache's already.
ms() {
  local f=$1 span n setup=0 u
  span=$(kv "$f" create_ms); n=$(kv "$f" pipelines)
  if [ -z "$span" ]; then span=$(kv "$f" total_ms); n=$(kv "$f" n); fi
  u=$(layer_kv "$f.err" setup_us)
  if [ -n "$u" ]; then
    setup=$(awk -v u="$u" 'BEGIN { print u / 1000 }')
  elif [ -n "$(kv "$f" setup_ms)" ] && [ -z "$(kv "$f" mode)" ]; then
    setup=$(kv "$f" setup_ms) # pcache-demo through libpcache
  fi
  awk -v t="$span" -v s="$setup" -v n="$n" 'BEGIN { printf "%.5g\n", (t + s) / n }'
}
# count FILE KEY: a counter from the program's output, or for a program
# through the layer, from the layer's report on its stderr.
count() {
  local v
  v=$(kv "$1" "$2")
  [ -n "$v" ] || v=$(layer_kv "$1.err" "$2")
  echo "${v:-0}"
}
fresh_home() { rm -rf "$1"; mkdir -p "$1/.cache"; }
# start_daemon_home HOME NAME [args...]: pcached (and the replayer it
# spawns) with the program's HOME and the driver's cache at its defaults.
start_daemon_home() {
  local home=$1 saved=$HOME v saved_env=()
  shift
  for v in XDG_CACHE_HOME __GL_SHADER_DISK_CACHE __GL_SHADER_DISK_CACHE_PATH \
    __GL_SHADER_DISK_CACHE_SIZE MESA_SHADER_CACHE_DIR MESA_SHADER_CACHE_DISABLE; do
    if [ -n "${!v+x}" ]; then saved_env+=("$v=${!v}"); unset "$v"; fi
  done
  export HOME=$home
  start_daemon "$@"
  daemon_settle
  export HOME=$saved
  for v in "${saved_env[@]}"; do export "${v?}"; done
}
# The driver's own cache emptied; pcache's store is not under HOME.
empty_driver_cache() { rm -rf "${1:?}/.cache"; mkdir -p "$1/.cache"; }

one_set() {
  local set=$1 n=$2 p="scen_$1" hp=$WORK_DIR/home-plain-$1
  local pfa=() pwa=() pea=()
  for client in $CLIENTS; do
    local cf=() ce=() cw=() cx=() cr=() bf=() be=() q="${p}_${client}" hc=$WORK_DIR/home-$client-$set
    local rf=() re=() rw=() rx=() rr=()
    for k in $(seq 1 "$REPEATS"); do
      local pf pw pe pb i w_p=() w_c=()
      # First run ever, both sides from nothing, one after the other (in
      # turn, the plain one first in odd repeats); the daemon's builds
      # after pcache's first run are waited for before anything else runs.
      fresh_home "$hp"
      fresh_home "$hc"
      start_daemon_home "$hc" "scen-$set-$client"
      if [ $((k % 2)) = 1 ]; then
        run "$set" "$n" plain "$hp" "$WORK_DIR/plain-first.txt"
        run "$set" "$n" "$client" "$hc" "$WORK_DIR/$client-first.txt"
        bf+=("$(wait_builds)")
      else
        run "$set" "$n" "$client" "$hc" "$WORK_DIR/$client-first.txt"
        bf+=("$(wait_builds)")
        run "$set" "$n" plain "$hp" "$WORK_DIR/plain-first.txt"
      fi
      pf=$(ms "$WORK_DIR/plain-first.txt"); cf+=("$(ms "$WORK_DIR/$client-first.txt")")
      # Warm: WARM_RUNS processes a side, alternating, each side's median.
      for i in $(seq 1 "$WARM_RUNS"); do
        run "$set" "$n" plain "$hp" "$WORK_DIR/plain-warm.txt"
        w_p+=("$(ms "$WORK_DIR/plain-warm.txt")")
        run "$set" "$n" "$client" "$hc" "$WORK_DIR/$client-warm.txt"
        w_c+=("$(ms "$WORK_DIR/$client-warm.txt")")
      done
      pw=$(median "${w_p[@]}"); cw+=("$(median "${w_c[@]}")")
      # The driver's cache emptied on both sides; pcache's store stays.
      empty_driver_cache "$hp"
      empty_driver_cache "$hc"
      run "$set" "$n" plain "$hp" "$WORK_DIR/plain-emptied.txt"
      run "$set" "$n" "$client" "$hc" "$WORK_DIR/$client-emptied.txt"
      pe=$(ms "$WORK_DIR/plain-emptied.txt"); cx+=("$(ms "$WORK_DIR/$client-emptied.txt")")
      stop_daemon
      # Enabling pcache over a warm driver cache: the program ran before,
      # twice; its second run, warm, is this scenario's plain side.
      fresh_home "$hc"
      run "$set" "$n" plain "$hc" "$WORK_DIR/$client-before.txt"
      run "$set" "$n" plain "$hc" "$WORK_DIR/$client-before-warm.txt"
      pb=$(ms "$WORK_DIR/$client-before-warm.txt")
      start_daemon_home "$hc" "scen-$set-$client-enabled"
      run "$set" "$n" "$client" "$hc" "$WORK_DIR/$client-enabled.txt"
      ce+=("$(ms "$WORK_DIR/$client-enabled.txt")")
      be+=("$(wait_builds)")
      # what the store learned from that run: the driver's cache emptied
      empty_driver_cache "$hc"
      run "$set" "$n" "$client" "$hc" "$WORK_DIR/$client-relearned.txt"
      cr+=("$(ms "$WORK_DIR/$client-relearned.txt")")
      stop_daemon
      pfa+=("$pf"); pwa+=("$pw"); pea+=("$pe")
      rf+=("$(ratio "${cf[-1]}" "$pf")"); re+=("$(ratio "${ce[-1]}" "$pb")")
      rw+=("$(ratio "${cw[-1]}" "$pw")"); rx+=("$(ratio "$pe" "${cx[-1]}")")
      rr+=("$(ratio "$pe" "${cr[-1]}")")
      echo "# $q repeat $k (pcache / plain): first ${cf[-1]} / $pf = ${rf[-1]};" \
        "enabled ${ce[-1]} / $pb = ${re[-1]}; warm ${cw[-1]} / $pw = ${rw[-1]}" \
        "(runs ${w_c[*]} / ${w_p[*]}); emptied ${cx[-1]} / $pe = ${rx[-1]}x faster;" \
        "relearned ${cr[-1]} (enabled run: driver hits" \
        "$(count "$WORK_DIR/$client-enabled.txt" driver_hits)," \
        "staged=$(count "$WORK_DIR/$client-enabled.txt" staged)," \
        "compiles=$(count "$WORK_DIR/$client-enabled.txt" compiles); first run staged" \
        "$(count "$WORK_DIR/$client-first.txt" staged); relearned run compiles" \
        "$(count "$WORK_DIR/$client-relearned.txt" compiles); builds waited ${bf[-1]} and ${be[-1]} ms)"
    done
    echo "${q}_first_ms=$(median "${cf[@]}")"
    echo "${q}_enabled_ms=$(median "${ce[@]}")"
    echo "${q}_warm_ms=$(median "${cw[@]}")"
    echo "${q}_emptied_ms=$(median "${cx[@]}")"
    echo "${q}_relearned_ms=$(median "${cr[@]}")"
    echo "${q}_builds_first_ms=$(median "${bf[@]}")"
    echo "${q}_builds_enabled_ms=$(median "${be[@]}")"
    echo "${q}_ratio_first=$(median "${rf[@]}")"
    echo "${q}_ratio_enabled=$(median "${re[@]}")"
    echo "${q}_ratio_warm=$(median "${rw[@]}")"
    echo "${q}_speedup_emptied=$(median "${rx[@]}")"
    echo "${q}_speedup_relearned=$(median "${rr[@]}")"
  done
  echo "${p}_plain_first_ms=$(median "${pfa[@]}")"
  echo "${p}_plain_warm_ms=$(median "${pwa[@]}")"
  echo "${p}_plain_emptied_ms=$(median "${pea[@]}")"
  echo "${p}_plain_runs_first=${pfa[*]} warm=${pwa[*]} emptied=${pea[*]}"
}

# run_timed ...: run's arguments; prints the process's wall time in ms.
run_timed() {
  local t0
  t0=$(date +%s%N)
  run "$@"
  echo $((($(date +%s%N) - t0) / 1000000))
}

# start_daemon_home HOME NAME ARGS...: start_daemon with HOME for pcached
# and the replayer it starts, and the driver cache variables a run unsets
# (run) unset for it too, so that both use the driver's cache under HOME.
start_daemon_home() {
  local home=$1 v saved=()
  shift
  for v in HOME XDG_CACHE_HOME MESA_SHADER_CACHE_DIR __GL_SHADER_DISK_CACHE_PATH; do
    if [ -n "${!v+x}" ]; then saved+=("$v=${!v}"); fi
    unset "$v"
  done
  export HOME=$home
  start_daemon "$@"
  unset HOME
  for v in "${saved[@]}"; do export "${v?}"; done
}

# wait_fleet_sync NAME: until the daemon's fleet sync is done and no
# staged build waits for its replayer (list --json: no entries under a
# device key with the staged ABI mark, common/devkey.h), or
# FLEET_SYNC_TIMEOUT seconds (600).
wait_fleet_sync() {
  local name=$1 end state pending
  end=$(($(date +%s) + ${FLEET_SYNC_TIMEOUT:-600}))
  while :; do
    state=$("$BUILD_DIR/tools/pcachectl" --socket "$DAEMON_SOCKET" status --json |
      python3 -c 'import json,sys; r=json.load(sys.stdin).get("remote",{}).get("sync",{}); print(r.get("state","") or "none", r.get("error",""))')
    case $state in
      done*)
        pending=$("$BUILD_DIR/tools/pcachectl" --socket "$DAEMON_SOCKET" list --json |
          python3 -c '
import json, sys
def walk(o):
    if isinstance(o, dict):
        n = o.get("entries", 0) if (o.get("driver_abi", 0) & 0x20000) and isinstance(o.get("entries"), int) else 0
        return n + sum(walk(v) for v in o.values())
    if isinstance(o, list):
        return sum(walk(v) for v in o)
    return 0
print(walk(json.load(sys.stdin)))')
        [ "${pending:-1}" = 0 ] && return 0 ;;
      failed*) die "fleet: $name's sync failed: ${state#failed }; see $WORK_DIR/pcached-$name.log" ;;
    esac
    [ "$(date +%s)" -lt "$end" ] ||
      die "fleet: $name's sync and staged builds not done after ${FLEET_SYNC_TIMEOUT:-600} s (sync: $state); see $WORK_DIR/pcached-$name.log, or set FLEET_SYNC_TIMEOUT"
    sleep 0.1
  done
}

# fleet SET N: machine A runs the program, machine B's first and warm runs.
fleet() {
  local set=$1 n=$2 p="scen_$1" port url keys=$WORK_DIR/fleet-keys redis_pid
  command -v redis-server >/dev/null || die "--fleet: redis-server is not on the PATH"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  url=redis://127.0.0.1:$port
  rm -rf "$keys" "$WORK_DIR/redis"
  mkdir -p "$WORK_DIR/redis"
  "$BUILD_DIR/tools/pcachectl" fleet keygen "$keys" >/dev/null || die "pcachectl fleet keygen failed"
  for client in $CLIENTS; do
    local q="${p}_${client}" first=() warm=() fms=() wms=() syncs=() ha=$WORK_DIR/home-fleet-a hb=$WORK_DIR/home-fleet-b
    for k in $(seq 1 "$REPEATS"); do
      redis-server --port "$port" --bind 127.0.0.1 --dir "$WORK_DIR/redis" --save "" \
        --appendonly no --logfile "$WORK_DIR/redis.log" &
      redis_pid=$!
      sleep 0.3
      fresh_home "$ha"
      start_daemon_home "$ha" "fleet-a-$set-$client" --remote "$url" \
        --remote-signing-key "$keys/fleet.key" --remote-trusted-keys "$keys/fleet.pub"
      run "$set" "$n" "$client" "$ha" "$WORK_DIR/fleet-a.txt"
      # A's replayer builds what the run staged (its driver hits, and its
      # misses on NVIDIA); each build is pushed behind its Put. Then the
      # push count settles.
      wait_builds >/dev/null
      local pushed=0 last=-1
      for _ in $(seq 1 300); do
        pushed=$("$BUILD_DIR/tools/pcachectl" --socket "$DAEMON_SOCKET" status --json |
          tr -d ' \n' | sed -n 's/.*"pushed":\([0-9]*\).*/\1/p' | head -n1)
        [ "${pushed:-0}" -ge "$(count "$WORK_DIR/fleet-a.txt" compiles)" ] &&
          [ "${pushed:-0}" = "$last" ] && break
        last=${pushed:-0}
        sleep 0.5
      done
      stop_daemon
      fresh_home "$hb"
      # B as a machine that booted and logged in before the launch: its
      # pcached starts after A pushed, with the user's HOME (where the
      # replayer it starts fills the driver's own disk cache), syncs from
      # the fleet and has its replayer build what it staged.
      local t_sync
      t_sync=$(date +%s%N)
      start_daemon_home "$hb" "fleet-b-$set-$client" --remote "$url" \
        --remote-trusted-keys "$keys/fleet.pub"
      wait_fleet_sync "fleet-b-$set-$client"
      syncs+=($((($(date +%s%N) - t_sync) / 1000000)))
      first+=("$(run_timed "$set" "$n" "$client" "$hb" "$WORK_DIR/fleet-b-first.txt")")
      fms+=("$(ms "$WORK_DIR/fleet-b-first.txt")")
      local w=()
      for _ in 1 2 3; do
        w+=("$(run_timed "$set" "$n" "$client" "$hb" "$WORK_DIR/fleet-b-warm.txt")")
        wms+=("$(ms "$WORK_DIR/fleet-b-warm.txt")")
      done
      warm+=("$(median "${w[@]}")")
      stop_daemon
      kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null || true
      echo "# $q fleet repeat $k: A pushed $pushed; B synced and built in ${syncs[-1]} ms;" \
        "B first launch ${first[-1]} ms" \
        "(${fms[-1]} ms a pipeline, compiles=$(count "$WORK_DIR/fleet-b-first.txt" compiles)," \
        "daemon_hits=$(count "$WORK_DIR/fleet-b-first.txt" daemon_hits)), warm launch ${warm[-1]} ms"
    done
    local mf mw
    mf=$(median "${first[@]}"); mw=$(median "${warm[@]}")
    echo "${q}_fleet_sync_ms=$(median "${syncs[@]}")"
    echo "${q}_fleet_first_launch_ms=$mf"
    echo "${q}_fleet_warm_launch_ms=$mw"
    echo "${q}_fleet_first_ms=$(median "${fms[@]}")"
    echo "${q}_fleet_warm_ms=$(median "${wms[@]}")"
    echo "${q}_ratio_fleet_launch=$(ratio "$mf" "$mw")"
  done
}

if [ "$ONLY_FLEET" = 0 ] && [ "$HEAVY" -gt 0 ]; then one_set heavy "$HEAVY"; fi
if [ "$ONLY_FLEET" = 0 ] && [ "$LIGHT" -gt 0 ]; then one_set light "$LIGHT"; fi
if [ "$FLEET" = 1 ] && [ "$HEAVY" -gt 0 ]; then fleet heavy "$HEAVY"; fi
if [ "$FLEET" = 1 ] && [ "$LIGHT" -gt 0 ]; then fleet light "$LIGHT"; fi
