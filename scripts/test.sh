#!/bin/bash
# test.sh - build pcache with -Werror and run the whole test suite, then the
# same suite in an AddressSanitizer + UndefinedBehaviorSanitizer build, then
# the client and daemon tests in a ThreadSanitizer build. libpcache alone is
# also compiled with -DPCACHE_PHASE_TIMING=ON, a benchmark option nothing
# else builds.
#
#   scripts/test.sh [--no-sanitize] [--no-tsan] [--fuzz-smoke] [--no-deps]
#
#   --no-sanitize  skip the ASan+UBSan build
#   --no-tsan      skip the ThreadSanitizer build of the client and daemon tests
#   --fuzz-smoke   also a clang libFuzzer build; each fuzz target runs briefly
#   --no-deps      do not check or install Debian packages
#
# Environment: PCACHE_TEST_BUILD_DIR (default build-test), PCACHE_ASAN_BUILD_DIR
# (build-asan), PCACHE_TSAN_BUILD_DIR (build-tsan), PCACHE_FUZZ_BUILD_DIR
# (build-fuzz), PCACHE_PHASE_BUILD_DIR (build-phase), relative to the source
# tree unless absolute; PCACHE_JOBS (parallel jobs for building and ctest,
# default 2).
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=${PCACHE_JOBS:-2}
sanitize=1 tsan=1 fuzz=0 deps=1

while [ $# -gt 0 ]; do
  case $1 in
    --no-sanitize) sanitize=0 ;;
    --no-tsan) tsan=0 ;;
    --tsan) tsan=1 ;; # the default; kept so older command lines still work
    --fuzz-smoke) fuzz=1 ;;
    --no-deps) deps=0 ;;
    -h|--help) sed -n '2,21s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "test.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done

