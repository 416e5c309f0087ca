#!/bin/bash
# demo_script_test.sh SRC BUILD - scripts/demo.sh as a user sees it, on the
# pcached, pcachectl, pcache-demo and layer of the build tree (--prebuilt):
#   - the CPU-driver note comes once, not once per run;
#   - pcachectl list is cut to a few entries, and says how many more;
#   - warm against cold is said plainly: which was faster, by how much;
#   - on lavapipe, compiles=0 is explained: it counts the pipelines pcache
#     had no blob for, not what the driver compiled.
set -euo pipefail

src=$1 build=$2
out=$(mktemp "${TMPDIR:-/tmp}/pcache-demo-script-XXXXXX")
trap 'rm -f "$out"' EXIT
fail() { echo "demo_script_test: FAIL: $*" >&2; echo "---- demo.sh said ----" >&2; cat "$out" >&2; exit 1; }

bash "$src/scripts/demo.sh" --prebuilt "$build" --pipelines 8 >"$out" 2>&1 || fail "demo.sh failed"

# The note: once, and only at the end (the runs' own notes are left out).
if grep -q "Mesa's CPU Vulkan driver" "$out"; then
  [ "$(grep -c "CPU Vulkan driver\|a CPU driver" "$out")" = 1 ] || fail "the CPU-driver note is not said once"
  ! grep -q '^  note:' "$out" || fail "a run's own note is still there"
  grep -q 'compiles=0 in the' "$out" || fail "compiles=0 is not explained"
  grep -q 'not that' "$out" && grep -q 'nothing was compiled' "$out" ||
    fail "compiles=0 still reads as nothing compiled"
fi

# Warm against cold, in words and numbers.
grep -Eq '^  The warm run was (faster|slower): [0-9.]+ ms per pipeline against [0-9.]+ ms cold, [0-9.]+x' "$out" ||
  grep -Eq '^  Both runs took [0-9.]+ ms per pipeline' "$out" || fail "no plain warm-against-cold sentence"

# A short list: at most 5 entry rows of the 8, and the rest counted.
rows=$(awk '/^== pcachectl list/{on=1; next} /^== /{on=0} on && /^    [0-9a-f]/ && length($1) == 32' "$out" | wc -l)
[ "$rows" -le 5 ] || fail "pcachectl list shows $rows entry rows"
grep -q '\.\.\. and 3 more: pcachectl list shows them all' "$out" || fail "the list does not say how many more"
echo "demo_script_test: PASS"
