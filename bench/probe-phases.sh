#!/usr/bin/env bash
# probe-phases.sh BUILD_DIR [ROUNDS] - where libpcache's create-info path
# spends a warm start, phase by phase, against the driver's own hit in the
# same process. BUILD_DIR must be built with -DPCACHE_PHASE_TIMING=ON
# (client/phase.h; for a GPU machine: PCACHE_GPU_BUILD_DIR=build-phase
# PCACHE_GPU_CMAKE_ARGS=-DPCACHE_PHASE_TIMING=ON bench/gpu-bundle.sh DIR).
# A private pcached and a HOME of its own (the driver's disk cache at its
# defaults). The light set (bench_warm mode d, LIGHT=2048) and the heavy
# set (pcache-demo, HEAVY=256) each run twice to fill pcached and the
# driver's cache (the daemon's staged builds waited for after each),
# then ROUNDS (4) rounds of: plain, libpcache (shared ownership),
# libpcache with PCACHE_PIPELINES_APP. Each process prints a line; then,
# for each set and client, the medians over the rounds of each phase's
# share of the driver-first probe's time (phases_<set>_<client>_<phase>_pct)
# and of the whole call's excess over it (..._over_driver_pct), and the
# driver's hit a pipeline (..._driver_us). The timers themselves cost some
# 0.2-0.4 us a pipeline, in "over_driver" too.
set -euo pipefail
B=$(cd "$1" && pwd)
ROUNDS=${2:-4}
LIGHT=${LIGHT:-2048}
HEAVY=${HEAVY:-256}
W=$(mktemp -d /tmp/pcache-probe-phases.XXXXXX)
mkdir -p "$W/home/.cache" "$W/share"
export BUILD_DIR=$B WORK_DIR=$W
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
trap 'stop_daemon; rm -rf "$W"' EXIT
saved=$HOME
export HOME=$W/home
start_daemon phases
export HOME=$saved
daemon_settle

# one SET CLIENT: one process; prints its pcache_phases line (or "plain").
one() {
  local set=$1 client=$2 args envs=(PCACHE_SOCKET="$DAEMON_SOCKET") owned=()
  [ "$client" = app ] && owned=(--app-owned)
  [ "$client" = plain ] && envs=(PCACHE_DISABLE=1)
  if [ "$set" = heavy ]; then
    args=("$B/examples/pcache-demo" --pipelines "$HEAVY" --app-name phases-heavy)
    [ "$client" = plain ] && args+=(--plain)
  else
    args=("$B/bench/bench_warm" --mode d --phase measure --n "$LIGHT" --app phases-light)
    [ "$client" = plain ] && args=("$B/bench/bench_warm" --mode a --phase measure --n "$LIGHT" --app phases-light)
  fi
  [ ${#owned[@]} -gt 0 ] && args+=("${owned[@]}")
  clean_env -u MESA_SHADER_CACHE_DIR HOME="$W/home" XDG_DATA_HOME="$W/share" "${envs[@]}" \
    "${args[@]}" >"$W/out" 2>"$W/err" || { cat "$W/err" >&2; die "$set $client failed"; }
  grep '^pcache_phases ' "$W/err" | tail -n 1 || echo plain
}

# pct LINE PHASE: PHASE's share of the driver's time in LINE, in %.
pct() { awk -v l="$1" -v p="$2" 'BEGIN { n = split(l, f, " ");
  for (i = 1; i <= n; i++) { split(f[i], kv, "="); v[kv[1]] = kv[2] }
  if (v["driver_ns"] + 0 == 0) print "na";
  else if (p == "over_driver") printf "%.2f\n", 100 * (v["total_ns"] - v["driver_ns"]) / v["driver_ns"];
  else if (p == "driver_us") printf "%.2f\n", v["driver_ns"] / v["driver_n"] / 1000;
  else printf "%.2f\n", 100 * v[p "_ns"] / v["driver_ns"] }'; }

for set in light heavy; do
  one "$set" lib >/dev/null # first ever: compiles, stages, fills the driver's cache
  wait_builds >/dev/null
  one "$set" lib >/dev/null
  wait_builds >/dev/null
  declare -A lines=()
  for k in $(seq 1 "$ROUNDS"); do
    for c in plain lib app; do
      l=$(one "$set" "$c")
      echo "# phases_$set round $k $c: $l"
      lines[$c]="${lines[$c]:-}$l"$'\n'
    done
  done
  for c in lib app; do
    for p in describe tier own driver_us over_driver; do
      vals=()
      while IFS= read -r l; do [ -n "$l" ] && vals+=("$(pct "$l" "$p")"); done <<<"${lines[$c]}"
      echo "phases_${set}_${c}_${p}$([ "$p" = driver_us ] || echo _pct)=$(median "${vals[@]}")"
    done
  done
  unset lines
done