abs() { case $1 in /*) echo "$1" ;; *) echo "$src/$1" ;; esac; }
build_test=$(abs "${PCACHE_TEST_BUILD_DIR:-build-test}")
build_asan=$(abs "${PCACHE_ASAN_BUILD_DIR:-build-asan}")
build_tsan=$(abs "${PCACHE_TSAN_BUILD_DIR:-build-tsan}")
build_fuzz=$(abs "${PCACHE_FUZZ_BUILD_DIR:-build-fuzz}")
build_phase=$(abs "${PCACHE_PHASE_BUILD_DIR:-build-phase}")

start=$(date +%s)
say() { printf '\n== [%4ss] %s\n' "$(($(date +%s) - start))" "$*"; }
summary=()
failed=0

# build DIR CMAKE_ARGS... [--target T]...: configure and build (only the
# targets named, if any), showing output only on failure.
build() {
  local dir=$1 args=() targets=()
  shift
  while [ $# -gt 0 ]; do
    if [ "$1" = --target ]; then targets+=(--target "$2"); shift; else args+=("$1"); fi
    shift
  done
  mkdir -p "$dir"
  if ! { cmake -S "$src" -B "$dir" -DPCACHE_WERROR=ON "${args[@]}" &&
      cmake --build "$dir" -j "$jobs" "${targets[@]}"; } >"$dir/test-build.log" 2>&1; then
    tail -n 80 "$dir/test-build.log" >&2
    echo "test.sh: build in $dir failed (full log: $dir/test-build.log)" >&2
    exit 1
  fi
}

# run_ctest NAME DIR CTEST_ARGS...
run_ctest() {
  local name=$1 dir=$2 t0=$(date +%s)
  shift 2
  # A failing suite does not stop the others: one run shows every problem.
  if (cd "$dir" && ctest --output-on-failure -j "$jobs" --no-tests=error "$@"); then
    summary+=("$name: passed in $(($(date +%s) - t0))s")
  else
    summary+=("$name: FAILED in $(($(date +%s) - t0))s (rerun: ctest --test-dir $dir --rerun-failed --output-on-failure)")
    failed=1
  fi
}

# Tests must never reach a user's real daemon or cache.
unset PCACHE_SOCKET PCACHE_DATA_DIR PCACHE_DISABLE PCACHE_TIMEOUT_MS

if [ "$deps" = 1 ]; then
  say "Debian packages"
  "$src/scripts/setup-deps.sh"
fi

say "Build (-Werror) in $build_test"
build "$build_test" -DCMAKE_BUILD_TYPE=RelWithDebInfo
# PCACHE_PHASE_TIMING's code (client/phase.c and its calls in pipeline.c
# and build.c) is compiled only with the option: here, so that it cannot
# rot. libpcache alone, as the suite's build type; about 6 s on 2 cores.
say "PCACHE_PHASE_TIMING build of libpcache (-Werror) in $build_phase"
t0=$(date +%s)
build "$build_phase" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPCACHE_PHASE_TIMING=ON \
  -DPCACHE_BUILD_TESTS=OFF -DPCACHE_BUILD_BENCH=OFF -DPCACHE_BUILD_EXAMPLES=OFF --target pcache
summary+=("phase-timing: libpcache compiled in $(($(date +%s) - t0))s")
say "Test suite"
run_ctest "default" "$build_test"

if [ "$sanitize" = 1 ]; then
  # Benchmarks are not tests, and the demo is covered by the default build.
  say "ASan+UBSan build in $build_asan"
  build "$build_asan" -DCMAKE_BUILD_TYPE=Debug -DPCACHE_SANITIZE=address,undefined \
    -DPCACHE_BUILD_BENCH=OFF
  # Tests labelled no-asan measure what ASan changes (memory use, timing)
  # and are left out of this run.
  # The driver's own leaks, with no pcache code running: informative only.
  # ASan builds keep the driver mapped until exit (tests/sanitize/
  # keep_modules.c), so what it still holds at exit is not reported and what
  # it really leaks is named by module; scripts/lsan.supp suppresses only
  # the driver's and LLVM's modules, and every other report fails a test.
  # The test asan_leak_canary proves a leak in pcache code still fails.
  if [ -x "$build_asan/tests/sanitize/vk_leak_probe" ]; then
    if probe=$(ASAN_OPTIONS=detect_leaks=1 "$build_asan/tests/sanitize/vk_leak_probe" 2>&1); then
      echo "driver leak probe (no pcache code, no suppressions): no leaks"
    else
      echo "driver leak probe (no pcache code, no suppressions) reported, suppressed by module in the suite:"
      grep -E '^(Direct|Indirect) leak|^SUMMARY|vk_leak_probe:' <<<"$probe" | sed 's/^/  /'
    fi
  fi
  say "Test suite under ASan+UBSan (without label no-asan)"
  asan_failed_before=$failed
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  LSAN_OPTIONS=suppressions=$src/scripts/lsan.supp:print_suppressions=0 \
    run_ctest "asan+ubsan" "$build_asan" -LE no-asan
  if [ "$failed" != "$asan_failed_before" ]; then
    # Says which leaks no pcache frame allocated, and how to confirm that
    # the driver leaks.
    python3 "$src/scripts/lsan-triage.py" "$build_asan/Testing/Temporary/LastTest.log" \
      "$src" "$build_asan" || true
  fi
fi

if [ "$tsan" = 1 ]; then
  say "TSan build in $build_tsan"
  build "$build_tsan" -DCMAKE_BUILD_TYPE=Debug -DPCACHE_SANITIZE=thread -DPCACHE_BUILD_BENCH=OFF \
    -DPCACHE_BUILD_EXAMPLES=OFF
  say "Client and daemon tests under TSan"
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$src/scripts/tsan.supp \
    run_ctest "tsan" "$build_tsan" -L 'client|daemon|vulkan' -LE no-tsan
fi

if [ "$fuzz" = 1 ]; then
  say "libFuzzer build (clang) in $build_fuzz"
  build "$build_fuzz" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DPCACHE_FUZZ=ON -DPCACHE_BUILD_BENCH=OFF \
    -DPCACHE_BUILD_EXAMPLES=OFF
  say "Fuzz smoke runs"
  LSAN_OPTIONS=suppressions=$src/scripts/lsan.supp:print_suppressions=0 \
    run_ctest "fuzz-smoke" "$build_fuzz" -L fuzz-smoke
fi

say "Done in $(($(date +%s) - start))s"
printf '  %s\n' "${summary[@]}"
exit "$failed"
