#!/usr/bin/env bash
# run-all.sh - the whole benchmark set (issue 7), key=value lines on stdout,
# a copy in a log file.
#
#   bench/run-all.sh [--build-dir DIR] [--no-build] [--sizes "256 2048"]
#                    [--rss-entries N] [--quick] [--log FILE]
#
#   --build-dir DIR   build directory (default: <repo>/build-bench); with
#                     --no-build it must already hold pcached and the benches
#   --no-build        do not run cmake (the GPU machine has no cmake/glslang)
#   --sizes LIST      pipeline-set sizes for the warm-start test
#   --rss-entries N   entries of 20 KiB in the RSS store (default 52429 ~ 1 GiB)
#   --quick           a smoke run: small sizes and short runs
#
# Env overrides: PCACHED (daemon binary), BENCH_BIN (dir of the benches),
# BENCH_WORK (scratch dir on a real disk: durable Puts need fsync; default
# <build>/bench-work), DRIVER_KIND (nvidia|mesa|other, else detected from
# the device), VK_DRIVER_FILES / LD_LIBRARY_PATH (passed through), and
# BENCH_THREADS (threads for bench_tiers, default every core).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/.." && pwd)
ARGS="$*"
BUILD_DIR=$SRC/build-bench
BUILD=1
SIZES="256 2048"
RSS_ENTRIES=52429
QUICK=0
LOG=""
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --sizes) SIZES=$2; shift 2 ;;
    --rss-entries) RSS_ENTRIES=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --log) LOG=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

if [ "$BUILD" = 1 ]; then
  cmake -S "$SRC" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DPCACHE_BUILD_TESTS=OFF \
    -DPCACHE_BUILD_EXAMPLES=OFF >/dev/null
  cmake --build "$BUILD_DIR" -j"$(nproc)" --target pcached bench_warm bench_delivery \
    bench_ingest bench_tiers >/dev/null
fi
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
WORK_DIR=${BENCH_WORK:-$BUILD_DIR/bench-work}
rm -rf "$WORK_DIR"
mkdir -p "$WORK_DIR"
# shellcheck source=lib.sh
. "$HERE/lib.sh"
trap stop_daemon EXIT
[ -x "$PCACHED" ] || die "no pcached at $PCACHED (build first, or set PCACHED)"
for b in bench_warm bench_delivery bench_ingest bench_tiers; do
  [ -x "$BENCH_BIN/$b" ] || die "no $b in $BENCH_BIN"
done

# Vulkan wants a runtime dir; never touch the user's real pcache socket.
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
  XDG_RUNTIME_DIR=$(mktemp -d /tmp/pcb-xdg.XXXXXX)
  export XDG_RUNTIME_DIR
fi
unset PCACHE_SOCKET PCACHE_DISABLE PCACHE_NO_PREFETCH

DELIVERY_COUNT=10000
GETS=20000
BULK_COUNT=2048
BULK_GETS=5000
INGEST_S=3
TIER_ITERS=20000000
INFO_ITERS=200000
if [ "$QUICK" = 1 ]; then
  SIZES="64"; RSS_ENTRIES=2000; DELIVERY_COUNT=1000; GETS=2000; INGEST_S=0.5
  BULK_COUNT=256; BULK_GETS=500
  TIER_ITERS=1000000; INFO_ITERS=20000
fi

LOG=${LOG:-$WORK_DIR/../bench-$(date -u +%Y%m%dT%H%M%SZ).log}
exec > >(tee "$LOG") 2>&1

echo "# pcache benchmarks"
echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "command=$0 $ARGS"
echo "host_cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -n1)"
echo "host_cores=$(nproc)"
echo "git_commit=$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)"
probe_driver
cat "$WORK_DIR/probe.txt"

echo "# warm start (ms per pipeline; fresh process per measure)"
"$HERE/run-warm.sh" --build-dir "$BUILD_DIR" --sizes "$SIZES" --work-dir "$WORK_DIR/warm"

echo "# delivery: Get latency, prefetch vs one file per entry"
start_daemon delivery
"$BENCH_BIN/bench_delivery" --socket "$DAEMON_SOCKET" --count $DELIVERY_COUNT --size 20480 \
  --fill --clients 1,8 --gets $GETS --files-dir "$WORK_DIR/files"
stop_daemon
rm -rf "$WORK_DIR/files"

# Blobs over 64 KiB travel as sealed memfds: one Get each of a 106 KB blob
# (the size of this set's NVIDIA pipelines) is what fetching per miss,
# warm-start mode (e), asks of the daemon.
echo "# delivery of memfd replies: Gets of one 106 KB blob"
start_daemon bulk
"$BENCH_BIN/bench_delivery" --socket "$DAEMON_SOCKET" --count $BULK_COUNT --size 106000 \
  --fill --clients 1 --gets $BULK_GETS --prefetch-reps 0 --prefix bulk_
stop_daemon

echo "# ingest: durable Puts per second"
start_daemon ingest
"$BENCH_BIN/bench_ingest" --socket "$DAEMON_SOCKET" --clients 1,8 --seconds $INGEST_S
stop_daemon

echo "# in-process tiers"
"$BENCH_BIN/bench_tiers" --threads "${BENCH_THREADS:-$(nproc)}" --tier-iters $TIER_ITERS \
  --info-iters $INFO_ITERS

# How the driver's merge cost depends on grouping (the client's prefetch
# merges per-pipeline blobs), with the monolithic load for reference.
if [ -x "$BENCH_BIN/bench_merge" ]; then
  echo "# merge: per-pipeline blobs grouped G per vkMergePipelineCaches call"
  MERGE_N=2048
  [ "$QUICK" = 1 ] && MERGE_N=64
  # shellcheck disable=SC2046 # cache_off prints VAR=value words for env
  env $(cache_off) "$BENCH_BIN/bench_merge" --pipelines $MERGE_N --groups 1,16,64,256,0
fi

# bench_desc (the describer's own benchmark) runs when it was built.
if [ -x "$BENCH_BIN/bench_desc" ]; then
  echo "# pipeline description (describe + hash, no device)"
  "$BENCH_BIN/bench_desc"
fi

echo "# daemon memory after a full prefetch"
# Room for the whole store: the default cap (1 GiB) would start evicting.
start_daemon rss --max-size 4G
echo "rss_store_entries=$RSS_ENTRIES"
"$BENCH_BIN/bench_delivery" --socket "$DAEMON_SOCKET" --count "$RSS_ENTRIES" --size 20480 \
  --fill --clients 0 --prefetch-reps 1 --rss-pid "$DAEMON_PID" --prefix rss_ --app bench-rss
stop_daemon
rm -rf "$WORK_DIR"/data-*

echo "# done; log: $LOG"
