#!/bin/sh
# Does the profiler's memory stay flat over a long run? Two soaks, each with the process's
# VmHWM and VmRSS sampled from /proc every 0.2 s:
#  - `run` over many workload-rounds of two cheap workloads (tiny samples): the peak by phase
#    the results record after the first 10 workload-rounds against the peak at the end;
#  - `top --interval 0.2` for thousands of intervals, recorded with -o: VmHWM once 100
#    intervals were printed against VmHWM at the last one;
#  - with QUICK=1, the default quick suite (`run --suite quick`): the peak its results record.
# Usage: bench/soak.sh [ROUNDS] [INTERVALS]   (defaults 100 rounds of two workloads, i.e. 200
# workload-rounds, and 2000 intervals, ~7 min; HOOKPROF: the binary to use; needs root)
set -eu
HOOKPROF=${HOOKPROF:-target/release/hookprof}
ROUNDS=${1:-100}
INTERVALS=${2:-2000}
DIR=$(mktemp -d)
CHILD=
cleanup() {
    [ -n "$CHILD" ] && kill -TERM "$CHILD" 2>/dev/null && wait "$CHILD" 2>/dev/null
    rm -rf "$DIR"
}
trap cleanup EXIT INT TERM

# Samples $1's VmHWM and VmRSS (KiB) and the line count of $2 every 0.2 s into $3 until it ends.
watch() {
    while [ -r "/proc/$1/status" ]; do
        status=$(grep -E '^Vm(HWM|RSS):' "/proc/$1/status" 2>/dev/null | awk '{printf "%s ", $2}')
        [ -n "$status" ] && echo "$status$(wc -l <"$2")" >>"$3"
        sleep 0.2
    done
}

echo "run: $ROUNDS rounds of null_call,stat (2 samples, 1 ms each)"
"$HOOKPROF" run --workloads null_call,stat --rounds "$ROUNDS" --samples 2 --min-sample-ms 1 \
    --quiet --no-store --format json -o "$DIR/run.json" >/dev/null 2>"$DIR/run.err" &
CHILD=$!
: >"$DIR/run.lines"
watch "$CHILD" "$DIR/run.lines" "$DIR/run.mem" &
wait "$CHILD" || { cat "$DIR/run.err" >&2; exit 2; }
CHILD=
wait
python3 - "$DIR/run.json" "$DIR/run.mem" <<'PY'
import json, sys
env = json.load(open(sys.argv[1]))["environment"]
phases = env["profiler_peak_rss_by_phase"]
rounds = [p["peak_rss_kib"] for p in phases if p["phase"].startswith("workload ")]
if len(rounds) < 11:
    sys.exit(f"only {len(rounds)} workload-rounds were recorded")
setup = [p for p in phases if not p["phase"].startswith("workload ")]
print("  set-up peaks: " + ", ".join(f"{p['phase']} {p['peak_rss_kib'] / 1024:.1f} MB" for p in setup))
after_10, end = rounds[9], rounds[-1]
print(f"  peak after 10 workload-rounds: {after_10 / 1024:.1f} MB; after all {len(rounds)}: "
      f"{end / 1024:.1f} MB (+{(end - after_10) / 1024:.2f} MB)")
rss = [int(line.split()[1]) for line in open(sys.argv[2])]
print(f"  resident set sampled {len(rss)} times: first {rss[0] / 1024:.1f} MB, "
      f"highest {max(rss) / 1024:.1f} MB, last {rss[-1] / 1024:.1f} MB")
PY

echo "top: $INTERVALS intervals of 0.2 s (~$((INTERVALS / 5)) s)"
"$HOOKPROF" top --interval 0.2 --count "$INTERVALS" --format json -o "$DIR/recorded.jsonl" \
    >"$DIR/top.jsonl" 2>"$DIR/top.err" &
CHILD=$!
watch "$CHILD" "$DIR/top.jsonl" "$DIR/top.mem" &
wait "$CHILD" || { cat "$DIR/top.err" >&2; exit 2; }
CHILD=
wait
python3 - "$DIR/top.mem" "$INTERVALS" "$DIR/recorded.jsonl" <<'PY'
import os, sys
samples = [tuple(map(int, line.split())) for line in open(sys.argv[1])]
printed = [s for s in samples if s[2] >= 100]
if not printed:
    sys.exit("top printed fewer than 100 intervals")
after_100, end = printed[0][0], samples[-1][0]
print(f"  peak after 100 intervals: {after_100 / 1024:.1f} MB; after {samples[-1][2]} of "
      f"{sys.argv[2]}: {end / 1024:.1f} MB (+{(end - after_100) / 1024:.2f} MB); "
      f"the -o recording {os.path.getsize(sys.argv[3]) / 1e6:.1f} MB")
PY

[ "${QUICK:-0}" = 1 ] || exit 0
echo "run --suite quick"
"$HOOKPROF" run --suite quick --quiet --no-store --format json -o "$DIR/quick.json" >/dev/null \
    2>"$DIR/quick.err" || { cat "$DIR/quick.err" >&2; exit 2; }
python3 - "$DIR/quick.json" <<'PY'
import json, sys
env = json.load(open(sys.argv[1]))["environment"]
phases = env["profiler_peak_rss_by_phase"]
calibrated = next((p["peak_rss_kib"] for p in phases if p["phase"] == "calibration"), None)
print(f"  profiler peak {env['profiler_peak_rss_kib'] / 1024:.1f} MB"
      + (f" ({calibrated / 1024:.1f} MB after calibration)" if calibrated else ""))
PY
