#!/bin/bash
# package_chroot.sh PIPELINES - package_test.sh's part inside the fresh
# Debian 12 chroot, run there as root, with the packages and this script in
# /tmp/pcache-test and pcache-demo (a program with no pcache code when run
# with --plain) in /usr/local/bin. Exit 77 when Debian's archive cannot be
# reached.
set -euo pipefail

n=$1
cd /tmp/pcache-test
deb=$(echo pcache_*.deb) devdeb=$(echo libpcache-dev_*.deb)
export DEBIAN_FRONTEND=noninteractive
apt=(apt-get -q -y -o Dpkg::Use-Pty=0)
link=/etc/systemd/user/sockets.target.wants/pcached.socket
store=/home/tester/.cache/pcache

step() { printf '\n== %s\n' "$*"; }
fail() {
  echo "package_chroot: FAIL: $*"
  if [ -f /tmp/runtime-tester/pcached.log ]; then
    echo "---- pcached's log ----"
    cat /tmp/runtime-tester/pcached.log
  fi
  exit 1
}
skip() { echo "package_chroot: SKIP: $*"; exit 77; }
store_sums() { (cd "$store" && sha256sum data.mdb lock.mdb 2>/dev/null) || true; }

step "apt-get update (bookworm, bookworm-updates, bookworm-security)"
"${apt[@]}" update || skip "apt-get update failed: Debian's archive cannot be reached"

step "apt install ./$deb"
before=$(dpkg-query -W -f '${Package}\n' | sort)
"${apt[@]}" install "./$deb" || fail "apt install ./$deb"
after=$(dpkg-query -W -f '${Package}\n' | sort)
echo "installed with it: $(comm -13 <(echo "$before") <(echo "$after") | tr '\n' ' ')"

step "what the package put in place"
libdir=$(dirname "$(dpkg -L pcache | grep '/libpcache\.so\.0$')")
for f in /usr/bin/pcached /usr/bin/pcache-replay /usr/bin/pcachectl \
         "$libdir/libpcache.so.0" "$libdir/libVkLayer_pcache.so" \
         /usr/share/vulkan/implicit_layer.d/VkLayer_pcache.json \
         /usr/lib/systemd/user/pcached.socket /usr/lib/systemd/user/pcached.service \
         /usr/share/man/man1/pcachectl.1.gz /usr/share/man/man8/pcached.8.gz \
         /usr/share/man/man8/pcache-replay.8.gz /usr/share/doc/pcache/README.md \
         /usr/share/doc/pcache/docs/operations.md /usr/share/doc/pcache/docs/packaging.md; do
  [ -e "$f" ] || fail "$f is not installed"
done
[ ! -e /usr/include/pcache/pcache.h ] || fail "the headers are in pcache, not only in libpcache-dev"
layer_lib=$(sed -n 's/.*"library_path": *"\([^"]*\)".*/\1/p' \
  /usr/share/vulkan/implicit_layer.d/VkLayer_pcache.json)
[ "$layer_lib" = "$libdir/libVkLayer_pcache.so" ] ||
  fail "the manifest's library_path is '$layer_lib', not $libdir/libVkLayer_pcache.so"
ldconfig -p | grep -q 'libpcache\.so\.0 ' || fail "ldconfig does not know libpcache.so.0 (the trigger did not run)"
# The global enablement, as `systemctl --global enable pcached.socket` makes it.
[ -L "$link" ] || fail "$link is missing: pcached.socket is not enabled for every user"
case $(readlink "$link") in
  */systemd/user/pcached.socket) echo "$link -> $(readlink "$link")" ;;
  *) fail "$link points at $(readlink "$link")" ;;
esac
pcached --version
pcachectl --version

step "an ordinary user, no systemd user manager: pcached as pcached(8) says, a program twice"
useradd -m -s /bin/bash tester
cat >/tmp/pcache-test/user.sh <<'EOF'
set -euo pipefail
n=$1
cd
# pcached(8), "Without a systemd user manager", word for word:
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp/runtime-$(id -un)}
mkdir -p -m 0700 "$XDG_RUNTIME_DIR"
pcached 2>>"$XDG_RUNTIME_DIR/pcached.log" &
pid=$!
for _ in $(seq 100); do
  pcachectl status >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { echo "pcached exited"; exit 1; }
  sleep 0.1
