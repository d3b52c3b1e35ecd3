#!/bin/sh
# What `hookprof top` running system-wide costs a kernbench-like build: the `build` workload
# (a warm-up and two timed builds a run) with and without top, runs in interleaved pairs (ABBA
# order); prints each timed build's seconds and the ratio of the means. Run it under bench/quiet-cpu1.sh (the builds are
# pinned to CPU 1; top runs beside them, as a node's agent would).
# Usage: bench/top-overhead.sh [PAIRS] [TOP OPTIONS...]   (HOOKPROF: the binary to use)
set -eu
HOOKPROF=${HOOKPROF:-target/release/hookprof}
PAIRS=${1:-2}
[ $# -gt 0 ] && shift
DIR=$(mktemp -d)
TOP_PID=
cleanup() {
    [ -n "$TOP_PID" ] && kill -TERM "$TOP_PID" 2>/dev/null && wait "$TOP_PID" 2>/dev/null
    rm -rf "$DIR"
}
trap cleanup EXIT INT TERM

build() { # $1: with or without; then top's options
    side=$1
    shift
    if [ "$side" = with ]; then
        "$HOOKPROF" top --format json "$@" >/dev/null 2>"$DIR/top.err" &
        TOP_PID=$!
        # Wait until top counts (its probes are attached).
        until grep -q "top: counting" "$DIR/top.err"; do
            kill -0 "$TOP_PID" || { cat "$DIR/top.err" >&2; exit 2; }
            sleep 0.2
        done
    fi
    "$HOOKPROF" run --workloads build --samples 2 --probes none --pin 1 --quiet \
        -o "$DIR/run.json" >/dev/null
    if [ -n "$TOP_PID" ]; then
        kill -TERM "$TOP_PID"
        wait "$TOP_PID" || true
        TOP_PID=
    fi
    python3 -c 'import json,sys; print(*json.load(open(sys.argv[1]))["workloads"][0]["clean"])' \
        "$DIR/run.json"
}

i=0
while [ "$i" -lt "$PAIRS" ]; do
    if [ $((i % 2)) -eq 0 ]; then order="without with"; else order="with without"; fi
    for side in $order; do
        for s in $(build "$side" "$@"); do
            echo "$side $s" | tee -a "$DIR/times"
        done
    done
    i=$((i + 1))
done
python3 - "$DIR/times" <<'PY'
import sys
times = {"with": [], "without": []}
for line in open(sys.argv[1]):
    side, s = line.split()
    times[side].append(float(s))
mean = {k: sum(v) / len(v) for k, v in times.items()}
print(f"without top: mean {mean['without']:.2f} s over {len(times['without'])} builds")
print(f"with top:    mean {mean['with']:.2f} s over {len(times['with'])} builds")
print(f"ratio with/without: {mean['with'] / mean['without']:.4f}")
PY
