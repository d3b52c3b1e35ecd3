#!/bin/sh
# The comparison gate measured on this machine, as the CI recipe (docs/github-actions-hookprof.yml)
# uses it: a baseline of the last K runs of `hookprof run --suite quick`, and each new run
# compared against it with `hookprof compare --baseline`.
#
#   bench/gate.sh aa K N                     false alarms: K + N runs of the same binary, run
#                                            K+i compared with runs i..K+i-1 (i = 0..N-1)
#   bench/gate.sh recipe W N                 false alarms as the CI recipe meets them: N runs
#                                            of the same binary, each from the 4th compared
#                                            with the runs before it, at most W (the recipe's
#                                            window, 10): its warm-up included
#   bench/gate.sh power K N SYSCALL NS       power: K baseline runs with SYSCALL injected for 0
#                                            ns, then N runs with NS ns, each compared with the
#                                            baseline (the injection program itself costs
#                                            every tracked call, so both sides carry it).
#                                            SYSCALL may be any --inject target instead
#                                            (lsm:file_open: a BPF LSM program, fentry kernels);
#                                            HITS (default SYSCALL's name) lists the paths,
#                                            comma-separated, whose call counts as caught
#   bench/gate.sh power K N SYSCALL FxWORKLOAD  the same, with NS set to F times the minimum
#                                            detectable effect the gate prints for WORKLOAD:
#                                            one more 0-ns run is compared with the baseline
#                                            first, and its MDE times the baseline's mean is
#                                            the MDE in ns (e.g. 1.5xstat on newfstatat)
#
# Prints one line per comparison (exit code, regressed/improved workloads) and a summary: how
# many compares exited 1, how many workload verdicts were regressed/improved, the verdicts by
# kind, the largest slowdown each compare could have missed, and each workload's median minimum
# detectable effect; then the path verdicts: in how many compares the injected syscall's path was
# called regressed, every other path called, and the largest path slowdown each pass rules out.
# QUIET=1 gives each run CPU 1 to itself. Needs root; HOOKPROF (default
# target/release/hookprof) is the binary; OUT (default a new temp dir) keeps the files; RUN_ARGS
# (default none) are added to every run (e.g. `--rounds 6 --samples 2`). BASELINE=DIR (power
# only) takes the K baseline runs from DIR/runs (an earlier power OUT) instead of running them,
# so several costs are tried against one baseline. RECOMPARE=1 makes no run: it compares the
# runs already in OUT again (with this HOOKPROF) and prints the summary.
set -eu
HOOKPROF=${HOOKPROF:-target/release/hookprof}
RUN_ARGS=${RUN_ARGS:-}
OUT=${OUT:-$(mktemp -d)}
mode=${1:?usage: bench/gate.sh aa K N | recipe W N | power K N SYSCALL NS}
K=${2:?K baseline runs}
N=${3:?N compared runs}
# Runs made, and the first one compared.
RUNS=$((K + N)) FIRST=$K
case $mode in
aa) base_args="" new_args="" ;;
recipe) base_args="" new_args="" RUNS=$N FIRST=3 ;;
power)
    target=${4:?SYSCALL}
    case $target in *:*) ;; *) target="syscall:$target" ;; esac
    base_args="--inject $target=0"
    new_args="--inject $target=${5:?NS}"
    ;;
*) echo "bench/gate.sh: unknown mode $mode" >&2; exit 2 ;;
esac
mkdir -p "$OUT/runs" "$OUT/compare"
echo "gate: $mode K=$K N=$N into $OUT" >&2
# With QUIET=1 each run has CPU 1 to itself (bench/quiet-cpu1.sh: one window a run, so other
# measurements that take the same lock interleave between runs and never overlap one).
QUIET_CPU=""
[ "${QUIET:-0}" = 1 ] && QUIET_CPU="$(cd "$(dirname "$0")" && pwd)/quiet-cpu1.sh"
run() { # run INDEX ARGS...
    i=$1; shift
    # shellcheck disable=SC2086
    $QUIET_CPU "$HOOKPROF" run --suite quick --quiet $RUN_ARGS --label "run-$i" "$@" -o "$OUT/runs/$(printf %03d "$i").json" >/dev/null
}
i=0
[ "${RECOMPARE:-0}" = 1 ] && i=$RUNS
while [ "$i" -lt "$K" ]; do
    if [ -n "${BASELINE:-}" ]; then
        cp "$BASELINE/runs/$(printf %03d "$i").json" "$OUT/runs/"
    else
        # shellcheck disable=SC2086
        run "$i" $base_args
    fi
    i=$((i + 1))
