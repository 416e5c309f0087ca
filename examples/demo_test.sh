#!/bin/bash
# demo_test.sh PCACHED PCACHECTL PCACHE_DEMO - the demo's flow as a test:
# a private pcached, pcache-demo cold then warm, and what each run must show.
set -euo pipefail

pcached=$1 pcachectl=$2 demo=$3
n=${PCACHE_DEMO_TEST_PIPELINES:-16}
TEST_NAME=demo_test
# shellcheck source=../tests/common/pcached.sh
. "$(dirname "${BASH_SOURCE[0]}")/../tests/common/pcached.sh"
start_pcached "$pcached" "$pcachectl"

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

# pcachectl sees what the cold run uploaded, filed under the app's name,
# and the device's UUID (the demo tells the library its instance's version).
"$pcachectl" --json list >"$scratch/list.json" || fail "pcachectl list"
grep -q demo-test "$scratch/list.json" || fail "pcachectl list does not show app demo-test"
python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if d["devices"] and all(x["device_uuid"] for x in d["devices"]) else 1)' \
  "$scratch/list.json" || fail "pcachectl list has no device UUID for the demo's device"

# Without the daemon the demo still works, locally.
PCACHE_DISABLE=1 "$demo" --pipelines 4 >"$scratch/local" || { cat "$scratch/local"; fail "local run"; }
expect "$scratch/local" daemon_connected -eq 0
expect "$scratch/local" daemon_hits -eq 0
expect "$scratch/local" compiles -eq 4

# The --plain probes (bench/run-replay.sh --probes): 11 pipelines on two
# threads are 6 and 5 a thread; --cache-group 3 puts them into 2 + 2 fresh
# caches, --alternate probes every other pipeline of a thread (3 + 2), and
# only the probed ones go into the fresh caches.
plain() { # plain NAME ARGS...: a --plain run without the daemon into $scratch/NAME
  local name=$1
  shift
  PCACHE_DISABLE=1 "$demo" --plain --pipelines 11 --threads 2 "$@" >"$scratch/$name" ||
    { cat "$scratch/$name"; fail "pcache-demo --plain $*"; }
}
plain group --cache-group 3
expect "$scratch/group" fresh_caches_made -eq 4
expect "$scratch/group" fresh_cache_pipelines -eq 11
expect "$scratch/group" fresh_cache_bytes -gt 0
plain alt --alternate --fresh-caches
expect "$scratch/alt" fresh_caches_made -eq 5
expect "$scratch/alt" fresh_cache_pipelines -eq 5
for half in unprobed probed; do
  v=$(get "$scratch/alt" "alternate_${half}_ms_per_pipeline")
  awk -v v="$v" 'BEGIN { exit !(v > 0) }' || fail "alt: alternate_${half}_ms_per_pipeline=$v"
done
plain alt2 --alternate --cache-group 2 --fresh-objects --destroy-each
expect "$scratch/alt2" fresh_caches_made -eq 3
expect "$scratch/alt2" fresh_cache_pipelines -eq 5
plain none
expect "$scratch/none" fresh_caches_made -eq 0
expect "$scratch/none" fresh_cache_pipelines -eq 0
get "$scratch/none" alternate_probed_ms_per_pipeline | grep -q . && fail "none: halves without --alternate"
for bad in "--plain --cache-group 0" "--plain --cache-group x" "--alternate" \
  "--plain --fresh-caches --cache-group 2" "--plain --read-each"; do
  # shellcheck disable=SC2086 # each a list of arguments
  if PCACHE_DISABLE=1 "$demo" $bad >"$scratch/bad" 2>&1; then fail "pcache-demo $bad was accepted"; fi
  grep -q "^usage:" "$scratch/bad" || fail "pcache-demo $bad: no usage message"
done

echo "demo_test: ok"
cat "$scratch/warm"
