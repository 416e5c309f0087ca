#!/bin/bash
# binary_faults_test.sh PCACHED PCACHECTL PCACHE_DEMO FAKE_LAYER_DIR LAYER_DATA_HOME
#
# Binary keys (docs/client.md "Pipeline binaries", docs/replay.md) against
# a driver that fails, played by VK_LAYER_PCACHE_test_driver_cache's fault
# knobs (fake_cache_layer.c):
#   1. a replay to a new global key whose every capture fails
#      (PCACHE_TEST_DRIVER_CAPTURE=zero) keeps the old key's entries, the
#      descriptions and SPIR-V a fixed driver would build from; status
#      blames the capture and names PCACHE_BINARIES=0, which works;
#   2. a driver that crashes in vkGetPipelineKeyKHR: pcached's probe of
#      the drivers (pcache-replay --list-keys --binary) fails, and pcached
#      lists the devices again without the binary keys, so the
#      VkPipelineCache keys are still known; the line a probe wrote before
#      it crashed or hung is in its output, and pcached uses it;
#   3. programs under ten global keys in turn, none of them pcached's: a
#      key named retires the pending replays to the ones before it (no
#      device has them now), and pcached does not start replayers for
#      them without end.
set -euo pipefail

pcached=$1 pcachectl=$2 demo=$3 fake_layers=$4 layer_home=$5
n=4
TEST_NAME=binary_faults_test
# shellcheck source=../common/pcached.sh
. "$(dirname "${BASH_SOURCE[0]}")/../common/pcached.sh"
# shellcheck source=binary_common.sh
. "$(dirname "${BASH_SOURCE[0]}")/binary_common.sh"
export MESA_SHADER_CACHE_DIR=$scratch/mesa
mkdir -m 0700 "$scratch/driver"
unset PCACHE_DRIVER_FIRST PCACHE_TEST_DRIVER_GLOBAL_KEY_MODE PCACHE_TEST_DRIVER_CAPTURE
export VK_LAYER_PATH=$fake_layers VK_INSTANCE_LAYERS=VK_LAYER_PCACHE_test_driver_cache
export PCACHE_TEST_DRIVER_CACHE=$scratch/driver PCACHE_TEST_DRIVER_CACHE_LOG=$scratch/answers
export PCACHE_TEST_DRIVER_BINARIES=1 PCACHE_BINARIES=1 PCACHE_REPLAY_QUIET_MS=0

restart() { # restart: pcached again, its earlier log kept aside
  if [ -n "${daemon_pid:-}" ]; then
    kill -TERM "$daemon_pid" && wait "$daemon_pid" || true
    cat "$scratch/pcached.log" >>"$scratch/pcached-before.log"
  fi
  start_pcached "$pcached" "$pcachectl"
}
logged() { grep -c -- "$1" "$scratch/pcached.log" || true; }
wait_logged() { # wait_logged PATTERN WHAT: up to 30 s
  for _ in $(seq 300); do
    [ "$(logged "$1")" -gt 0 ] && return 0
    sleep 0.1
  done
  fail "pcached never logged $2 ('$1')"
}

# 1. Every capture of the replay fails.
export PCACHE_TEST_DRIVER_GLOBAL_KEY=global-1 PCACHE_REPLAY_DETECT=off
restart
run first
expect "$scratch/first" uploaded -eq "$n"
devices >"$scratch/devices"
read -r old_uuid entries _ <"$scratch/devices"
[ "$entries" -eq "$n" ] || fail "global-1's key holds $entries entries, expected $n"
export PCACHE_TEST_DRIVER_GLOBAL_KEY=global-2 PCACHE_TEST_DRIVER_CAPTURE=zero
unset PCACHE_REPLAY_DETECT # the probe at the start finds global-2's binary key
restart
wait_logged "replay: installed: .*binary key" "global-2's binary key"
wait_builds "$pcachectl"
devices >"$scratch/devices"
grep -q "^$old_uuid $n " "$scratch/devices" ||
  fail "global-1's $n entries are gone after a replay that built nothing: $(cat "$scratch/devices")"
