#!/bin/bash
# driver_first_test.sh PCACHED PCACHECTL PCACHE_DEMO FAKE_LAYER_DIR LAYER_DATA_HOME RO_FEATURES
#
# Driver first (client/build.c, docs/client.md): a pipeline pcache has not
# built is first asked of the driver's own caches. Lavapipe has none that
# answers FAIL_ON_PIPELINE_COMPILE_REQUIRED, so VK_LAYER_PCACHE_test_driver_cache
# (fake_cache_layer.c) stands in for a GPU driver's disk cache. The runs, as
# a user meets them:
#   1. a program without pcache fills the driver's cache;
#   2. the first run with pcache (libpcache) over that warm cache: every
#      pipeline is a driver hit, nothing is compiled or staged by default;
#      with PCACHE_STAGE=learn each is staged (its description sent for
#      pcached's replayer to build: the store had nothing of the app), and
#      the replayer builds them;
#   3. the driver's cache emptied: the daemon's blobs, which the store
#      learned from the run it did not serve, serve every pipeline, and the
#      driver is never asked (they were prefetched);
#   4. the driver's cache warm again, the store knows the app: nothing is
#      staged again; with PCACHE_PIPELINES_APP the driver is asked before
#      anything is described, and once a pipeline when it misses; with
#      the prefetch in the upload thread, the daemon and the driver serve
#      as before;
#   5. through the Vulkan layer, a plain program over a warm driver cache:
#      driver hits in the layer's report, staged for a new app name and
#      built, then served by the daemon with the driver's cache emptied;
#   6. PCACHE_DRIVER_FIRST=0: the driver is not asked;
#   7. a program whose features struct is const, in read-only memory, with
#      the feature off: the layer turns it on in a copy (writing the
#      program's struct killed it) and asks the driver first there too.
set -euo pipefail

pcached=$1 pcachectl=$2 demo=$3 fake_layers=$4 layer_home=$5 ro_features=$6
n=12
TEST_NAME=driver_first_test
# shellcheck source=../common/pcached.sh
. "$(dirname "${BASH_SOURCE[0]}")/../common/pcached.sh"
export MESA_SHADER_CACHE_DIR=$scratch/mesa
mkdir -m 0700 "$scratch/driver"
unset PCACHE_DRIVER_FIRST PCACHE_LAYER
# The stand-in driver cache below every program of this test.
export VK_LAYER_PATH=$fake_layers VK_INSTANCE_LAYERS=VK_LAYER_PCACHE_test_driver_cache
export PCACHE_TEST_DRIVER_CACHE=$scratch/driver PCACHE_TEST_DRIVER_CACHE_LOG=$scratch/answers
start_pcached "$pcached" "$pcachectl"

answers() { grep -c "^$1\$" "$scratch/answers" 2>/dev/null || true; }
run() { # run NAME ARGS...: pcache-demo into $scratch/NAME
  local name=$1
  shift
  : >"$scratch/answers"
  "$demo" --pipelines "$n" --app-name driver-first "$@" >"$scratch/$name" 2>"$scratch/$name.err" ||
    { cat "$scratch/$name" "$scratch/$name.err"; fail "pcache-demo $*"; }
}

# 1. No pcache: the driver compiles and fills its cache.
PCACHE_DISABLE=1 run plain --plain
[ "$(answers fill)" -eq "$n" ] || fail "the plain run filled $(answers fill) driver cache entries, expected $n"

# 2. The first run with pcache over the warm driver cache: by default
#    nothing is staged (a separate app name, so the store still has
#    nothing of the app below).
run default-enabled --app-name driver-first-default
expect "$scratch/default-enabled" driver_hits -eq "$n"
expect "$scratch/default-enabled" staged -eq 0
expect "$scratch/default-enabled" compiles -eq 0
PCACHE_STAGE=learn run enabled
expect "$scratch/enabled" driver_first -eq 1
expect "$scratch/enabled" driver_hits -eq "$n"
expect "$scratch/enabled" compiles -eq 0
expect "$scratch/enabled" daemon_hits -eq 0
expect "$scratch/enabled" staged -eq "$n"
[ "$(answers hit)" -eq "$n" ] || fail "the driver answered $(answers hit) hits, expected $n"
[ "$(answers miss)" -eq 0 ] || fail "the driver answered $(answers miss) misses, expected 0"
wait_builds "$pcachectl"

