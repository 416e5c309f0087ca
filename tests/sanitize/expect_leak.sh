#!/bin/bash
# expect_leak.sh PROGRAM - passes only when PROGRAM (tests/sanitize/
# leak_canary) fails with a LeakSanitizer report of pcache's deliberate leak,
# under the same ASAN_OPTIONS and LSAN_OPTIONS (suppressions included) as
# the rest of the ASan run. It also fails if any leaked frame has lost its
# module name, which would mean the driver was unloaded before the report
# and module suppressions no longer work.
set -uo pipefail
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
fail() { echo "expect_leak: FAIL: $*" >&2; exit 1; }
[ "$rc" -ne 0 ] || fail "the deliberate leak was not reported (exit 0): LeakSanitizer is off or suppressed pcache code"
grep -q 'ERROR: LeakSanitizer: detected memory leaks' <<<"$out" || fail "no LeakSanitizer report (exit $rc)"
grep -q 'pcache_client_open' <<<"$out" || fail "the report does not name pcache_client_open"
grep -q 'leak_canary_forget_client' <<<"$out" || fail "the report does not name leak_canary_forget_client"
if grep -q '<unknown module>' <<<"$out"; then
  fail "a leaked frame has no module name: modules were unloaded before LeakSanitizer ran"
fi
echo "expect_leak: ok: pcache's deliberate leak failed the run; nothing else was reported"
