#!/bin/sh
# A paired run where one workload changes and the other does not: N times (default 10)
# `hookprof run --versus '--inject syscall:getppid=2000' --workloads null_call,open_close`,
# each variant pair compared again as JSON. Counts the runs whose open_close (which calls no
# getppid) has a path called, and those whose headline (the largest called path change)
# names getppid; prints each run's called paths. Needs root; HOOKPROF (default
# target/release/hookprof) is the binary; OUT (default a new temp dir) keeps the files; QUIET=1
# gives each run CPU 1 to itself (bench/quiet-cpu1.sh); RECOMPARE=1 makes no run: it compares
# the pairs already in OUT again (with this HOOKPROF) and prints the counts.
set -eu
HOOKPROF=${HOOKPROF:-target/release/hookprof}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
N=${1:-10}
QUIET_CPU=""
[ "${QUIET:-0}" = 1 ] && QUIET_CPU="$(cd "$(dirname "$0")" && pwd)/quiet-cpu1.sh"
echo "versus-getppid: $N runs into $OUT" >&2
i=0
while [ "$i" -lt "$N" ]; do
    [ "${RECOMPARE:-0}" = 1 ] || $QUIET_CPU "$HOOKPROF" run --quiet --versus '--inject syscall:getppid=2000' \
        --workloads null_call,open_close -o "$OUT/$i.json" >"$OUT/$i.txt"
    set +e
    "$HOOKPROF" compare "$OUT/$i.json" "$OUT/$i.versus.json" --format json >"$OUT/$i.compare.json"
    set -e
    i=$((i + 1))
done
python3 - "$OUT" "$N" <<'PY'
import json, sys
out, n = sys.argv[1], int(sys.argv[2])
starred_oc, named = 0, 0
for i in range(n):
    c = json.load(open(f"{out}/{i}.compare.json"))
    called = {w["name"]: [f'{v["kind"]} {v["name"]} {v["verdict"]} {v["change"]:+.0f}'
                          for v in w.get("paths", []) if v["verdict"] in ("regressed", "improved")]
              for w in c["workloads"]}
    largest = c["path_family"].get("largest")
    head = f'{largest[1]["name"]} in {largest[0]}' if largest else "none"
    starred_oc += bool(called.get("open_close"))
    named += bool(largest) and largest[1]["name"] == "getppid"
    print(f"run {i}: headline {head}; called: {called}")
print(f"open_close with a path called: {starred_oc} of {n}; headline names getppid: {named} of {n}")
PY
