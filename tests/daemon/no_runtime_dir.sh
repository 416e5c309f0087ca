#!/bin/bash
# no_runtime_dir.sh PCACHED PCACHECTL [PCACHE_DEMO] - pcached on a machine
# without a systemd user manager (no XDG_RUNTIME_DIR), as a user meets it:
#   - plain `pcached` exits 1 with one clear line that names the fix
#     (PCACHE_SOCKET or --socket, the docs' section), not a bare errno;
#   - the fix docs/operations.md gives ("Without a systemd user manager"):
#     PCACHE_SOCKET=$HOME/.cache/pcache/socket for the daemon and the apps,
#     `pcached` with no options; pcachectl reaches it, and an app (the demo,
#     when built) is served: its second run is all daemon hits.
set -euo pipefail

pcached=$1 pcachectl=$2 demo=${3:-}
TEST_NAME=no-runtime-dir
# shellcheck source=../common/scratch.sh
. "$(dirname "${BASH_SOURCE[0]}")/../common/scratch.sh"
fail() { echo "no_runtime_dir: FAIL: $*" >&2; exit 1; }

# A user with a home and nothing else: no runtime dir, no pcache settings.
unset XDG_RUNTIME_DIR PCACHE_SOCKET PCACHE_DATA_DIR XDG_CACHE_HOME PCACHE_DISABLE PCACHE_LOG \
  JOURNAL_STREAM LISTEN_PID LISTEN_FDS
export HOME=$scratch/home
mkdir -m 0700 "$HOME"

rc=0
"$pcached" >"$scratch/out" 2>"$scratch/err" </dev/null || rc=$?
[ "$rc" = 1 ] || fail "pcached without XDG_RUNTIME_DIR exited $rc, expected 1"
lines=$(wc -l <"$scratch/err")
[ "$lines" = 1 ] || { cat "$scratch/err" >&2; fail "expected one line on stderr, got $lines"; }
for text in 'XDG_RUNTIME_DIR is not set' 'PCACHE_SOCKET' '--socket' \
  'Without a systemd user manager'; do
  grep -q -F -- "$text" "$scratch/err" || { cat "$scratch/err" >&2; fail "the message lacks '$text'"; }
done
if grep -q 'No such file or directory' "$scratch/err"; then
  cat "$scratch/err" >&2
  fail "a stray errno text in the message"
fi
[ ! -e "$HOME/.cache/pcache/data.mdb" ] || fail "a store was made although pcached could not serve"

# The documented way.
export PCACHE_SOCKET=$HOME/.cache/pcache/socket
"$pcached" 2>"$scratch/pcached.log" </dev/null &
daemon_pid=$!
for _ in $(seq 200); do
  "$pcachectl" status >"$scratch/status" 2>&1 && break
  kill -0 "$daemon_pid" 2>/dev/null || { cat "$scratch/pcached.log" >&2; fail "pcached exited"; }
  sleep 0.05
done
"$pcachectl" status >"$scratch/status" || { cat "$scratch/pcached.log" >&2; fail "pcachectl status"; }
grep -q -F "$PCACHE_SOCKET" "$scratch/status" || fail "status does not name $PCACHE_SOCKET"
grep -q -F "$HOME/.cache/pcache" "$scratch/status" || fail "the store is not the default one"

if [ -n "$demo" ]; then
  "$demo" --pipelines 4 >"$scratch/cold" || fail "pcache-demo, first run"
  "$demo" --pipelines 4 >"$scratch/warm" || fail "pcache-demo, second run"
  grep -qx 'daemon_connected=1' "$scratch/cold" || fail "the demo did not reach pcached"
  grep -qx 'daemon_hits=4' "$scratch/warm" || { cat "$scratch/warm" >&2; fail "second run not served"; }
fi
echo "no_runtime_dir: PASS"
