#!/usr/bin/env bash
# probe-nv-cache.sh BUILD_DIR - which identity NVIDIA's Vulkan driver files
# its disk cache under, and so which other process can fill a program's
# cache (docs/replay.md "Builds under the program's name"). Each line runs
# `pcache-demo --plain` (128 pipelines, no pcache) in a HOME whose
# ~/.cache the earlier lines of its block filled, and prints the ms per
# pipeline: about 0.03 is a disk-cache hit, about 4-7 a compile.
#   exe name    the same binary copied to another directory (same file
#               name), under another file name, behind a symlink of
#               another name, with another argv[0], with another comm
#               (prctl in an LD_PRELOAD constructor, needs a compiler)
#   app name    __GL_SHADER_DISK_CACHE_APP_NAME set in the filler and in
#               the program; __GL_SHADER_DISK_CACHE_READ_ONLY_APP_NAME
# Needs the NVIDIA driver; the loader and libraries as run-all.sh has them.
set -eu
B=$(cd "$1" && pwd)
D=$B/examples/pcache-demo
W=$(mktemp -d /tmp/pcache-probe-nv.XXXXXX)
trap 'rm -rf "$W"' EXIT
run() { # run HOME PROGRAM [ARGS...]: ms per pipeline
  local home=$1
  shift
  env -u XDG_CACHE_HOME -u __GL_SHADER_DISK_CACHE -u __GL_SHADER_DISK_CACHE_PATH HOME="$home" \
    PCACHE_DISABLE=1 "$@" --plain --pipelines 128 | sed -n 's/^ms_per_pipeline=//p'
}
fresh() { rm -rf "$1"; mkdir -p "$1/.cache"; }
mkdir -p "$W/dir2" "$W/names" "$W/links"
cp "$D" "$W/dir2/pcache-demo"
cp "$D" "$W/names/renamed"
ln -s "$D" "$W/links/renamed"

h=$W/h1
fresh "$h"
echo "exe_cold=$(run "$h" "$D")"
echo "exe_warm=$(run "$h" "$D")"
echo "exe_same_name_other_dir=$(run "$h" "$W/dir2/pcache-demo")"
echo "exe_argv0_changed=$(run "$h" bash -c "exec -a other \"$D\" \"\$@\"" x)"
echo "exe_other_name=$(run "$h" "$W/names/renamed")"
h=$W/h2
fresh "$h"
run "$h" "$W/names/renamed" >/dev/null
echo "symlink_named_like_a_filled_cache=$(run "$h" "$W/links/renamed")"
if command -v cc >/dev/null; then
  printf '%s\n' '#include <stdlib.h>' '#include <sys/prctl.h>' \
    '__attribute__((constructor)) static void c(void) { prctl(PR_SET_NAME, getenv("PROBE_COMM"), 0, 0, 0); }' \
    >"$W/comm.c"
  cc -shared -fPIC -o "$W/comm.so" "$W/comm.c"
  h=$W/h2b
  fresh "$h"
  run "$h" "$W/names/renamed" >/dev/null
  echo "comm_named_like_a_filled_cache=$(PROBE_COMM=renamed LD_PRELOAD=$W/comm.so run "$h" "$D")"
fi
h=$W/h3
fresh "$h"
__GL_SHADER_DISK_CACHE_APP_NAME=probe run "$h" "$W/names/renamed" >/dev/null
echo "app_name_same_in_both=$(__GL_SHADER_DISK_CACHE_APP_NAME=probe run "$h" "$D")"
h=$W/h4
fresh "$h"
__GL_SHADER_DISK_CACHE_APP_NAME=probe run "$h" "$W/names/renamed" >/dev/null
echo "read_only_app_name=$(__GL_SHADER_DISK_CACHE_READ_ONLY_APP_NAME=probe run "$h" "$D")"
echo "cache_files=$(find "$W"/h*/.cache/nvidia -name '*.bin' -printf '%f ' 2>/dev/null)"
