#!/bin/sh
# Checks the configured user units with systemd-analyze: any error, and any
# warning (an unknown key, a bad value), fails the test. Skips (77) when the
# tool is not installed.
set -u
unit_dir=$1
if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "SKIP: systemd-analyze not installed"
  exit 77
fi
runtime=$(mktemp -d)
chmod 0700 "$runtime"
out=$(XDG_RUNTIME_DIR=$runtime systemd-analyze verify --user --man=no \
      "$unit_dir/pcached.socket" "$unit_dir/pcached.service" \
      "$unit_dir/pcache-detect.path" "$unit_dir/pcache-detect.service" 2>&1)
rc=$?
rm -rf "$runtime"
printf '%s\n' "$out"
if [ $rc -ne 0 ]; then
  echo "systemd-analyze verify failed ($rc)"
  exit 1
fi
if printf '%s' "$out" | grep -q "$unit_dir"; then
  echo "systemd-analyze reported problems in the units"
  exit 1
fi
# The promises the units make (docs/operations.md).
grep -q '^ListenStream=%t/pcache/socket$' "$unit_dir/pcached.socket" &&
grep -q '^SocketMode=0600$' "$unit_dir/pcached.socket" &&
grep -q '^DirectoryMode=0700$' "$unit_dir/pcached.socket" &&
grep -q '^Type=notify$' "$unit_dir/pcached.service" &&
grep -q '^ExecStart=/.*/pcached ' "$unit_dir/pcached.service" &&
grep -q '^PathChanged=/usr/share/vulkan/icd.d$' "$unit_dir/pcache-detect.path" &&
grep -q '^PathChanged=/etc/vulkan/icd.d$' "$unit_dir/pcache-detect.path" &&
grep -q '^Unit=pcache-detect.service$' "$unit_dir/pcache-detect.path" &&
grep -q '^ExecStart=/.*/pcachectl .*replay --detect$' "$unit_dir/pcache-detect.service" &&
grep -q '^SuccessExitStatus=3$' "$unit_dir/pcache-detect.service" || {
  echo "a unit lost one of its required settings"
  exit 1
}
exit 0
