#!/bin/sh
# bench_delivery must measure every entry, not one reply's worth: a reply
# carries at most the client's reply budget and sets GetReply.more for the
# rest. With --max-pending 256K, 200 entries of 20 KB take many replies;
# both its Prefetch and its Get of every entry must follow `more` to the
# end.
#   bench_pages.sh PCACHED BENCH_DELIVERY
set -u
pcached=$1
bench=$2
dir=$(mktemp -d /tmp/pcache-bench-pages.XXXXXX)
mkdir -m 0700 "$dir/run"
"$pcached" --socket "$dir/run/socket" --data-dir "$dir/data" --max-pending 256K \
  --log-level warn 2>"$dir/pcached.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
i=0
while [ ! -S "$dir/run/socket" ]; do
  i=$((i + 1))
  if [ $i -gt 250 ] || ! kill -0 $pid 2>/dev/null; then
    echo "pcached did not start"
    cat "$dir/pcached.log"
    exit 1
  fi
  sleep 0.02
done
if ! "$bench" --socket "$dir/run/socket" --count 200 --size 20480 --fill --clients 0 \
    --prefetch-reps 1 >"$dir/out"; then
  echo "bench_delivery failed"
  cat "$dir/out" "$dir/pcached.log"
  exit 1
fi
cat "$dir/out"
kv() { sed -n "s/^$1=//p" "$dir/out"; }
fail=0
for key in prefetch_entries getall_entries; do
  if [ "$(kv $key)" != 200 ]; then
    echo "$key is $(kv $key), not 200"
    fail=1
  fi
done
for key in prefetch_pages getall_calls; do
  n=$(kv $key)
  if [ -z "$n" ] || [ "$n" -lt 10 ]; then
    echo "$key is '$n': the budget should have cut the replies into at least 10"
    fail=1
  fi
done
exit $fail
