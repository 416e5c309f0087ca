#!/bin/bash
# package_test.sh SRC_DIR WORK_DIR PCACHE_DEMO
#
# The Debian package as a user meets it (docs/packaging.md): builds
# pcache_<version>_<arch>.deb with scripts/package.sh, installs it with apt
# into a fresh Debian 12 chroot that has nothing of pcache's but a Vulkan
# driver (lavapipe), and as an ordinary user there starts pcached the way
# pcached(8) says to on a machine without a systemd user manager, then runs
# a plain Vulkan program (pcache-demo --plain, no pcache code) twice with
# PCACHE_LAYER=1 and checks, from the layer's own report, that the second
# run's pipelines all came from the daemon. Then it removes and purges the
# package and checks that the user's store is still there and the global
# enablement of pcached.socket is gone.
#
# The chroot: a debootstrap minbase of bookworm with mesa-vulkan-drivers,
# made once and kept under WORK_DIR/base (or $PCACHE_TEST_CHROOT_BASE),
# remade after a week. Each run mounts a throw-away overlay over it in a
# private mount namespace, so every run starts from the same fresh system
# and nothing is mounted outside the test. Packages come from Debian's
# archive (bookworm, -updates, -security) at each run.
#
# Exit 77 (skipped) when this machine cannot do it: not root, no
# debootstrap, no private mount namespace (inside a chroot or an
# unprivileged container), or no Debian archive to fetch from.
set -euo pipefail

