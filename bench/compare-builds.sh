#!/usr/bin/env bash
# compare-builds.sh OLD_BUILD NEW_BUILD [ROUNDS] - the same benchmarks on
# two builds of pcache (Release, with -DPCACHE_BUILD_BENCH=ON), round by
# round, old then new, so that the machine's swing falls on both alike:
# tier hits (bench_tiers, 2 threads), a Get's latency and a Prefetch
# (bench_delivery, 1,000 entries of 20 KB), and a warm start through
# libpcache and pcached (bench_warm mode d, 256 pipelines) on whatever
# Vulkan driver the machine has. Each build's own pcached, on a fresh
# store. Prints key=value lines prefixed by old/new, then each key's
# medians and new/old.
set -u
OLD=$(cd "$1" && pwd)
NEW=$(cd "$2" && pwd)
ROUNDS=${3:-3}
W=$(mktemp -d /tmp/pcache-compare.XXXXXX)
trap 'rm -rf "$W"' EXIT
export XDG_RUNTIME_DIR=$W/run MESA_SHADER_CACHE_DIR=$W/mesa
mkdir -m 0700 "$XDG_RUNTIME_DIR" "$MESA_SHADER_CACHE_DIR"
one() { # one SIDE BUILD
  local side=$1 b=$2 d s p
  d=$(mktemp -d "$W/d.XXXXXX")
  s=$d/sock
  "$b/bench/bench_tiers" --threads 2 --tier-iters 2000000 --info-iters 200000 2>/dev/null |
    grep -E '^(tier|info)_hit_t[12]_ns=' | sed "s/^/${side}_/"
  "$b/daemon/pcached" --socket "$s" --data-dir "$d/data" --log-level error 2>/dev/null &
  p=$!
  for _ in $(seq 100); do [ -S "$s" ] && break; sleep 0.05; done
  "$b/bench/bench_delivery" --socket "$s" --count 1000 --fill --clients 1 --gets 3000 \
    --prefetch-reps 1 --window off 2>/dev/null | grep -E '^(get_c1_p50_us|get_c1_p99_us|prefetch_ms)=' |
    sed "s/^/${side}_/"
  PCACHE_SOCKET=$s "$b/bench/bench_warm" --mode d --phase fill --n 256 --app compare >/dev/null 2>&1
  PCACHE_SOCKET=$s "$b/bench/bench_warm" --mode d --phase measure --n 256 --app compare 2>/dev/null |
    grep -E '^ms_per_pipeline=' | sed "s/^/${side}_warm_/"
  kill "$p"
  wait "$p" 2>/dev/null
}
for k in $(seq 1 "$ROUNDS"); do
  one old "$OLD"
  one new "$NEW"
done | tee "$W/all"
for key in tier_hit_t1_ns tier_hit_t2_ns info_hit_t1_ns info_hit_t2_ns get_c1_p50_us get_c1_p99_us \
  prefetch_ms warm_ms_per_pipeline; do
  o=$(sed -n "s/^old_$key=//p" "$W/all" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
  n=$(sed -n "s/^new_$key=//p" "$W/all" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
  awk -v k="$key" -v o="$o" -v n="$n" 'BEGIN { printf "%s_old=%s %s_new=%s %s_ratio=%.3f\n", k, o, k, n, k, (o > 0 ? n / o : 0) }'
done
