#!/usr/bin/env bash
# probe-ownership.sh BUILD_DIR FAKE_LAYER_DIR [N] - the instructions
# libpcache itself spends a pipeline on the warm, driver-hit path, with
# shared ownership (the default: described and hashed for the tiers) and
# with PCACHE_PIPELINES_APP (the driver asked first), counted by callgrind.
# The driver's hits come from VK_LAYER_PCACHE_test_driver_cache
# (tests/fakedriver, built in a test build: FAKE_LAYER_DIR is its layers/
# folder), which answers FAIL_ON_PIPELINE_COMPILE_REQUIRED with a hit for
# what a plain run filled; the prefetch waits for a miss, as on NVIDIA.
# bench_warm's light set, N pipelines (64). Prints callgrind_<mode>_*:
# get_by_create_info's instructions with what it called, the driver's
# (the fake layer's vkCreate*Pipelines, lavapipe below), and their
# difference a pipeline. Needs valgrind. A probe of the code's cost, not a
# speed: instructions are not time, and cache misses are left out.
set -euo pipefail
B=$(cd "$1" && pwd)
L=$(cd "$2" && pwd)
N=${3:-64}
command -v valgrind >/dev/null || { echo "probe-ownership.sh: needs valgrind" >&2; exit 2; }
W=$(mktemp -d /tmp/pcache-ownership.XXXXXX)
mkdir -p "$W/run" "$W/driver" "$W/mesa" "$W/home/.cache"
chmod 700 "$W/run"
export XDG_RUNTIME_DIR=$W/run HOME=$W/home MESA_SHADER_CACHE_DIR=$W/mesa
export VK_LAYER_PATH=$L VK_INSTANCE_LAYERS=VK_LAYER_PCACHE_test_driver_cache
export PCACHE_TEST_DRIVER_CACHE=$W/driver PCACHE_SOCKET=$W/run/socket
"$B/daemon/pcached" --socket "$PCACHE_SOCKET" --data-dir "$W/data" --log-level warn 2>"$W/pcached.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$W"' EXIT
for _ in $(seq 1 250); do [ -S "$PCACHE_SOCKET" ] && break; sleep 0.02; done
warm() { "$B/bench/bench_warm" --phase measure --n "$N" --app ownership "$@"; }
warm --mode a >/dev/null # fills the stand-in driver cache
export PCACHE_PREFETCH=background
warm --mode d >"$W/first.txt"
grep -q '^driver_first_hits='"$N"'$' "$W/first.txt" ||
  { echo "probe-ownership.sh: the driver did not serve every pipeline" >&2; cat "$W/first.txt" >&2; exit 1; }
# incl FILE PATTERN: the summed inclusive instructions of the functions
# matching PATTERN.
incl() {
  callgrind_annotate --inclusive=yes "$1" 2>/dev/null |
    awk -v p="$2" '$0 ~ p && $0 ~ /\?\?\?:/ { gsub(",", "", $1); s += $1 } END { print s + 0 }'
}
for mode in shared app; do
  args=(--mode d)
  [ "$mode" = app ] && args+=(--app-owned)
  valgrind --tool=callgrind --callgrind-out-file="$W/cg.$mode" \
    "$B/bench/bench_warm" --phase measure --n "$N" --app ownership "${args[@]}" >/dev/null 2>"$W/vg.$mode"
  g=$(incl "$W/cg.$mode" ':get_by_create_info( |$)')
  f=$(incl "$W/cg.$mode" ':fake_Create(Graphics|Compute)Pipelines( |$)')
  echo "callgrind_${mode}_get_by_create_info_ir=$g"
  echo "callgrind_${mode}_driver_ir=$f"
  echo "callgrind_${mode}_own_ir_per_pipeline=$(((g - f) / N))"
done
