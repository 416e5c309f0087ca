#!/bin/sh
# bench_fleet.sh - the fleet tier on loopback (docs/fleet.md): a fleet hit
# (a Get that misses the local store, served from Redis) against a local
# hit, and a Prefetch of every entry from Redis into an empty store
# against the same Prefetch from the local store. Three pcached share one
# redis-server on a free loopback port: A fills (bench_delivery --fill)
# and pushes; B, empty, prefetches (fleet, then local); C, empty, answers
# single Gets (fleet, then the same hashes again, local). A signs what it
# pushes with a key made by `pcachectl fleet keygen`; B and C trust it and
# only read, so every fleet value is checked (docs/fleet.md "Who can do
# what"). key=value lines.
#
#   bench/bench_fleet.sh BUILD_DIR [COUNT] [SIZE]      (2000 entries, 16384 B)
set -eu
build=$1
count=${2:-2000}
size=${3:-16384}
pcached=$build/daemon/pcached
ctl=$build/tools/pcachectl
bench=$build/bench/bench_delivery
command -v redis-server >/dev/null || { echo "bench_fleet: redis-server not installed"; exit 1; }
dir=$(mktemp -d /tmp/pcache-bench-fleet.XXXXXX)
pids=""
trap 'for p in $pids; do kill $p 2>/dev/null; done; wait 2>/dev/null; rm -rf "$dir"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly no \
  --maxmemory-policy allkeys-lru --logfile "$dir/redis.log" &
pids="$pids $!"
url=redis://127.0.0.1:$port
"$ctl" fleet keygen "$dir/keys" >/dev/null
cp "$dir/keys/fleet.pub" "$dir/trusted"

start() { # name [pcached options]
  name=$1
  shift
  mkdir -p -m 0700 "$dir/$name.run"
  "$pcached" --socket "$dir/$name.run/socket" --data-dir "$dir/$name" --remote "$url" \
    --remote-timeout 1000 --remote-trusted-keys "$dir/trusted" --log-level warn "$@" \
    2>"$dir/$name.log" &
  pids="$pids $!"
  i=0
  until "$ctl" --socket "$dir/$name.run/socket" status --json 2>/dev/null | grep -q '"state": *"up"'; do
    i=$((i + 1))
    [ $i -lt 500 ] || { echo "bench_fleet: pcached $name not up"; cat "$dir/$name.log"; exit 1; }
    sleep 0.02
  done
}
pushed() { "$ctl" --socket "$dir/$1.run/socket" status --json | sed -n 's/.*"pushed": *\([0-9]*\).*/\1/p'; }

start a --remote-signing-key "$dir/keys/fleet.key"
"$bench" --socket "$dir/a.run/socket" --count "$count" --size "$size" --fill --clients 0 \
  --prefetch-reps 1 --prefix seed_ >/dev/null
i=0
until [ "$(pushed a)" -ge "$count" ]; do
  i=$((i + 1))
  [ $i -lt 3000 ] || { echo "bench_fleet: A pushed $(pushed a) of $count"; exit 1; }
  sleep 0.01
done
echo "fleet_entries=$count"
echo "fleet_entry_bytes=$size"

start b
"$bench" --socket "$dir/b.run/socket" --count "$count" --size "$size" --clients 0 \
  --prefetch-reps 1 --prefix fleet_ | grep prefetch
"$bench" --socket "$dir/b.run/socket" --count "$count" --size "$size" --clients 0 \
  --prefetch-reps 1 --prefix local_ | grep prefetch

start c
gets=$((count / 10))
"$bench" --socket "$dir/c.run/socket" --count "$count" --size "$size" --clients 1 --gets "$gets" \
  --prefetch-reps 0 --prefix fleet_ | grep get_
"$bench" --socket "$dir/c.run/socket" --count "$count" --size "$size" --clients 1 --gets "$gets" \
  --prefetch-reps 0 --prefix local_ | grep get_
"$ctl" --socket "$dir/c.run/socket" status | grep fleet