[ "$(logged "none of the $n items was built; the old key's entries stay ('pcachectl status'")" -gt 0 ] ||
  fail "pcached did not say why it kept global-1's entries"
# The fix the message names: each item's reason.
"$pcachectl" status >"$scratch/status"
[ "$(grep -c 'failed [0-9a-f]\{32\}: ' "$scratch/status")" -eq "$n" ] ||
  fail "pcachectl status does not say why the $n items failed: $(cat "$scratch/status")"
# The reason is the driver's capture, not a damaged store, and names the
# way out; which works: the same driver then stores VkPipelineCache data.
[ "$(grep -c 'capture gave no pipeline binaries.*PCACHE_BINARIES=0' "$scratch/status")" -eq "$n" ] ||
  fail "pcachectl status does not blame the driver's capture: $(cat "$scratch/status")"
rm -f "$scratch/driver"/*
PCACHE_LOG=warning run capture # libpcache says it as the replay does
grep -q 'capture gave no pipeline binaries.*PCACHE_BINARIES=0' "$scratch/capture.err" ||
  fail "libpcache did not say why it stored nothing: $(cat "$scratch/capture.err")"
rm -f "$scratch/driver"/*
PCACHE_BINARIES=0 run off
expect "$scratch/off" uploaded -eq "$n"

# 2. The driver crashes when asked its global key.
unset PCACHE_TEST_DRIVER_CAPTURE
export PCACHE_TEST_DRIVER_GLOBAL_KEY_MODE=crash
restart
wait_logged "replay: installed: .*, key " "the devices listed without --binary"
[ "$(logged "cannot list the binary keys")" -gt 0 ] || fail "pcached did not say the binary probe failed"
# The probe's output is a file or pipe, not a terminal: each line must be
# out as written, not lost in a buffer when the driver crashes or hangs
# after it (here in the binary key, after the device's own line).
replayer=$(dirname "$pcached")/pcache-replay
listed() { grep -c '^[0-9a-f]\{64\}[[:space:]]' "$scratch/listed" || true; }
"$replayer" --list-keys --binary >"$scratch/listed" 2>/dev/null &&
  fail "pcache-replay --list-keys --binary did not crash in vkGetPipelineKeyKHR"
[ "$(listed)" -eq 1 ] || fail "a crashed probe's output lacks the line it wrote: $(cat "$scratch/listed")"
PCACHE_TEST_DRIVER_GLOBAL_KEY_MODE=hang "$replayer" --list-keys --binary >"$scratch/listed" 2>/dev/null &
hung=$!
for _ in $(seq 300); do
  [ "$(listed)" -gt 0 ] && break
  sleep 0.1
done
kill -KILL "$hung"
wait "$hung" || true
[ "$(listed)" -eq 1 ] || fail "a hung probe's output lacks the line it wrote: $(cat "$scratch/listed")"
# And pcached uses the lines of a probe that failed: here both probes ask
# the binary keys, so both crash after the device's line.
printf '#!/bin/sh\nexec "%s" --list-keys --binary\n' "$replayer" >"$scratch/always-binary"
chmod +x "$scratch/always-binary"
export PCACHE_REPLAYER=$scratch/always-binary
restart
wait_logged "replay: installed: .*, key " "the device listed before the probe crashed"
[ "$(logged "cannot list the Vulkan devices: .*The keys listed before that (1) are used")" -eq 1 ] ||
  fail "pcached did not say the probe failed after listing a key"
"$pcachectl" replay --detect >"$scratch/detect.out" 2>"$scratch/detect.err" &&
  fail "pcachectl replay --detect did not fail with the probe crashing"
if ! grep -q "^installed: .*, key " "$scratch/detect.out" ||
  ! grep -q "died of signal" "$scratch/detect.err"; then
  fail "pcachectl replay --detect did not give the key and the crash: $(cat "$scratch/detect.out" "$scratch/detect.err")"
fi
unset PCACHE_TEST_DRIVER_GLOBAL_KEY_MODE PCACHE_REPLAYER

# 3. Ten global keys in turn, none of them pcached's own.
export PCACHE_TEST_DRIVER_GLOBAL_KEY=current PCACHE_REPLAY_DETECT=off
restart
for i in $(seq 1 10); do
  rm -f "$scratch/driver"/*
  PCACHE_TEST_DRIVER_GLOBAL_KEY=g$i run "g$i"
done
sleep 1
before=$(logged "no Vulkan device here has the new key")
sleep 3
after=$(logged "no Vulkan device here has the new key")
[ "$after" -eq "$before" ] ||
  fail "pcached kept starting replayers for keys no device has ($before, then $after 3 s later)"
[ "$(logged 'is dropped: a newer build of its device is named')" -gt 0 ] ||
  fail "no pending replay was retired when a newer global key was named"
echo "binary_faults_test: passed ($before replayers found no device)"
