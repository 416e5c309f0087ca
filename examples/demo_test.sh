#!/bin/bash
# demo_test.sh PCACHED PCACHECTL PCACHE_DEMO - the demo's flow as a test:
# a private pcached, pcache-demo cold then warm, and what each run must show.
set -euo pipefail

pcached=$1 pcachectl=$2 demo=$3
n=${PCACHE_DEMO_TEST_PIPELINES:-16}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/pcache-demo-test-XXXXXX")
daemon_pid=
cleanup() {
  if [ -n "$daemon_pid" ]; then
    kill -TERM "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
  fi
  rm -rf "$scratch"
}
trap cleanup EXIT

fail() {
  echo "demo_test: FAIL: $*" >&2
  echo "---- pcached log ----" >&2
  cat "$scratch/pcached.log" >&2 || true
  exit 1
}

export XDG_RUNTIME_DIR=$scratch/run XDG_CACHE_HOME=$scratch/cache
mkdir -m 0700 "$XDG_RUNTIME_DIR" "$XDG_CACHE_HOME"
export PCACHE_SOCKET=$XDG_RUNTIME_DIR/pcache/socket PCACHE_DATA_DIR=$scratch/data
unset PCACHE_DISABLE

"$pcached" --socket "$PCACHE_SOCKET" --data-dir "$PCACHE_DATA_DIR" --log-level debug \
  2>"$scratch/pcached.log" &
daemon_pid=$!
for _ in $(seq 200); do
  "$pcachectl" status >/dev/null 2>&1 && break
  kill -0 "$daemon_pid" 2>/dev/null || fail "pcached exited during start-up"
  sleep 0.05
done

# get FILE KEY: the value of a key=value line.
get() { sed -n "s/^$2=//p" "$1" | head -n1; }
expect() { # expect FILE KEY OP VALUE
  local v
  v=$(get "$1" "$2")
  [ -n "$v" ] || fail "$(basename "$1"): no $2= line"
  [ "$v" "$3" "$4" ] || fail "$(basename "$1"): $2=$v, expected $3 $4"
}

# The app's name keys the daemon's prefetch: both runs must use the same one.
"$demo" --pipelines "$n" --app-name demo-test >"$scratch/cold" || { cat "$scratch/cold"; fail "cold run"; }
expect "$scratch/cold" pipelines -eq "$n"
expect "$scratch/cold" daemon_connected -eq 1
expect "$scratch/cold" daemon_hits -eq 0
expect "$scratch/cold" compiles -eq "$n"
expect "$scratch/cold" uploaded -eq "$n"
expect "$scratch/cold" hits_create_info -ge "$n"
expect "$scratch/cold" hits_app_key -ge "$n"
expect "$scratch/cold" tier_mismatches -eq 0

"$demo" --pipelines "$n" --app-name demo-test >"$scratch/warm" || { cat "$scratch/warm"; fail "warm run"; }
expect "$scratch/warm" prefetched -ge "$n"
expect "$scratch/warm" daemon_hits -eq "$n"
expect "$scratch/warm" uploaded -eq 0
expect "$scratch/warm" rejected_blobs -eq 0
expect "$scratch/warm" tier_mismatches -eq 0

# pcachectl sees what the cold run uploaded, filed under the app's name.
"$pcachectl" --json list >"$scratch/list.json" || fail "pcachectl list"
grep -q demo-test "$scratch/list.json" || fail "pcachectl list does not show app demo-test"

# Without the daemon the demo still works, locally.
PCACHE_DISABLE=1 "$demo" --pipelines 4 >"$scratch/local" || { cat "$scratch/local"; fail "local run"; }
expect "$scratch/local" daemon_connected -eq 0
expect "$scratch/local" daemon_hits -eq 0
expect "$scratch/local" compiles -eq 4

echo "demo_test: ok"
cat "$scratch/warm"
