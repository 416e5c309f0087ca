# Shared by the bench scripts (sourced, not run).
# Expects BUILD_DIR and WORK_DIR to be set.

PCACHED=${PCACHED:-$BUILD_DIR/daemon/pcached}
BENCH_BIN=${BENCH_BIN:-$BUILD_DIR/bench}
DAEMON_PID=""
DAEMON_SOCKET=""

log() { printf '%s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# start_daemon NAME [pcached args...]: a private pcached with a fresh data
# dir under WORK_DIR and its socket in a short /tmp dir (sun_path is 108
# bytes). Sets DAEMON_PID and DAEMON_SOCKET.
start_daemon() {
  local name=$1; shift
  local data=$WORK_DIR/data-$name
  local sockdir
  rm -rf "$data"
  mkdir -p "$data"
  sockdir=$(mktemp -d /tmp/pcb.XXXXXX)
  chmod 700 "$sockdir"
  DAEMON_SOCKET=$sockdir/socket
  "$PCACHED" --socket "$DAEMON_SOCKET" --data-dir "$data" --log-level warn "$@" \
    2>>"$WORK_DIR/pcached-$name.log" &
  DAEMON_PID=$!
  for _ in $(seq 1 500); do
    [ -S "$DAEMON_SOCKET" ] && return 0
    kill -0 "$DAEMON_PID" 2>/dev/null || die "pcached ($name) exited; see $WORK_DIR/pcached-$name.log"
    sleep 0.02
  done
  die "pcached ($name) did not create $DAEMON_SOCKET"
}

stop_daemon() {
  if [ -n "$DAEMON_PID" ]; then
    kill "$DAEMON_PID" 2>/dev/null || true
    wait "$DAEMON_PID" 2>/dev/null || true
    rm -rf "$(dirname "$DAEMON_SOCKET")"
  fi
  DAEMON_PID=""
  DAEMON_SOCKET=""
}

# daemon_settle: waits for pcached's own start-up work, its probe of the
# installed drivers (a Vulkan device made in a process of its own,
# docs/replay.md "When a replay starts"), as a user's pcached, started at
# login, has long done it by a program's first launch: a first run that
# shared the machine with it measured the probe, not pcache.
daemon_settle() {
  "$BUILD_DIR/tools/pcachectl" --socket "$DAEMON_SOCKET" --timeout 120 replay --detect >/dev/null 2>&1 || true
}

# wait_builds [TIMEOUT_S]: waits until the daemon at DAEMON_SOCKET has no
# replay left unfinished (staged builds included: docs/replay.md "Staged
# builds"), as a user's machine would be by the next launch; prints the
# wait in ms. Dies after TIMEOUT_S (300) seconds.
wait_builds() {
  local t0 deadline st
  t0=$(date +%s%N)
  deadline=$(($(date +%s) + ${1:-300}))
  # Uploads the program queued at exit reach the daemon first.
  sleep 0.2
  while :; do
    st=$("$BUILD_DIR/tools/pcachectl" --socket "$DAEMON_SOCKET" --json status | tr -d ' \n') ||
      die "pcachectl status failed while waiting for the daemon's builds"
    case $st in
      *'"finished":false'*) ;;
      *) break ;;
    esac
    [ "$(date +%s)" -lt "$deadline" ] ||
      die "the daemon's builds did not finish in ${1:-300} s: $("$BUILD_DIR/tools/pcachectl" --socket "$DAEMON_SOCKET" status)"
    sleep 0.1
  done
  echo $((($(date +%s%N) - t0) / 1000000))
}

