#!/usr/bin/env bash
# gpu-run.sh - on a GPU machine with a driver but no Debian libraries, run
# the demo (cold, then warm) and the whole benchmark set from a bundle that
# bench/gpu-bundle.sh made.
#
#   bench/gpu-run.sh BUNDLE_DIR [run-all.sh options...]
#
# Env: OUT (folder for the log; default BUNDLE_DIR), WARM_REPEATS (run the
# warm-start set this many times, default 1), VK_DRIVER_FILES (the
# ICD manifest; default: the NVIDIA one where the device README puts it),
# GPU_RUN (which parts, default "demo bench layer": the demo cold and warm,
# run-all.sh's set, run-layer.sh's plain program through the Vulkan layer;
# also "diskprobe": probe-disk-cache.sh, the driver's disk cache under each
# configuration; "replay": run-replay.sh, replay after a simulated driver
# update on the demo's heavy set; "gpl": bench_gpl, fast-linked misses on
# pcache-demo's heavy set, and known parts in a new process through a
# private pcached; "warm": run-warm.sh alone, WARM_REPEATS times at
# WARM_SIZES; "binary": probe-binary.sh, what each way of getting a
# pipeline costs: the driver's disk cache, its compile-required probe,
# VK_KHR_pipeline_binary's capture, query and creation). LAYER_ARGS: more arguments for run-layer.sh
# ("--light 0"); REPLAY_ARGS: for run-replay.sh ("--heavy 512"); GPL_ARGS:
# for bench_gpl (default "--pipelines 256 --draws 50").
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "$1" && pwd)
shift
LOGDIR=${OUT:-$B}