src=$1 work=$2 demo=$3
base=${PCACHE_TEST_CHROOT_BASE:-$work/base}
mirror=${PCACHE_TEST_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${PCACHE_TEST_DEBIAN_SECURITY:-http://deb.debian.org/debian-security}
logs=$work/logs
pipelines=16
t0=$(date +%s)

skip() { echo "package_test: SKIP: $*"; exit 77; }
say() { echo "package_test: [$(($(date +%s) - t0))s] $*"; }
# fail MESSAGE [LOG]: with the end of the log that says why.
fail() {
  if [ -n "${2:-}" ] && [ -s "$2" ]; then
    echo "---- $(basename "$2") (last 60 lines; all logs in $logs) ----" >&2
    tail -n 60 "$2" >&2
  fi
  echo "package_test: FAIL: $1" >&2
  exit 1
}

# --- What this machine must allow -----------------------------------------
[ "$(id -u)" = 0 ] || skip "needs root: debootstrap, chroot and mounts"
for tool in debootstrap chroot unshare mount dpkg-deb dpkg-shlibdeps cpack file flock; do
  command -v "$tool" >/dev/null || skip "$tool is missing (scripts/setup-deps.sh installs it)"
done
unshare -m true 2>/dev/null ||
  skip "no private mount namespace here (a chroot, or a container without CAP_SYS_ADMIN)"
[ -n "$demo" ] && [ -x "$demo" ] || skip "this build has no pcache-demo (PCACHE_BUILD_EXAMPLES=OFF or no glslangValidator)"

mkdir -p "$work" "$logs"
rm -f "$logs"/*.log

# --- 1. The package, built as scripts/package.sh documents ---------------
say "building the package (scripts/package.sh, log: $logs/package.log)"
PCACHE_JOBS=${PCACHE_PACKAGE_TEST_JOBS:-1} "$src/scripts/package.sh" --no-deps \
  --build-dir "$work/pkg" >"$logs/package.log" 2>&1 || fail "scripts/package.sh" "$logs/package.log"
debs=("$work"/pkg/pcache_*_*.deb)
devdebs=("$work"/pkg/libpcache-dev_*_*.deb)
[ ${#debs[@]} = 1 ] && [ -f "${debs[0]}" ] || fail "no single pcache_<version>_<arch>.deb in $work/pkg"
[ ${#devdebs[@]} = 1 ] && [ -f "${devdebs[0]}" ] || fail "no single libpcache-dev_<version>_<arch>.deb"
deb=${debs[0]} devdeb=${devdebs[0]}
version=$(sed -n 's/^  VERSION \([0-9.]*\)$/\1/p' "$src/CMakeLists.txt" | head -n1)
[ "$(basename "$deb")" = "pcache_${version}_$(dpkg --print-architecture).deb" ] ||
  fail "$(basename "$deb") is not named pcache_${version}_$(dpkg --print-architecture).deb"
# The dependencies dpkg-shlibdeps found: every library the binaries load.
depends=$(dpkg-deb --field "$deb" Depends)
echo "Depends: $depends" >"$logs/control.log"
for lib in libuv1 liblmdb0 libprotobuf-c1 libhiredis0.14 libsystemd0 libvulkan1 libc6 init-system-helpers; do
  grep -Eq "(^|, )$lib( |,|$)" <<<"$depends" || fail "Depends has no $lib: $depends"
done

# --- 2. The fresh Debian 12, made once ------------------------------------
make_base() {
  local tmp=$base.tmp
  rm -rf "$tmp"
  say "debootstrap --variant=minbase bookworm (once; log: $logs/debootstrap.log)"
  debootstrap --variant=minbase bookworm "$tmp" "$mirror" >"$logs/debootstrap.log" 2>&1 ||
    { tail -n 20 "$logs/debootstrap.log"; rm -rf "$tmp"; skip "debootstrap failed: no Debian archive at $mirror?"; }
  printf '%s\n' "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
    "deb $security bookworm-security main" >"$tmp/etc/apt/sources.list"
  # The machine's Vulkan driver, there before pcache as on a user's machine:
  # Mesa's lavapipe (it brings libvulkan1, the loader).
  if ! unshare -m sh -c '
      mount -t proc proc "$1/proc" && mount --rbind /dev "$1/dev" &&
      cp /etc/resolv.conf "$1/etc/resolv.conf" &&
      chroot "$1" sh -c "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        --no-install-recommends mesa-vulkan-drivers && apt-get clean"' sh "$tmp" \
      >"$logs/base.log" 2>&1; then
    rm -rf "$tmp"
    skip "installing mesa-vulkan-drivers into the chroot failed (log: $logs/base.log)"
  fi
  date +%s >"$tmp/.pcache-test-base"
  rm -rf "$base"
  mv "$tmp" "$base"
}
mkdir -p "$(dirname "$base")"
exec 9>"$base.lock"
flock 9
if [ ! -f "$base/.pcache-test-base" ] ||
   [ $(($(date +%s) - $(cat "$base/.pcache-test-base"))) -gt $((7 * 86400)) ]; then
  make_base
fi
if dpkg-query --root="$base" -W -f='${Status}' pcache 2>/dev/null | grep -q 'ok installed'; then
  fail "the chroot base $base has pcache installed: it is no longer fresh"
fi

# --- 3. One run in a throw-away overlay of it ---------------------------
run=$work/run
rm -rf "$run"
mkdir -p "$run/upper" "$run/work" "$run/root"
cp "$deb" "$devdeb" "$run/"
cp "$demo" "$run/pcache-demo"
cp "$(dirname "$0")/package_chroot.sh" "$run/"
chmod 0644 "$run"/*.deb

say "installing $(basename "$deb") in a fresh chroot and using it (log: $logs/chroot.log)"
set +e
unshare -m bash -c '
  set -e
  base=$1 run=$2 root=$2/root
  # Each run writes to its own upper layer; the base stays as made.
  if ! mount -t overlay overlay -o "lowerdir=$base,upperdir=$run/upper,workdir=$run/work" "$root" \
       2>/dev/null; then
    echo "(no overlayfs here: copying the base)"
    cp -a "$base/." "$root/"
  fi
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  mount -t tmpfs -o mode=0755 tmpfs "$root/run"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  mkdir -p "$root/tmp/pcache-test"
  cp "$run"/*.deb "$run/package_chroot.sh" "$root/tmp/pcache-test/"
  install -m 0755 "$run/pcache-demo" "$root/usr/local/bin/pcache-demo"
  chmod 1777 "$root/tmp"
  exec chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    bash /tmp/pcache-test/package_chroot.sh "$3"
' sh "$base" "$run" "$pipelines" >"$logs/chroot.log" 2>&1
rc=$?
set -e
cat "$logs/chroot.log"
case $rc in
  0) ;;
  77) skip "$(sed -n 's/^package_chroot: SKIP: //p' "$logs/chroot.log" | tail -n1)" ;;
  *) fail "in the chroot (exit $rc)" ;;
esac
rm -rf "$run"
say "ok"
