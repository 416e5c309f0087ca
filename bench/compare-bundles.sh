#!/usr/bin/env bash
# compare-bundles.sh - two builds side by side in one run, interleaved, on
# the measures that have no baseline of their own inside one run: the
# in-process tier hit (bench_tiers) and the daemon's Get latency and
# Prefetch throughput (bench_delivery, each build with its own pcached).
#
#   bench/compare-bundles.sh OLD_BUNDLE NEW_BUNDLE [ROUNDS]
#
# Bundles are what bench/gpu-bundle.sh makes. Prints <old|new>_<key>=
# lines per round, then the median of each key per build.
set -euo pipefail
OLD=$(cd "$1" && pwd)
NEW=$(cd "$2" && pwd)
ROUNDS=${3:-3}
work=$(mktemp -d /tmp/pcache-cmp.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -m 0700 "$work/run"
export XDG_RUNTIME_DIR=$work/run

one() { # one NAME BUNDLE
  local name=$1 b=$2 sock=$work/$1.sock data=$work/$1.data pid
  rm -rf "$data"
  LD_LIBRARY_PATH=$b/lib "$b/daemon/pcached" --socket "$sock" --data-dir "$data" \
    --log-level warn 2>>"$work/$name.log" &
  pid=$!
  for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
  LD_LIBRARY_PATH=$b/lib "$b/bench/bench_delivery" --socket "$sock" --count 10000 --size 20480 \
    --fill --clients 1,8 --gets 20000 --prefetch-reps 3 |
    grep -E '^(get_c1_p50_us|get_c1_p99_us|get_c8_p50_us|get_c8_p99_us|prefetch_gbps)=' |
    sed "s/^/${name}_/"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  LD_LIBRARY_PATH=$b/lib "$b/bench/bench_tiers" --threads "$(nproc)" --tier-iters 20000000 \
    --info-iters 200000 | grep -E '^tier_hit_t' | sed "s/^/${name}_/"
}

for r in $(seq "$ROUNDS"); do
  echo "# round $r"
  if [ $((r % 2)) = 1 ]; then one old "$OLD"; one new "$NEW"; else one new "$NEW"; one old "$OLD"; fi
done | tee "$work/all.txt"

echo "# medians"
for key in $(sed -n 's/^\(old\|new\)_\([a-z0-9_]*\)=.*/\2/p' "$work/all.txt" | sort -u); do
  for name in old new; do
    v=$(sed -n "s/^${name}_${key}=//p" "$work/all.txt" | sort -g |
        awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
    echo "median_${name}_${key}=$v"
  done
done
