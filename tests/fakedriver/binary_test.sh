#!/bin/bash
# binary_test.sh PCACHED PCACHECTL PCACHE_DEMO FAKE_LAYER_DIR LAYER_DATA_HOME DAMAGE_ARCHIVE BENCH_BINARY
#
# Binary mode (client/binary.c, docs/client.md "Pipeline binaries"): a
# device with VK_KHR_pipeline_binary stores pipelines as the driver's
# binaries. Lavapipe has no such extension, so VK_LAYER_PCACHE_test_driver_cache
# (fake_cache_layer.c, PCACHE_TEST_DRIVER_BINARIES=1) emulates it. Every
# program runs through the Vulkan layer, which enables the extension:
#   1. capture: the first run compiles and uploads one container per
#      pipeline, under the binary key (not lavapipe's VkPipelineCache key);
#   2. creation from binaries: the driver's cache emptied, every pipeline
#      is a daemon hit created from binaries, nothing compiled;
#   3. the internal-cache query (bench_binary --phase warm) answers from
#      the driver's cache, and misses once it is emptied;
#   4. damaged containers: a bad count is refused before the driver sees
#      it; a flipped byte in a binary's data (checksum made right) reaches
#      the driver, which refuses it; either way the pipeline is compiled;
#   5. PCACHE_BINARIES=0: VkPipelineCache blobs, as before;
#   6. a new global pipeline key is a new device key that supersedes the
#      old one: pcached starts a replay;
#   7. pcached finds the next global key itself and the replayer builds
#      binaries: restarted under it with replay detection on, pcached's
#      probe (pcache-replay --list-keys --binary, asked for since the
#      store holds binary keys) lists the new binary key, which starts the
#      replay; with no program launched it fills the new key with all n
#      containers, and a program then creates every pipeline from them and
#      compiles none.
set -euo pipefail

pcached=$1 pcachectl=$2 demo=$3 fake_layers=$4 layer_home=$5 damage=$6 bench=$7
n=8
TEST_NAME=binary_test
# shellcheck source=../common/pcached.sh
. "$(dirname "${BASH_SOURCE[0]}")/../common/pcached.sh"
export MESA_SHADER_CACHE_DIR=$scratch/mesa
mkdir -m 0700 "$scratch/driver"
unset PCACHE_DRIVER_FIRST PCACHE_TEST_DRIVER_GLOBAL_KEY
export VK_LAYER_PATH=$fake_layers VK_INSTANCE_LAYERS=VK_LAYER_PCACHE_test_driver_cache
export PCACHE_TEST_DRIVER_CACHE=$scratch/driver PCACHE_TEST_DRIVER_CACHE_LOG=$scratch/answers
export PCACHE_TEST_DRIVER_BINARIES=1 PCACHE_REPLAY_DETECT=off
# The layer stores binaries only when asked, until the replayer builds them.
export PCACHE_BINARIES=1
start_pcached "$pcached" "$pcachectl"

# shellcheck source=binary_common.sh
. "$(dirname "${BASH_SOURCE[0]}")/binary_common.sh"

# 1. Capture.
run capture
expect "$scratch/capture" compiles -eq "$n"
expect "$scratch/capture" uploaded -eq "$n"
expect "$scratch/capture" daemon_hits -eq 0
answer_is fill "$n" capture
devices >"$scratch/devices"
[ "$(wc -l <"$scratch/devices")" -eq 1 ] || fail "expected one device: $(cat "$scratch/devices")"
read -r bin_uuid entries sizes <"$scratch/devices"
[ "$entries" -eq "$n" ] || fail "the binary key holds $entries entries, expected $n"
# A container of one emulated binary: 48 + 4 + 16 + 8 + 40 bytes.
[ "$sizes" = 116 ] || fail "the containers are $sizes bytes, expected 116"

