# Sourced by the binary-mode tests (binary_test.sh, binary_faults_test.sh)
# after ../common/pcached.sh, with demo, pcachectl, layer_home and n set:
# a program through the layer, the fake driver's answers, and the devices
# pcached knows.

answers() { grep -c "^$1\$" "$scratch/answers" 2>/dev/null || true; }
run() { # run NAME: a plain program through the pcache layer, its report in $scratch/NAME
  local name=$1
  : >"$scratch/answers"
  XDG_DATA_HOME=$layer_home PCACHE_LAYER=1 PCACHE_LAYER_STATS=1 \
    "$demo" --plain --pipelines "$n" --app-name binary >"$scratch/$name.out" 2>"$scratch/$name.err" ||
    { cat "$scratch/$name.out" "$scratch/$name.err"; fail "pcache-demo ($name)"; }
  grep '^pcache-layer ' "$scratch/$name.err" | head -n1 | tr ' ' '\n' >"$scratch/$name"
  [ -s "$scratch/$name" ] || { cat "$scratch/$name.err"; fail "$name: no layer report"; }
}
answer_is() { [ "$(answers "$1")" -eq "$2" ] || fail "$3: the driver logged $(answers "$1") '$1', expected $2"; }
# The devices pcached knows, one line each: uuid, entries, and the sizes
# of their blobs (sorted, unique).
devices() {
  "$pcachectl" list --json | python3 -c '
import json, sys
doc = json.load(sys.stdin)
for d in doc["devices"]:
    sizes = sorted({e["blob_size"] for e in doc["entries"] if e["device_key"] == d["key"]})
    print(d["uuid"], d["entries"], ",".join(map(str, sizes)))'
}