# 3. The driver's cache emptied: the daemon's prefetched blobs, built from
#    the staged descriptions, serve, once the driver was asked first and
#    missed (a prefetched pipeline is asked too: on NVIDIA the driver's
#    own hit is the faster one).
rm -f "$scratch/driver"/*
run served
expect "$scratch/served" daemon_hits -eq "$n"
expect "$scratch/served" compiles -eq 0
expect "$scratch/served" driver_hits -eq 0
[ "$(answers miss)" -eq "$n" ] || fail "the driver answered $(answers miss) misses for prefetched pipelines, expected $n"

# 4. The store knows the app now: a run over a warm driver cache stages
#    nothing (its pipelines were prefetched; none is new).
PCACHE_DISABLE=1 run refill-app --plain
PCACHE_STAGE=learn run known
expect "$scratch/known" staged -eq 0
expect "$scratch/known" compiles -eq 0

# 4b. PCACHE_PIPELINES_APP (pcache-demo --app-owned): no tier needs the
#     state hash, so the driver is asked before anything is described, as
#     the layer does; with its cache emptied the daemon serves, and the
#     driver was asked once a pipeline, not again by the build after it.
run app-owned --app-owned
expect "$scratch/app-owned" driver_hits -eq "$n"
expect "$scratch/app-owned" compiles -eq 0
[ "$(answers hit)" -eq "$n" ] || fail "app-owned: the driver answered $(answers hit) hits, expected $n"
rm -f "$scratch/driver"/*
run app-owned-served --app-owned
expect "$scratch/app-owned-served" daemon_hits -eq "$n"
expect "$scratch/app-owned-served" compiles -eq 0
expect "$scratch/app-owned-served" driver_hits -eq 0
[ "$(answers miss)" -eq "$n" ] ||
  fail "app-owned, driver cache emptied: the driver was asked $(answers miss) times, expected $n"

# 4c. The prefetch in the background (PCACHE_PREFETCH=background, the
#     default on NVIDIA): device creation loads nothing into the device
#     cache; the upload thread prefetches from the driver's first miss.
#     With the driver's cache empty the daemon serves every pipeline all
#     the same (the prefetch, the segment's snapshot at the first miss, or
#     a Get), and nothing is compiled; with it warm again the driver serves
#     them, and nothing is prefetched.
#     Without the segment (PCACHE_NO_SEGMENT=1) the prefetch is pages,
#     which pcached counts (prefetch_scans): one when a miss started it,
#     none in the warm run.
scans() { "$pcachectl" --json status | python3 -c 'import json,sys; print(json.load(sys.stdin)["prefetch_scans"])'; }
rm -f "$scratch/driver"/*
PCACHE_PREFETCH=background run background-served
expect "$scratch/background-served" daemon_hits -eq "$n"
expect "$scratch/background-served" compiles -eq 0
rm -f "$scratch/driver"/*
before=$(scans)
PCACHE_PREFETCH=background PCACHE_NO_SEGMENT=1 run background-pages
expect "$scratch/background-pages" daemon_hits -eq "$n"
expect "$scratch/background-pages" compiles -eq 0
after=$(scans)
[ "$after" -gt "$before" ] || fail "a miss did not start the background prefetch (prefetch_scans $before -> $after)"
PCACHE_DISABLE=1 run refill-background --plain
before=$(scans)
PCACHE_PREFETCH=background PCACHE_NO_SEGMENT=1 run background-warm
expect "$scratch/background-warm" driver_hits -eq "$n"
expect "$scratch/background-warm" compiles -eq 0
expect "$scratch/background-warm" prefetched -eq 0
after=$(scans)
[ "$after" -eq "$before" ] || fail "a warm run prefetched (prefetch_scans $before -> $after)"
PCACHE_PREFETCH=now PCACHE_NO_SEGMENT=1 run prefetch-now
[ "$(scans)" -gt "$after" ] || fail "PCACHE_PREFETCH=now did not prefetch at creation" 

# 5. A plain program through the layer, the driver's cache warm again.
PCACHE_DISABLE=1 run refill --plain
XDG_DATA_HOME=$layer_home PCACHE_LAYER=1 PCACHE_LAYER_STATS=1 PCACHE_NO_PREFETCH=1 \
  run layer --plain
line=$(grep '^pcache-layer ' "$scratch/layer.err" | head -n1)
[ -n "$line" ] || { cat "$scratch/layer.err"; fail "no layer report"; }
case " $line " in
*" driver_hits=$n "*) ;;
*) fail "through the layer: $line (expected driver_hits=$n)" ;;
esac
case " $line " in
*" compiles=0 "*) ;;
*) fail "through the layer: $line (expected compiles=0)" ;;
esac
# A new app through the layer, the prefetch on: the store has nothing of it,
# so its driver hits are described after the driver returned them and
# staged; once built, the daemon serves them with the driver's cache emptied.
XDG_DATA_HOME=$layer_home PCACHE_LAYER=1 PCACHE_LAYER_STATS=1 PCACHE_APP_NAME=layer-learn \
  PCACHE_STAGE=learn run layer-learn --plain
line=$(grep '^pcache-layer ' "$scratch/layer-learn.err" | head -n1)
case " $line " in
*" driver_hits=$n "*) ;;
*) fail "a new app through the layer: $line (expected driver_hits=$n)" ;;
esac
case " $line " in
*" staged=$n "*) ;;
*) fail "a new app through the layer: $line (expected staged=$n)" ;;
esac
wait_builds "$pcachectl"
rm -f "$scratch/driver"/*
XDG_DATA_HOME=$layer_home PCACHE_LAYER=1 PCACHE_LAYER_STATS=1 PCACHE_APP_NAME=layer-learn \
  run layer-served --plain
line=$(grep '^pcache-layer ' "$scratch/layer-served.err" | head -n1)
case " $line " in
*" daemon_hits=$n "*) ;;
*) fail "the layer's staged pipelines, driver cache emptied: $line (expected daemon_hits=$n)" ;;
esac
case " $line " in
*" compiles=0 "*) ;;
*) fail "the layer's staged pipelines, driver cache emptied: $line (expected compiles=0)" ;;
esac
PCACHE_DISABLE=1 run refill-layer --plain

# 6. Turned off: the driver is not asked first.
PCACHE_DRIVER_FIRST=0 PCACHE_NO_PREFETCH=1 run off
expect "$scratch/off" driver_hits -eq 0
[ "$(answers hit)" -eq 0 ] && [ "$(answers miss)" -eq 0 ] ||
  fail "PCACHE_DRIVER_FIRST=0 still asked the driver ($(answers hit) hits, $(answers miss) misses)"
# 7. The const features struct.
: >"$scratch/answers"
PCACHE_DISABLE=1 "$ro_features" >"$scratch/ro-fill" 2>&1 || { cat "$scratch/ro-fill"; fail "ro_features without pcache"; }
: >"$scratch/answers"
XDG_DATA_HOME=$layer_home PCACHE_LAYER=1 PCACHE_LAYER_STATS=1 "$ro_features" \
  >"$scratch/ro" 2>"$scratch/ro.err" || { cat "$scratch/ro" "$scratch/ro.err"; fail "ro_features through the layer"; }
line=$(grep '^pcache-layer ' "$scratch/ro.err" | head -n1)
case " $line " in
*" driver_hits=1 "*) ;;
*) fail "const features: $line (expected driver_hits=1)" ;;
esac
[ "$(answers invalid)" -eq 0 ] || fail "FAIL_ON_PIPELINE_COMPILE_REQUIRED on a device without the feature"
echo "driver_first_test: passed"
