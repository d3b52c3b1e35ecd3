#!/usr/bin/env bash
# sample-cost.sh: what hookprof's stack sampling (`--probes stacks`) costs the measured loops, next
# to what `perf record -e cpu-clock -F HZ -g` costs the same loops, each as a ratio to its own floor.
#
# Loops: hookprof's own workloads (default null_call,open_close,fork_proc,exec_proc), all pinned to
# CPU $PIN. PAIRS times, in a fresh random order each time, it runs these six invocations:
#   S   hookprof run --probes syscalls,tasks,stacks --sample-hz HZ   (sampling at the rate)
#   S10 hookprof run --probes syscalls,tasks,stacks --sample-hz 10   (same programs, ~no samples)
#   T   hookprof run --probes syscalls,tasks                         (no perf_event program)
#   B   hookprof run --probes none                                   (bare: clean pass only)
#   P   perf record -e cpu-clock -F HZ -g -- hookprof run --probes none
#   Q   perf record -e cpu-clock -F HZ -- hookprof run --probes none      (no call chains)
# Each hookprof invocation with probes has its own floor in the same run: its clean samples. Per
# workload and invocation r = median(probed) / median(clean). The figures, per pair, then the
# median and min-max over the pairs:
#   stacks/10Hz = r(S) / r(S10)    sampling at HZ against the same programs sampling at 10 Hz
#   stacks/none = r(S) / r(T)      sampling at HZ against no perf_event program at all
#   probes      = r(S)             everything --probes syscalls,tasks,stacks adds (tracepoints too)
#   perf -g     = median(clean of P) / median(clean of B)   (adjacent invocations, same order draw)
#   perf no -g  = median(clean of Q) / median(clean of B)   the sampling interrupt alone, near enough
#   hk/perf     = (stacks/none - 1) / (perf -g - 1)         the share of perf's cost hookprof adds
#   clean X/Y   = median(clean of X) / median(clean of Y): whether a variant's own floor (its clean
#                 pass) is itself slowed, i.e. whether a probe stays armed outside the probed pass
# Target (the project's): stacks/none <= 1.03, and hk/perf <= 0.5.
#
# Usage (root): bench/sample-cost.sh            (wraps itself in bench/quiet-cpu1.sh: CPU 1 alone)
#   env: HOOKPROF (this checkout's target/release/hookprof), PERF (perf on PATH, else perf_*), PAIRS (8), HZ (249, the timed passes' default rate),
#        WORKLOADS (null_call,open_close,fork_proc,exec_proc), ROUNDS (2), SAMPLES (5),
#        MIN_SAMPLE_MS (20), PIN (1), WORK (/tmp/sample-cost), NO_QUIET=1 (don't take CPU 1),
#        SKIP_RUN=1 (re-print from WORK's files).
# Prints one line per workload and figure: median and min-max over the pairs, and the sample
# counts hookprof's profile took (a sanity check that S sampled and S10 hardly did).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
if [ -z "${NO_QUIET:-}" ] && [ -z "${SAMPLE_COST_QUIET:-}" ] && [ -z "${SKIP_RUN:-}" ]; then
    export SAMPLE_COST_QUIET=1
    exec "$HERE/quiet-cpu1.sh" "$0" "$@"
fi

HOOKPROF=${HOOKPROF:-$(cd "$(dirname "$0")/.." && pwd)/target/release/hookprof}
PAIRS=${PAIRS:-8}
HZ=${HZ:-249}
WORKLOADS=${WORKLOADS:-null_call,open_close,fork_proc,exec_proc}
ROUNDS=${ROUNDS:-2}
SAMPLES=${SAMPLES:-5}
MIN_SAMPLE_MS=${MIN_SAMPLE_MS:-20}
PIN=${PIN:-1}
WORK=${WORK:-/tmp/sample-cost}
if [ -z "${PERF:-}" ]; then
    PERF=$(command -v perf || true)
    [ -n "$PERF" ] || PERF=$(ls /usr/bin/perf_* 2>/dev/null | head -n1 || true)
fi
[ -n "$PERF" ] && [ -x "$PERF" ] || { echo "sample-cost: no perf (apt-get install linux-perf)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "sample-cost: needs root" >&2; exit 2; }
mkdir -p "$WORK"

# --stack-samples 0: the passes for the stacks alone are never timed (they would only lengthen
# the bench); what the default rate costs is in the timed probed passes measured here.
COMMON=(run --workloads "$WORKLOADS" --pin "$PIN" --rounds "$ROUNDS" --samples "$SAMPLES"
        --min-sample-ms "$MIN_SAMPLE_MS" --stack-samples 0 -q --no-store)
variant() {  # variant NAME JSON
    case $1 in
        S)   "$HOOKPROF" "${COMMON[@]}" --probes syscalls,tasks,stacks --sample-hz "$HZ" -o "$2" ;;
        S10) "$HOOKPROF" "${COMMON[@]}" --probes syscalls,tasks,stacks --sample-hz 10 -o "$2" ;;
        T)   "$HOOKPROF" "${COMMON[@]}" --probes syscalls,tasks -o "$2" ;;
        B)   "$HOOKPROF" "${COMMON[@]}" --probes none -o "$2" ;;
        P)   "$PERF" record -q -e cpu-clock -F "$HZ" -g -o "$WORK/perf.data" -- \
                 "$HOOKPROF" "${COMMON[@]}" --probes none -o "$2" ;;
        Q)   "$PERF" record -q -e cpu-clock -F "$HZ" -o "$WORK/perf.data" -- \
                 "$HOOKPROF" "${COMMON[@]}" --probes none -o "$2" ;;
    esac > "$2.txt" 2>&1
}