done
pcachectl status
for run in 1 2; do
  # The only set-up: PCACHE_LAYER=1 (and the report, to read it).
  PCACHE_LAYER=1 PCACHE_LAYER_STATS=1 pcache-demo --plain --pipelines "$n" \
    >"run$run.out" 2>"run$run.err" || { cat "run$run.out" "run$run.err"; exit 1; }
  echo "run $run: $(grep '^pcache-layer ' "run$run.err" || echo 'no pcache-layer report')"
done
pcachectl layer
kill -TERM "$pid"
wait "$pid"
EOF
setpriv --reuid=tester --regid=tester --init-groups \
  env -i HOME=/home/tester USER=tester LOGNAME=tester SHELL=/bin/bash LANG=C.UTF-8 \
  PATH=/usr/local/bin:/usr/bin:/bin bash /tmp/pcache-test/user.sh "$n" ||
  fail "the user's runs"

# report RUN KEY: a counter of the layer's report.
report() {
  sed -n "s/^pcache-layer .* $2=\([0-9]*\).*/\1/p" "/home/tester/run$1.err" | head -n1
}
for run in 1 2; do
  [ "$(report $run pipelines)" = "$n" ] || fail "run $run: pipelines=$(report $run pipelines), expected $n (is the layer loaded?)"
done
[ "$(report 1 daemon_hits)" = 0 ] || fail "run 1: daemon_hits=$(report 1 daemon_hits) from a new store"
[ "$(report 1 uploaded)" = "$n" ] || fail "run 1: uploaded=$(report 1 uploaded), expected $n"
[ "$(report 2 daemon_hits)" = "$n" ] || fail "run 2: daemon_hits=$(report 2 daemon_hits), expected $n"
[ "$(report 2 compiles)" = 0 ] || fail "run 2: compiles=$(report 2 compiles), expected 0"
echo "second run: daemon_hits=$n of $n, compiles=0"
[ -f "$store/data.mdb" ] || fail "no store at $store"
sums=$(store_sums)
echo "the user's store: $(du -sh "$store" | cut -f1) in $store"

step "apt install ./$devdeb pkgconf"
"${apt[@]}" install "./$devdeb" pkgconf || fail "apt install ./$devdeb"
[ -e /usr/include/pcache/pcache.h ] || fail "libpcache-dev has no pcache.h"
[ -e /usr/include/vulkan/vulkan.h ] || fail "libpcache-dev did not bring Vulkan's headers"
flags=$(pkg-config --cflags --libs pcache) || fail "pkg-config cannot use pcache.pc"
echo "pkg-config: pcache $(pkg-config --modversion pcache): $flags"
# prefix=/usr: pkg-config leaves out the system's own -I and -L.
[ "$(echo $flags)" = "-lpcache" ] || fail "pkg-config --cflags --libs pcache gives '$flags', not -lpcache"

step "apt-get remove pcache"
"${apt[@]}" remove pcache || fail "apt-get remove pcache"
[ ! -e /usr/bin/pcached ] || fail "pcached is still installed"
[ ! -e "$link" ] && [ ! -L "$link" ] || fail "$link is still there after removal"
[ ! -e /etc/systemd/user/pcached.socket ] || fail "removal left /etc/systemd/user/pcached.socket"
[ "$(store_sums)" = "$sums" ] || fail "removal changed the user's store"
echo "removed: no pcached, no $link; the user's store is unchanged"

step "dpkg --purge pcache"
dpkg --purge pcache || fail "dpkg --purge pcache"
[ "$(store_sums)" = "$sums" ] || fail "purging changed the user's store"
if ls /var/lib/systemd/deb-systemd-user-helper-enabled 2>/dev/null | grep -q pcached; then
  fail "purging left deb-systemd-helper's state for pcached.socket"
fi
echo "purged: the user's store is unchanged"

step "dpkg -i again: enabled again; an administrator's disable survives a reinstall"
dpkg -i "./$deb" >/dev/null || fail "dpkg -i ./$deb after the purge"
[ -L "$link" ] || fail "a new installation after a purge did not enable pcached.socket"
rm "$link" # what `systemctl --global disable pcached.socket` does
dpkg -i "./$deb" >/dev/null || fail "dpkg -i ./$deb over itself"
[ ! -L "$link" ] || fail "reinstalling enabled pcached.socket again, against the administrator's disable"
dpkg --purge pcache >/dev/null || fail "the last dpkg --purge pcache"
[ "$(store_sums)" = "$sums" ] || fail "the reinstalls changed the user's store"
echo "ok"