# 2. Creation from binaries, the driver's cache emptied.
rm -f "$scratch/driver"/*
run frombin
expect "$scratch/frombin" daemon_hits -eq "$n"
expect "$scratch/frombin" compiles -eq 0
expect "$scratch/frombin" uploaded -eq 0
answer_is binary "$n" frombin
answer_is frombin "$n" frombin

# 3. The internal-cache query: bench_binary fills the driver's cache
#    (cold), then asks it (warm: every fourth pipeline is a query).
: >"$scratch/answers"
"$bench" --phase cold --pipelines "$n" --dir "$scratch/bins" >"$scratch/cold" 2>&1 ||
  { cat "$scratch/cold"; fail "bench_binary --phase cold"; }
expect "$scratch/cold" binaries -eq 1
: >"$scratch/answers"
"$bench" --phase warm --pipelines "$n" --dir "$scratch/bins" >"$scratch/warm" 2>&1 ||
  { cat "$scratch/warm"; fail "bench_binary --phase warm"; }
expect "$scratch/warm" warm_query_hits -eq $((n / 4))
answer_is query-hit $((n / 4)) query
rm -f "$scratch/driver"/*
: >"$scratch/answers"
"$bench" --phase warm --pipelines "$n" --dir "$scratch/bins" >"$scratch/warm2" 2>&1 ||
  { cat "$scratch/warm2"; fail "bench_binary --phase warm (emptied)"; }
expect "$scratch/warm2" warm_query_hits -eq 0
answer_is query-miss $((n / 4)) "query (emptied)"

# 4. Damaged containers, stored again with their checksums made right.
damaged() { # damaged MODE: the store's containers replaced by damaged ones
  "$pcachectl" export "$scratch/good.pca" >/dev/null || fail "export"
  "$damage" "$scratch/good.pca" "$scratch/bad.pca" "$1" >"$scratch/damage" || fail "damage_archive $1"
  expect "$scratch/damage" damaged -eq "$n"
  "$pcachectl" purge --all >/dev/null || fail "purge"
  "$pcachectl" import "$scratch/bad.pca" >/dev/null || fail "import"
  rm -f "$scratch/driver"/*
}
damaged count
run badcount
expect "$scratch/badcount" daemon_hits -eq 0
expect "$scratch/badcount" compiles -eq "$n"
answer_is binary 0 "bad count"
answer_is binary-refused 0 "bad count" # refused before the driver saw it
answer_is frombin 0 "bad count"
"$pcachectl" flush >/dev/null 2>&1 || true
damaged data
run baddata
expect "$scratch/baddata" daemon_hits -eq 0
expect "$scratch/baddata" compiles -eq "$n"
answer_is binary-refused "$n" "bad data" # only the driver can tell
answer_is frombin 0 "bad data"


# 5. Turned off: VkPipelineCache blobs under lavapipe's own key.
rm -f "$scratch/driver"/*
PCACHE_BINARIES=0 run off
expect "$scratch/off" compiles -eq "$n"
answer_is binary 0 off
devices >"$scratch/devices"
[ "$(wc -l <"$scratch/devices")" -eq 2 ] || fail "expected two devices: $(cat "$scratch/devices")"
grep -v "^$bin_uuid " "$scratch/devices" | grep -q " $n " ||
  fail "PCACHE_BINARIES=0 did not store $n VkPipelineCache blobs: $(cat "$scratch/devices")"

# 6. A new global pipeline key: a new device key, whose first Get starts a
#    replay of the old one's entries.
rm -f "$scratch/driver"/*
PCACHE_TEST_DRIVER_GLOBAL_KEY=global-2 run rekeyed
expect "$scratch/rekeyed" daemon_hits -eq 0
expect "$scratch/rekeyed" compiles -eq "$n"
devices >"$scratch/devices"

[ "$(wc -l <"$scratch/devices")" -eq 3 ] || fail "expected a third device: $(cat "$scratch/devices")"
for _ in $(seq 100); do
  grep -q "replay" "$scratch/pcached.log" && grep -qi "${bin_uuid//-/}" "$scratch/pcached.log" && break
  sleep 0.05
done
grep -i "replay" "$scratch/pcached.log" | grep -qi "${bin_uuid//-/}" ||
  fail "no replay of the old binary key ($bin_uuid) after the global key changed"

grep -i "replay" "$scratch/pcached.log" | grep -i "${bin_uuid//-/}" | head -n2

# 7. Driver-change detection of binary keys (daemon/replay/replay_detect.c)
#    and the replayer's binaries (replay/replay_vk.c). The next driver
#    update (global key global-3) is installed for every process, pcached
#    and the pcache-replay it starts included (they get this environment:
#    the fake layer, its global key), so pcached is started again under it,
#    with detection on. No program is launched: its probe must list the new
#    binary key, which supersedes the stored ones, and the replay must fill
#    it with all n containers. Then a program with the driver's cache
#    emptied creates every pipeline from the replayed binaries and compiles
#    none.
kill -TERM "$daemon_pid" && wait "$daemon_pid" || true
daemon_pid=
mv "$scratch/pcached.log" "$scratch/pcached-before.log"
known=$(cut -d' ' -f1 "$scratch/devices")
export PCACHE_TEST_DRIVER_GLOBAL_KEY=global-3
export PCACHE_REPLAY_QUIET_MS=0 # a replay does not wait for the program to go quiet
unset PCACHE_REPLAY_DETECT # the probe at the start (docs/replay.md)
start_pcached "$pcached" "$pcachectl"
# Not wait_builds: the replay to global-2's key, taken up again at the
# start, waits for good (no device gives that key any more).
for _ in $(seq 300); do
  devices >"$scratch/devices"
  new_dev=$(grep -v -F "$known" "$scratch/devices" || true)
  entries=0
  [ -z "$new_dev" ] || read -r new_uuid entries sizes <<<"$new_dev"
  [ "$entries" -lt "$n" ] || break
  sleep 0.1
done
[ "$(printf '%s' "$new_dev" | grep -c .)" -eq 1 ] ||
  fail "expected one new device for global-3: $(cat "$scratch/devices")"
grep -qi "replay.*${new_uuid//-/}" "$scratch/pcached.log" ||
  fail "no replay for the global-3 key ($new_uuid)"
[ "$entries" -eq "$n" ] ||
  fail "after the replay the global-3 key holds $entries entries, expected $n (the replayer built no binaries?)"
[ "$sizes" = 116 ] || fail "the replayed containers are $sizes bytes, expected 116"
grep -q "replay: installed: .*binary key" "$scratch/pcached.log" ||
  fail "pcached's probe listed no binary key (pcache-replay --list-keys --binary)"
rm -f "$scratch/driver"/*
run replayed
expect "$scratch/replayed" daemon_hits -eq "$n"
expect "$scratch/replayed" compiles -eq 0
expect "$scratch/replayed" uploaded -eq 0
answer_is binary "$n" replayed
answer_is frombin "$n" replayed
echo "binary_test: passed"