if [ -z "${SKIP_RUN:-}" ]; then
    rm -f "$WORK"/*.json "$WORK"/*.json.txt
    echo "sample-cost: $HOOKPROF ${COMMON[*]}; $($PERF --version) at $HZ Hz; $PAIRS pairs; CPUs allowed: $(taskset -pc $$ | sed 's/.*: //')"
    for i in $(seq 1 "$PAIRS"); do
        for v in $(printf '%s\n' S S10 T B P Q | shuf); do
            variant "$v" "$WORK/$i.$v.json" || { echo "sample-cost: pair $i variant $v failed:" >&2; tail -5 "$WORK/$i.$v.json.txt" >&2; exit 1; }
        done
    done
fi

python3 - "$WORK" "$HZ" <<'PY'
import glob, json, os, statistics as st, sys
work, hz = sys.argv[1], sys.argv[2]
runs = {}
for f in glob.glob(f"{work}/*.json"):
    i, v = os.path.basename(f).split(".")[:2]
    d = json.load(open(f))
    runs.setdefault(int(i), {})[v] = {w["name"]: w for w in d["workloads"] if not w.get("failure")}
pairs = sorted(i for i, r in runs.items() if len(r) == 6)
names = [w for w in runs[pairs[0]]["S"]]
med = lambda xs: st.median(xs) if xs else float("nan")
def r(i, v, w):
    x = runs[i][v][w]; return med(x["probed"]) / med(x["clean"])
fig = {
    "stacks/10Hz": lambda i, w: r(i, "S", w) / r(i, "S10", w),
    "stacks/none": lambda i, w: r(i, "S", w) / r(i, "T", w),
    "probes (S)": lambda i, w: r(i, "S", w),
    "tracepts (T)": lambda i, w: r(i, "T", w),
    "perf -g": lambda i, w: med(runs[i]["P"][w]["clean"]) / med(runs[i]["B"][w]["clean"]),
    "perf no -g": lambda i, w: med(runs[i]["Q"][w]["clean"]) / med(runs[i]["B"][w]["clean"]),
    "clean S/B": lambda i, w: med(runs[i]["S"][w]["clean"]) / med(runs[i]["B"][w]["clean"]),
    "clean S/T": lambda i, w: med(runs[i]["S"][w]["clean"]) / med(runs[i]["T"][w]["clean"]),
    "clean S/S10": lambda i, w: med(runs[i]["S"][w]["clean"]) / med(runs[i]["S10"][w]["clean"]),
    "clean T/B": lambda i, w: med(runs[i]["T"][w]["clean"]) / med(runs[i]["B"][w]["clean"]),
}
print(f"\n{len(pairs)} pairs; ratios to each figure's own floor (median over pairs, min-max); {hz} Hz")
print(f"{'workload':12} {'figure':13} {'median':>7} {'min':>7} {'max':>7}   per pair")
for w in names:
    vals = {}
    for k, f in fig.items():
        xs = [f(i, w) for i in pairs]; vals[k] = xs
        print(f"{w:12} {k:13} {med(xs):7.3f} {min(xs):7.3f} {max(xs):7.3f}   " + " ".join(f"{x:.3f}" for x in xs))
    hk = [a - 1 for a in vals["stacks/none"]]; pf = [b - 1 for b in vals["perf -g"]]
    ratio = med(hk) / med(pf) if med(pf) > 0 else float("nan")   # nan: perf's cost within noise
    smp = [ (runs[i]["S"][w].get("profile") or {}).get("samples", 0) for i in pairs]
    smp10 = [ (runs[i]["S10"][w].get("profile") or {}).get("samples", 0) for i in pairs]
    print(f"{w:12} {'hk/perf':13} {ratio:7.3f}   (median added cost: hookprof {100*med(hk):+.1f}%, perf {100*med(pf):+.1f}%)"
          f"; stack samples per run S {med(smp):.0f}, S10 {med(smp10):.0f}"
          f"; target stacks<=1.03: {'met' if med(vals['stacks/none']) <= 1.03 else 'NOT met'}, hk/perf<=0.5: "
          f"{'met' if ratio <= 0.5 else 'n/a (perf adds nothing measurable)' if ratio != ratio else 'NOT met'}")
    print()
PY
