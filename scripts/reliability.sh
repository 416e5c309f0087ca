#!/bin/bash
# reliability.sh - the reliability suite of docs/RELIABILITY.md, in one go:
# fuzzing (libFuzzer, ASan+UBSan), crash consistency (kill -9 under 8
# writers), the bad-input matrix, hostile and slow peers, disk full and a
# full map, a daemon killed mid-request under libpcache, and load.
#
#   scripts/reliability.sh [--long] [--fuzz-seconds N] [--no-build] [--no-fuzz]
#
#   (default)         CI-sized, a few minutes at most: each fuzz target over
#                     its seed corpus plus 3 s, 5 kills, 5 s of load
#   --long            each fuzz target for --fuzz-seconds (default 300) or
#                     until 10 million executions, 50 kills, 60 s of load
#   --fuzz-seconds N  time per fuzz target
#   --no-build        use the existing build directories
#   --no-fuzz         skip the fuzzers (no clang needed)
#
# Environment: PCACHE_REL_BUILD_DIR (default build-rel), PCACHE_FUZZ_BUILD_DIR
# (build-fuzz), PCACHE_REL_OUT (where logs and the summary go; default
# <build-rel>/reliability-<mode>), PCACHE_REL_FUZZ_TARGETS (which fuzz
# targets, default "frame dispatch blob archive desc"), PCACHE_JOBS (2).
# Exit status: 0 when every part passed and no fuzzer found anything.
set -uo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=${PCACHE_JOBS:-2}
long=0 build=1 fuzz=1 fuzz_seconds=

while [ $# -gt 0 ]; do
  case $1 in
    --long) long=1 ;;
    --fuzz-seconds) fuzz_seconds=${2:?--fuzz-seconds needs a value}; shift ;;
    --no-build) build=0 ;;
    --no-fuzz) fuzz=0 ;;
    -h|--help) sed -n '2,21s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "reliability.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done