# The loader, unpacked into / as the device README prescribes (only the
# loader and GL dispatch packages: anything else stays out of /).
for f in "$B"/debs/*.deb; do
  case $(basename "$f") in
    libvulkan1_* | libegl1_* | libglvnd0_* | libopengl0_* | libgl1_* | libglx0_* | libgles2_*)
      dpkg -x "$f" / ;;
  esac
done
ldconfig
export LD_LIBRARY_PATH=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nv=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$nv" ]; then
  # Headless: the manifest's libGLX_nvidia.so.0 refuses without a display;
  # the same entry points are in libEGL_nvidia.so.0.
  sed 's/libGLX_nvidia\.so\.0/libEGL_nvidia.so.0/' "$nv" >/tmp/nvidia_icd_egl.json
  export VK_DRIVER_FILES=/tmp/nvidia_icd_egl.json
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true

parts=" ${GPU_RUN:-demo bench layer} "
if [[ $parts == *" demo "* ]]; then
# The demo: a private daemon, the example app cold then warm.
work=$(mktemp -d /tmp/pcache-gpu.XXXXXX)
mkdir -m 0700 "$work/run"
export XDG_RUNTIME_DIR=$work/run
"$B/daemon/pcached" --socket "$work/sock" --data-dir "$work/data" --log-level warn &
dpid=$!
for _ in $(seq 100); do [ -S "$work/sock" ] && break; sleep 0.05; done
for run in cold warm; do
  echo "# demo $run (__GL_SHADER_DISK_CACHE=0)"
  __GL_SHADER_DISK_CACHE=0 PCACHE_SOCKET=$work/sock "$B/examples/pcache-demo" --pipelines 64 |
    tee -a "$LOGDIR/demo-gpu.log"
done
PCACHE_SOCKET=$work/sock "$B/tools/pcachectl" status | tee -a "$LOGDIR/demo-gpu.log"
kill "$dpid"; wait "$dpid" || true
rm -rf "$work"
fi

if [[ $parts == *" bench "* ]]; then
BENCH_WORK=/tmp/pcache-bw "$SRC/bench/run-all.sh" --build-dir "$B" --no-build \
  --log "$LOGDIR/bench-gpu.log" "$@"

# Warm starts are single fresh processes and small sizes are noisy:
# WARM_REPEATS=K runs the warm-start set K-1 more times for a median.
for k in $(seq 2 "${WARM_REPEATS:-1}"); do
  echo "# warm start, repeat $k"
  "$SRC/bench/run-warm.sh" --build-dir "$B" --sizes "256 2048" --work-dir "/tmp/pcache-bw-warm$k" |
    tee "$LOGDIR/warm-repeat-$k.log"
done
fi

if [[ $parts == *" warm "* ]]; then
  # The warm-start set alone (run-warm.sh), WARM_REPEATS times, at
  # WARM_SIZES (default "256 2048").
  wrun=$(mktemp -d /tmp/pcache-warm-run.XXXXXX)
  chmod 700 "$wrun"
  for k in $(seq 1 "${WARM_REPEATS:-1}"); do
    echo "# warm start, repeat $k"
    XDG_RUNTIME_DIR=$wrun PCACHED=$B/daemon/pcached BENCH_BIN=$B/bench "$SRC/bench/run-warm.sh" \
      --build-dir "$B" --sizes "${WARM_SIZES:-256 2048}" --work-dir "/tmp/pcache-ww$k" |
      tee "$LOGDIR/warm-$k.log"
    rm -rf "/tmp/pcache-ww$k"
  done
  rm -rf "$wrun"
fi

if [[ $parts == *" layer "* ]]; then
  # A private runtime dir: the loader and the daemon want one.
  lrun=$(mktemp -d /tmp/pcache-layer-run.XXXXXX)
  chmod 700 "$lrun"
  echo "# a plain Vulkan program through the layer"
  # shellcheck disable=SC2086
  XDG_RUNTIME_DIR=$lrun "$SRC/bench/run-layer.sh" --build-dir "$B" --work-dir /tmp/pcache-bl ${LAYER_ARGS:-} |
    tee "$LOGDIR/layer-gpu.log"
fi

if [[ $parts == *" binary "* ]]; then
  echo "# each way of getting a pipeline, inside one process (bench_binary)"
  "$SRC/bench/probe-binary.sh" "$B" "${BINARY_PIPELINES:-256}" | tee "$LOGDIR/binary-gpu.log"
fi
if [[ $parts == *" diskprobe "* ]]; then
  echo "# the driver's disk cache, configured each way a user may have it"
  "$SRC/bench/probe-disk-cache.sh" --build-dir "$B" --work-dir /tmp/pcache-dp |
    tee "$LOGDIR/diskprobe-gpu.log"
fi

if [[ $parts == *" replay "* ]]; then
  rrun=$(mktemp -d /tmp/pcache-replay-run.XXXXXX)
  chmod 700 "$rrun"
  echo "# replay after a simulated driver update (docs/replay.md)"
  # shellcheck disable=SC2086
  XDG_RUNTIME_DIR=$rrun "$SRC/bench/run-replay.sh" --build-dir "$B" --work-dir /tmp/pcache-br \
    ${REPLAY_ARGS:-} | tee "$LOGDIR/replay-gpu.log"
  rm -rf "$rrun"
fi

if [[ $parts == *" gpl "* ]]; then
  # Misses without a stall (issue 17): the time to a usable pipeline on a
  # miss (fast link against the monolithic compile), frames until the
  # optimized pipelines are in, the draw cost of linked against optimized.
  # The driver's disk cache off, so every miss is a real one.
  grun=$(mktemp -d /tmp/pcache-gpl-run.XXXXXX)
  chmod 700 "$grun"
  echo "# bench_gpl (__GL_SHADER_DISK_CACHE=0 MESA_SHADER_CACHE_DISABLE=true)"
  # shellcheck disable=SC2086
  XDG_RUNTIME_DIR=$grun __GL_SHADER_DISK_CACHE=0 MESA_SHADER_CACHE_DISABLE=true \
    "$B/bench/bench_gpl" ${GPL_ARGS:---pipelines 256 --draws 50} | tee "$LOGDIR/gpl-gpu.log"
  # Known parts in a new process: one process prepares every pipeline
  # through a private pcached (the parts uploaded), the next misses them.
  "$B/daemon/pcached" --socket "$grun/sock" --data-dir "$grun/data" --log-level warn &
  gpid=$!
  for _ in $(seq 100); do [ -S "$grun/sock" ] && break; sleep 0.05; done
  for phase in prepare known; do
    XDG_RUNTIME_DIR=$grun PCACHE_SOCKET=$grun/sock __GL_SHADER_DISK_CACHE=0 \
      MESA_SHADER_CACHE_DISABLE=true "$B/bench/bench_gpl" --pipelines "${GPL_KNOWN_N:-256}" \
      --phase "$phase" | tee -a "$LOGDIR/gpl-gpu.log"
  done
  kill "$gpid"; wait "$gpid" || true
  rm -rf "$grun"
fi
