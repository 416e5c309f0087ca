# Sourced by the suite's shell tests (through pcached.sh, or directly by
# those that set up their own environment): $scratch, a directory of the
# test's own, removed at exit, and the pcached the test started there
# ($daemon_pid, once set) stopped first. Set TEST_NAME first.

scratch=$(mktemp -d "${TMPDIR:-/tmp}/pcache-$TEST_NAME-XXXXXX")
daemon_pid=
cleanup() {
  if [ -n "$daemon_pid" ]; then
    kill -TERM "$daemon_pid" 2>/dev/null || true
    wait "$daemon_pid" 2>/dev/null || true
  fi
  rm -rf "$scratch"
}
trap cleanup EXIT
