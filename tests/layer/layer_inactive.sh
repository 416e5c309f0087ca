#!/bin/bash
# layer_inactive.sh BUILD PCACHED PCACHE_DEMO - the layer says, once and at
# the default log level, that it is inactive and why (docs/layer.md, "When
# it is off"), through a real program: pcache-demo --plain, which has no
# pcache code, with the build tree's manifest and PCACHE_LAYER=1.
#   - no XDG_RUNTIME_DIR and no PCACHE_SOCKET (also with PCACHE_LOG=debug:
#     PCACHE_LOG works without XDG_RUNTIME_DIR);
#   - no daemon on the socket;
#   - a daemon that refuses it (--max-connections 0);
# and it says nothing when the cache works, when the user turned it off
# (PCACHE_DISABLE=1, PCACHE_LAYER_DISABLE=1, PCACHE_LOG=0 or error), nor
# from libpcache in an app (a library stays quiet unless PCACHE_LOG asks).
set -euo pipefail

build=$1 pcached=$2 demo=$3
failed=0
TEST_NAME=layer-inactive
# shellcheck source=../common/scratch.sh
. "$(dirname "${BASH_SOURCE[0]}")/../common/scratch.sh"

fail() { echo "layer_inactive: FAIL: $*" >&2; failed=1; }

mkdir -m 0700 "$scratch/run" "$scratch/cache"
# Nothing of the caller's pcache or loader settings reaches the runs.
unset PCACHE_SOCKET PCACHE_LOG PCACHE_DISABLE PCACHE_LAYER_DISABLE PCACHE_LAYER_STATS \
  PCACHE_LAYER_STATS_FILE VK_LOADER_LAYERS_DISABLE VK_INSTANCE_LAYERS
export XDG_DATA_HOME=$build/share XDG_CACHE_HOME=$scratch/cache PCACHE_TIMEOUT_MS=500
export XDG_RUNTIME_DIR=$scratch/run
socket=$XDG_RUNTIME_DIR/pcache/socket

# run NAME [ENV=VALUE...] -- ARGS: pcache-demo with ARGS; its stderr in $scratch/NAME.
run() {
  local name=$1
  shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  if ! env "${envs[@]}" "$demo" --pipelines 4 "$@" >"$scratch/$name.out" 2>"$scratch/$name.err"; then
    cat "$scratch/$name.err" >&2
    fail "$name: pcache-demo failed: the layer must never break the program"
  fi
}
warnings() { grep -c 'warning: the Vulkan layer is inactive' "$scratch/$1.err" || true; }
# expect_warning NAME TEXT...: one warning, and each TEXT in it.
expect_warning() {
  local name=$1 n
  shift
  n=$(warnings "$name")
  if [ "$n" != 1 ]; then
    fail "$name: $n 'inactive' warnings, expected 1; stderr:"
    cat "$scratch/$name.err" >&2
    return
  fi
  for text in "$@"; do
    grep -q -F -- "$text" "$scratch/$name.err" || fail "$name: the warning does not say '$text'"
  done
}
# expect_silent NAME: no line of pcache's at all.
expect_silent() {
  if grep -q 'pcache\[' "$scratch/$1.err"; then
    fail "$1: expected no pcache message; stderr:"
    cat "$scratch/$1.err" >&2
  fi
}

# No socket path at all.
run no-xdg -u XDG_RUNTIME_DIR PCACHE_LAYER=1 -- --plain
expect_warning no-xdg XDG_RUNTIME_DIR PCACHE_SOCKET 'pcachectl doctor'
run no-xdg-debug -u XDG_RUNTIME_DIR PCACHE_LAYER=1 PCACHE_LOG=debug -- --plain
expect_warning no-xdg-debug XDG_RUNTIME_DIR PCACHE_SOCKET

# A socket path, no daemon.
run no-daemon PCACHE_LAYER=1 -- --plain
expect_warning no-daemon "$socket" 'systemctl --user enable --now pcached.socket' "'pcached'"

# Turned off on purpose, or messages turned off: silent.
run disabled PCACHE_LAYER=1 PCACHE_DISABLE=1 -- --plain
expect_silent disabled
run layer-disabled PCACHE_LAYER=1 PCACHE_LAYER_DISABLE=1 -- --plain
expect_silent layer-disabled
run log-off PCACHE_LAYER=1 PCACHE_LOG=0 -- --plain
expect_silent log-off
run log-error PCACHE_LAYER=1 PCACHE_LOG=error -- --plain
expect_silent log-error
# An app's libpcache says nothing unasked; asked, it says why.
run app-quiet -u XDG_RUNTIME_DIR -- --app-name inactive-test
expect_silent app-quiet
run app-info -u XDG_RUNTIME_DIR PCACHE_LOG=info -- --app-name inactive-test
grep -q 'info: not using pcached: neither XDG_RUNTIME_DIR nor PCACHE_SOCKET' \
  "$scratch/app-info.err" || { fail "app-info: PCACHE_LOG=info says nothing without XDG_RUNTIME_DIR"; cat "$scratch/app-info.err" >&2; }

# A daemon that refuses it: its one connection (--max-connections 1) is
# held by a client that says nothing (for --hello-timeout).
"$pcached" --socket "$socket" --data-dir "$scratch/data" --max-connections 1 \
  --hello-timeout 60 2>"$scratch/pcached-refusing.log" &
daemon_pid=$!
for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.05; done
python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
open(sys.argv[2], "w").close()
time.sleep(60)' "$socket" "$scratch/held" &
holder_pid=$!
for _ in $(seq 100); do [ -e "$scratch/held" ] && break; sleep 0.05; done
run refused PCACHE_LAYER=1 -- --plain
expect_warning refused "$socket" 'refused' 'too many connections' '--max-connections'
kill "$holder_pid" 2>/dev/null || true
kill -TERM "$daemon_pid"; wait "$daemon_pid" || true
daemon_pid=

# A daemon that serves: silent.
"$pcached" --socket "$socket" --data-dir "$scratch/data" 2>"$scratch/pcached.log" &
daemon_pid=$!
for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.05; done
run served PCACHE_LAYER=1 -- --plain
expect_silent served

if [ "$failed" = 0 ]; then
  echo "layer_inactive: PASS"
fi
exit "$failed"