abs() { case $1 in /*) echo "$1" ;; *) echo "$src/$1" ;; esac; }
build_rel=$(abs "${PCACHE_REL_BUILD_DIR:-build-rel}")
build_fuzz=$(abs "${PCACHE_FUZZ_BUILD_DIR:-build-fuzz}")
if [ "$long" = 1 ]; then
  mode=long kills=50 load_seconds=60 client_rounds=10
  fuzz_seconds=${fuzz_seconds:-300} fuzz_runs=10000000
else
  mode=short kills=5 load_seconds=5 client_rounds=3
  fuzz_seconds=${fuzz_seconds:-3} fuzz_runs=-1
fi
out=$(abs "${PCACHE_REL_OUT:-$build_rel/reliability-$mode}")
rm -rf "$out"
mkdir -p "$out"
figures=$out/figures.txt
: >"$figures"

start=$(date +%s)
say() { printf '\n== [%4ss] %s\n' "$(($(date +%s) - start))" "$*"; }
failed=0

# Tests must never reach a user's real daemon or cache.
unset PCACHE_SOCKET PCACHE_DATA_DIR PCACHE_DISABLE PCACHE_TIMEOUT_MS

# build_dir DIR "TARGETS" CMAKE_ARGS... (TARGETS empty: everything)
build_dir() {
  local dir=$1 targets=$2 log=$1/reliability-build.log t
  local -a targs=()
  shift 2
  for t in $targets; do targs+=(--target "$t"); done
  mkdir -p "$dir"
  if ! { cmake -S "$src" -B "$dir" -DPCACHE_WERROR=ON -DPCACHE_BUILD_BENCH=OFF \
           -DPCACHE_BUILD_EXAMPLES=OFF "$@" && cmake --build "$dir" -j "$jobs" "${targs[@]}"; } \
       >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "reliability.sh: build in $dir failed (log: $log)" >&2
    exit 1
  fi
}

if [ "$build" = 1 ]; then
  say "Build (-Werror) in $build_rel"
  build_dir "$build_rel" "" -DCMAKE_BUILD_TYPE=RelWithDebInfo
  if [ "$fuzz" = 1 ]; then
    say "libFuzzer build (clang, ASan+UBSan) in $build_fuzz"
    build_dir "$build_fuzz" "fuzz_frame fuzz_dispatch fuzz_blob fuzz_binblob fuzz_archive fuzz_desc" \
      -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPCACHE_FUZZ=ON
  fi
fi

# ------------------------------------------------------------------ fuzzing
# One target at a time, in-process (no -jobs/-workers: those fork a job whose
# output goes to ./fuzz-N.log): the machine is shared. Each runs over a
# scratch copy of its seed corpus, so what it finds grows there and the
# committed corpus stays small; crashes land in $out/fuzz/artifacts.
fuzz_targets=${PCACHE_REL_FUZZ_TARGETS:-frame dispatch blob binblob archive desc}
if [ "$fuzz" = 1 ]; then
  mkdir -p "$out/fuzz/artifacts"
  for t in $fuzz_targets; do
    bin=$build_fuzz/tests/fuzz/fuzz_$t
    if [ ! -x "$bin" ]; then
      echo "reliability.sh: $bin missing" >&2
      failed=1
      continue
    fi
    say "Fuzz $t: ${fuzz_seconds}s$([ "$long" = 1 ] && echo " or $fuzz_runs executions")"
    corpus=$out/fuzz/corpus/$t
    mkdir -p "$corpus"
    cp "$src/tests/fuzz/corpus/$t/"* "$corpus/"
    log=$out/fuzz/$t.log
    LSAN_OPTIONS=suppressions=$src/scripts/lsan.supp:print_suppressions=0 \
      "$bin" -max_total_time="$fuzz_seconds" -runs="$fuzz_runs" \
      -max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$out/fuzz/artifacts/$t-" "$corpus" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    secs=$(grep -o 'DONE.*' "$log" | tail -1)
    cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1)
    crashes=$(ls "$out/fuzz/artifacts/$t-"* 2>/dev/null | wc -l)
    echo "fuzz_${t}_executions ${execs:-0}" >>"$figures"
    echo "fuzz_${t}_exec_per_s ${speed:-0}" >>"$figures"
    echo "fuzz_${t}_coverage ${cov:-?}" >>"$figures"
    echo "fuzz_${t}_corpus $(ls "$corpus" | wc -l)" >>"$figures"
    echo "fuzz_${t}_findings $crashes" >>"$figures"
    echo "  ${execs:-0} executions (${speed:-?}/s), ${cov:-?}, findings: $crashes"
    if [ "$rc" != 0 ] || [ "$crashes" != 0 ]; then
      grep -E 'ERROR|SUMMARY|#[0-9]+ .* in ' "$log" | head -20 >&2
      echo "reliability.sh: fuzz target $t failed (log: $log)" >&2
      failed=1
    fi
  done
fi

# ------------------------------------------------------------ the test suite
# Everything labelled "reliability": the fuzz replays, the bad-input matrix,
# crash consistency, hostile peers, disk full, client kills, load. One test
# at a time in long mode, so the load figures are the daemon's alone.
say "Reliability tests ($mode: $kills kills, ${load_seconds}s of load)"
ctest_jobs=$jobs
[ "$long" = 1 ] && ctest_jobs=1
if ! (cd "$build_rel" && \
      PCACHE_REL_FIGURES=$figures PCACHE_REL_KILLS=$kills PCACHE_REL_LOAD_SECONDS=$load_seconds \
      PCACHE_REL_CLIENT_ROUNDS=$client_rounds \
      ctest --output-on-failure -j "$ctest_jobs" -L reliability --timeout 600 \
        >"$out/ctest.log" 2>&1); then
  # Without the daemons' own log lines (common/log.h: "<N>" under the
  # journal, "level: " elsewhere).
  grep -vE '^(<[0-9]>|(emerg|alert|crit|error|warning|notice|info|debug): )' "$out/ctest.log" |
    tail -n 60 >&2
  echo "reliability.sh: reliability tests failed (log: $out/ctest.log)" >&2
  failed=1
fi
grep -E 'tests passed|Passed|Failed|Not Run|Skipped' "$out/ctest.log" |
  grep -vE '^(<[0-9]>|(emerg|alert|crit|error|warning|notice|info|debug): )' || true

# ------------------------------------------------------------------ summary
say "Figures ($figures)"
{
  echo "# pcache reliability run ($mode)"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- machine: $(uname -srm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "- command: scripts/reliability.sh $([ "$long" = 1 ] && echo --long) --fuzz-seconds $fuzz_seconds"
  echo "- wall time: $(($(date +%s) - start)) s"
  echo
  echo '| figure | value |'
  echo '|---|---|'
  sed 's/^\([^ ]*\) \(.*\)$/| \1 | \2 |/' "$figures"
} >"$out/summary.md"
cat "$out/summary.md"
if [ "$failed" = 0 ]; then
  say "All reliability checks passed"
else
  say "FAILED (see above)"
fi
exit "$failed"