done
case ${RECOMPARE:-0}${5:-} in
1*) ;;
*x*)
    # NS from the MDE printed for a 0-ns run against the baseline (kept apart, not compared).
    factor=${5%%x*} workload=${5#*x}
    mkdir -p "$OUT/probe-base" && cp "$OUT"/runs/*.json "$OUT/probe-base/"
    # shellcheck disable=SC2086
    $QUIET_CPU "$HOOKPROF" run --suite quick --quiet $RUN_ARGS --label probe $base_args -o "$OUT/runs/probe.json" >/dev/null
    set +e
    "$HOOKPROF" compare "$OUT/probe-base" "$OUT/runs/probe.json" --format json >"$OUT/probe.json" 2>/dev/null
    set -e
    NS=$(python3 - "$OUT/probe.json" "$workload" "$factor" <<'EOF_NS'
import json, sys
c = json.load(open(sys.argv[1]))
w = next(w for w in c["workloads"] if w["name"] == sys.argv[2])
scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[w["unit"]]
ns = float(sys.argv[3]) * w["minimum_detectable_effect"] * w["old"]["mean"] * scale
print(round(ns))
print(f'{sys.argv[2]}: MDE {100 * w["minimum_detectable_effect"]:.1f}% of {w["old"]["mean"] * scale:.0f} ns '
      f'-> {sys.argv[3]}x = {round(ns)} ns', file=sys.stderr)
EOF_NS
)
    new_args="--inject $target=$NS"
    echo "gate: power at $new_args" >&2
    ;;
esac
rm -f "$OUT/runs/probe.json"
while [ "$i" -lt "$RUNS" ]; do
    if [ "$mode" = power ] && [ "$i" -ge "$K" ]; then
        # shellcheck disable=SC2086
        run "$i" $new_args
    else
        # shellcheck disable=SC2086
        run "$i" $base_args
    fi
    i=$((i + 1))
done
# The baseline of comparison j: the K runs before it (aa), the K baseline runs (power), or the
# runs before it, at most W (recipe).
j=$FIRST
while [ "$j" -lt "$RUNS" ]; do
    base="$OUT/base-$j"
    rm -rf "$base" && mkdir -p "$base"
    first=$((j - K))
    [ "$mode" = power ] && first=0
    [ "$first" -lt 0 ] && first=0
    k=$first
    while [ "$k" -lt "$j" ] && [ "$k" -lt $((first + K)) ]; do
        cp "$OUT/runs/$(printf %03d "$k").json" "$base/"
        k=$((k + 1))
    done
    set +e
    "$HOOKPROF" compare "$base" "$OUT/runs/$(printf %03d "$j").json" --format json \
        >"$OUT/compare/$j.json" 2>/dev/null
    echo $? >"$OUT/compare/$j.rc"
    set -e
    j=$((j + 1))
done
injected=${4:-}
python3 - "$OUT/compare" "$mode" "${HITS:-${injected#*:}}" <<'EOF'
import json, os, statistics, sys
folder, mode, syscall = sys.argv[1], sys.argv[2], sys.argv[3]
hits = set(syscall.split(","))
codes, verdicts, changed, mde, attributed, kinds, missed = [], 0, 0, {}, 0, {}, []
path_hits, path_others, path_caught, path_bounds = [], [], set(), []
for name in sorted(os.listdir(folder)):
    if not name.endswith(".json"):
        continue
    c = json.load(open(os.path.join(folder, name)))
    rc = int(open(os.path.join(folder, name[:-5] + ".rc")).read())
    codes.append(rc)
    moved = []
    m = c.get("largest_missed_slowdown")
    if m:
        missed.append(f'{m["workload"]} {100 * m["bound"]:+.1f}%')
    for w in c["workloads"]:
        verdicts += 1
        kinds[w["verdict"]] = kinds.get(w["verdict"], 0) + 1
        if w["verdict"] in ("regressed", "improved"):
            changed += 1
            moved.append(f'{w["name"]} {w["verdict"]} {100 * w["change"]["relative"]:+.1f}%')
            # Attributed to the injected syscall: its row moved by most of the change.
            paths = (w.get("attribution") or {}).get("paths", [])
            top = max(paths, key=lambda p: abs(p["delta_ns_per_op"]), default=None)
            if top and top["name"] in hits and w["verdict"] == "regressed":
                attributed += 1
        if w.get("minimum_detectable_effect") is not None:
            mde.setdefault(w["name"], []).append(w["minimum_detectable_effect"])
    # The path verdicts: the injected syscall's path called regressed, and every other call.
    for w in c["workloads"]:
        for v in w.get("paths", []):
            if v["verdict"] not in ("regressed", "improved"):
                continue
            hit = v["name"] in hits and v["verdict"] == "regressed"
            (path_hits if hit else path_others).append(f'{w["name"]}:{v["kind"]} {v["name"]}')
            if hit:
                path_caught.add(name)
    f = c.get("path_family", {})
    r = f.get("ruled_out_ns")
    if r:
        path_bounds.append(f'{r["bound"]:+.0f} ns/op ({r["path"]} in {r["workload"]})')
    print(f'compare {name[:-5]}: exit {rc}; ' + ("; ".join(moved) or "no change called"))
print(f"{mode}: {sum(1 for r in codes if r == 1)} of {len(codes)} compares exited 1; "
      f"{changed} of {verdicts} workload verdicts regressed/improved"
      + (f"; {attributed} regressions attributed to {syscall} (its row moved most)" if syscall else ""))
print("verdicts: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())))
print(f"paths: {len(path_caught)} of {len(codes)} compares call {syscall or 'the injected'} "
      f"regressed ({', '.join(sorted(set(path_hits))) or 'nowhere'}); other paths called: "
      f"{len(path_others)} ({', '.join(path_others) or 'none'})")
if path_bounds:
    print("largest path slowdown each pass rules out: " + "; ".join(path_bounds))
if missed:
    print("largest slowdown each compare could have missed: " + "; ".join(missed))
print("median minimum detectable effect per workload (80% power, Holm's strictest step):")
for w, v in mde.items():
    print(f"  {w:16} {100 * statistics.median(v):6.1f}%")
EOF
