# Sourced by the suite's shell tests (examples/demo_test.sh,
# tests/fakedriver/driver_first_test.sh): a scratch directory removed at
# exit (scratch.sh), the environment that keeps a test off the user's own
# daemon and caches, a private pcached on it, and checks of key=value
# output. Set TEST_NAME first.

# shellcheck source=scratch.sh
. "$(dirname "${BASH_SOURCE[0]}")/scratch.sh"

fail() {
  echo "$TEST_NAME: FAIL: $*" >&2
  echo "---- pcached log ----" >&2
  cat "$scratch/pcached.log" >&2 || true
  exit 1
}

export XDG_RUNTIME_DIR=$scratch/run XDG_CACHE_HOME=$scratch/cache
mkdir -m 0700 "$XDG_RUNTIME_DIR" "$XDG_CACHE_HOME"
export PCACHE_SOCKET=$XDG_RUNTIME_DIR/pcache/socket PCACHE_DATA_DIR=$scratch/data
unset PCACHE_DISABLE

# start_pcached PCACHED PCACHECTL: pcached on the scratch socket and data
# directory, its log in $scratch/pcached.log; returns once it answers.
start_pcached() {
  "$1" --socket "$PCACHE_SOCKET" --data-dir "$PCACHE_DATA_DIR" --log-level debug \
    2>"$scratch/pcached.log" &
  daemon_pid=$!
  for _ in $(seq 200); do
    "$2" status >/dev/null 2>&1 && return 0
    kill -0 "$daemon_pid" 2>/dev/null || fail "pcached exited during start-up"
    sleep 0.05
  done
  fail "pcached did not answer"
}

# wait_builds PCACHECTL: returns once pcached has no replay left unfinished
# (staged builds included, docs/replay.md "Staged builds"); fails after 60 s.
wait_builds() {
  local st
  sleep 0.2 # what a program queued at exit reaches the daemon first
  for _ in $(seq 600); do
    st=$("$1" --json status | tr -d ' \n') || fail "pcachectl status failed"
    case $st in
      *'"finished":false'*) sleep 0.1 ;;
      *) return 0 ;;
    esac
  done
  fail "pcached's builds did not finish in 60 s: $("$1" status)"
}

# get FILE KEY: the value of a key=value line.
get() { sed -n "s/^$2=//p" "$1" | head -n1; }
expect() { # expect FILE KEY OP VALUE
  local v
  v=$(get "$1" "$2")
  [ -n "$v" ] || fail "$(basename "$1"): no $2= line"
  [ "$v" "$3" "$4" ] || fail "$(basename "$1"): $2=$v, expected $3 $4"
}