# median X...: the middle of the numbers (the lower one of an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# pair_run SET CLIENT HOME TAG: one process of a paired probe
# (probe-first.sh, probe-enabled.sh) in HOME, the driver's disk cache at
# its defaults there; prints its ms per pipeline. SET: heavy
# (pcache-demo, HEAVY pipelines) or light (bench_warm, LIGHT). CLIENT:
# plain, layer, lib, lib-app (--app-owned) or lib-norep (lib against a
# pcached whose replayer is true(1)); each but plain against a fresh,
# empty pcached, started and settled here and stopped after. TAG names
# the app and the daemon's log. Needs B (the build), W (scratch, with the
# layer's manifest under W/share: layer_manifest).
pair_run() {
  local set=$1 client=$2 home=$3 tag=$4 args envs=() owned=()
  [ "$client" = lib-app ] && owned=(--app-owned)
  case $set/$client in
    heavy/lib | heavy/lib-app | heavy/lib-norep)
      args=("$B/examples/pcache-demo" "${owned[@]}" --pipelines "$HEAVY" --app-name "$tag-heavy") ;;
    heavy/*) args=("$B/examples/pcache-demo" --plain --pipelines "$HEAVY" --app-name "$tag-heavy") ;;
    light/lib | light/lib-app | light/lib-norep)
      args=("$B/bench/bench_warm" --mode d "${owned[@]}" --phase measure --n "$LIGHT" --app "$tag-light") ;;
    *) args=("$B/bench/bench_warm" --mode a --phase measure --n "$LIGHT" --app "$tag-light") ;;
  esac
  if [ "$client" = plain ]; then
    envs=(PCACHE_DISABLE=1)
  else
    if [ "$client" = lib-norep ]; then
      PCACHE_REPLAYER=true start_daemon "$tag-$set"
    else
      start_daemon "$tag-$set"
    fi
    daemon_settle
    envs=(PCACHE_SOCKET="$DAEMON_SOCKET")
    [ "$client" = layer ] && envs+=(PCACHE_LAYER=1)
  fi
  env -u XDG_CACHE_HOME -u __GL_SHADER_DISK_CACHE -u MESA_SHADER_CACHE_DIR HOME="$home" \
    XDG_DATA_HOME="$W/share" PCACHE_LAYER_FLUSH_MS=60000 "${envs[@]}" "${args[@]}" 2>/dev/null |
    sed -n 's/^ms_per_pipeline=//p'
  [ "$client" = plain ] || stop_daemon
  return 0
}

# pair_rounds NAME SET ROUNDS TURN: ROUNDS rounds of a paired probe, each
# a plain run and one run of each of CLIENTS through `one SET CLIENT`
# (the caller's: pair_run in the HOME it chooses), plain first, or with
# TURN=1 the order turned round every other round. One line a round
# ("# NAME_SET round K: plain MS CLIENT MS ..."), then the medians and
# the median of the rounds' ratios as NAME_SET_..._ms= and _ratio=.
pair_rounds() {
  local name=$1 set=$2 rounds=$3 turn=$4 k c order line p=()
  local -A ms=() ratios=() v
  for k in $(seq 1 "$rounds"); do
    order="plain $CLIENTS"
    [ "$turn" = 1 ] && [ $((k % 2)) = 0 ] && order="$CLIENTS plain"
    v=()
    for c in $order; do v[$c]=$(one "$set" "$c"); done
    p+=("${v[plain]}")
    line="# ${name}_$set round $k"
    [ "$turn" = 1 ] && line+=" ($order)"
    line+=": plain ${v[plain]}"
    for c in $CLIENTS; do
      ms[$c]="${ms[$c]:-} ${v[$c]}"
      ratios[$c]="${ratios[$c]:-} $(ratio "${v[$c]}" "${v[plain]}")"
      line+=" $c ${v[$c]}"
    done
    echo "$line"
  done
  echo "${name}_${set}_plain_ms=$(median "${p[@]}")"
  for c in $CLIENTS; do
    # shellcheck disable=SC2086
    echo "${name}_${set}_${c}_ms=$(median ${ms[$c]})"
    # shellcheck disable=SC2086
    echo "${name}_${set}_${c}_ratio=$(median ${ratios[$c]})"
  done
}

# clean_env [env options and VAR=VALUE...] CMD...: CMD through env(1)
# without the layer switch or any driver cache setting the caller's
# environment has, so that each run's cache is only what it names.
clean_env() {
  env -u PCACHE_LAYER -u __GL_SHADER_DISK_CACHE -u __GL_SHADER_DISK_CACHE_PATH \
    -u __GL_SHADER_DISK_CACHE_SKIP_CLEANUP -u __GL_SHADER_DISK_CACHE_SIZE -u XDG_CACHE_HOME "$@"
}

# kv FILE KEY: the value of KEY= in FILE (last one wins), empty if none.
kv() { sed -n "s/^$2=//p" "$1" | tail -n 1; }

# layer_kv FILE KEY: KEY's number in the last Vulkan layer report line of
# FILE (PCACHE_LAYER_STATS=1, docs/layer.md), empty if none.
layer_kv() { sed -n "s/^pcache-layer .* $2=\([0-9]*\).*/\1/p" "$1" | tail -n 1; }

# ratio A B: A / B with 4 significant digits, or "na".
ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN { num = "^[0-9.]+([eE][-+]?[0-9]+)?$";
                                   if (a !~ num || b !~ num || b + 0 == 0) print "na";
                                   else printf "%.4g\n", a / b }'
}

# Driver cache environment, chosen from the driver the bench reports:
# DRIVER_KIND (nvidia, mesa, other) must be set. cache_off / cache_on DIR
# print the assignments for env(1).
cache_off() {
  case $DRIVER_KIND in
    nvidia) echo "__GL_SHADER_DISK_CACHE=0" ;;
    mesa) echo "MESA_SHADER_CACHE_DISABLE=true" ;;
    *) echo "__GL_SHADER_DISK_CACHE=0 MESA_SHADER_CACHE_DISABLE=true" ;;
  esac
}
cache_on() {
  case $DRIVER_KIND in
    nvidia) echo "__GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=$1 __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1" ;;
    mesa) echo "MESA_SHADER_CACHE_DISABLE=false MESA_SHADER_CACHE_DIR=$1" ;;
    *) echo "__GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=$1 __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 MESA_SHADER_CACHE_DISABLE=false MESA_SHADER_CACHE_DIR=$1" ;;
  esac
}

probe_driver() {
  local out=$WORK_DIR/probe.txt
  "$BENCH_BIN/bench_warm" --probe >"$out" || die "bench_warm --probe failed"
  DRIVER_KIND=${DRIVER_KIND:-$(kv "$out" driver_kind)}
  export DRIVER_KIND
}

# layer_bench_setup: for the scripts that run the demo and bench_warm with
# and without the layer: DEMO and LAYER_LIB (this build's, checked), the
# layer's manifest under share=$WORK_DIR/share (for XDG_DATA_HOME), and
# the driver probed (printed as driver_kind=).
layer_bench_setup() {
  DEMO=${DEMO:-$BUILD_DIR/examples/pcache-demo}
  LAYER_LIB=$BUILD_DIR/layer/libVkLayer_pcache.so
  [ -x "$DEMO" ] || die "no $DEMO"
  [ -f "$LAYER_LIB" ] || die "no $LAYER_LIB"
  share=$WORK_DIR/share
  layer_manifest "$share" "$LAYER_LIB"
  probe_driver
  echo "driver_kind=$DRIVER_KIND"
}

# layer_manifest SHARE LAYER_LIB: the layer's implicit-layer manifest,
# naming this build's library, where the loader looks for it under
# XDG_DATA_HOME=SHARE (enabled by PCACHE_LAYER=1).
layer_manifest() {
  mkdir -p "$1/vulkan/implicit_layer.d"
  cat >"$1/vulkan/implicit_layer.d/VkLayer_pcache.json" <<JSON
{ "file_format_version": "1.2.0",
  "layer": { "name": "VK_LAYER_PCACHE_pipeline_cache", "type": "GLOBAL",
             "library_path": "$2", "api_version": "1.3.239",
             "implementation_version": "1", "description": "pcache (bench)",
             "enable_environment": { "PCACHE_LAYER": "1" },
             "disable_environment": { "PCACHE_LAYER_DISABLE": "1" } } }
JSON
}
