#!/usr/bin/env bash
# stack-passes.sh: the passes for the stacks alone beside perf, on the same workloads, and
# (with BEFORE) beside an older hookprof, in one session.
#
# For each repetition and workload W it runs, alternated:
#   perf record -e cpu-clock -F HZ -g -- hookprof run --workloads W --probes none ...
#       (hookprof's own loop with nothing of hookprof attached: the kernel as it runs)
#   hookprof run --workloads W ... -o JSON                       (HOOKPROF, the defaults)
#   BEFORE run --workloads W ... -o JSON                          (if BEFORE is set)
# then prints, per workload, the part of hookprof's samples that landed in its probes, the
# sampled whole (CPU time per op) beside the clean op, and each hook and LSM function at
# >= MIN_SHARE% in perf (not the syscalls: hookprof's hold the whole syscall path by the task's
# syscall number, entry and exit code included, where perf's frames have only the handler) with perf's and each hookprof's inclusive share (means over the
# repetitions). perf's share is over the samples of the process with the most samples (the
# runner, which does the loop), user and kernel, a symbol counted once per sample; hookprof's
# is over its own samples. "yes" where |hookprof - perf| <= 0.3 points or <= 20% of perf's.
#
# Usage (root): bench/stack-passes.sh
#   env: HOOKPROF (default: this checkout's target/release/hookprof), BEFORE (another hookprof
#        binary, optional), PERF (default: perf), WORKLOADS (default
#        null_call,null_io,sig_install,open_close), REPS (3), HZ (4999), PIN (a CPU for both
#        tools, default 1; run under bench/quiet-cpu1.sh to give it to them alone), MIN_SHARE
#        (percent, 1.0), WORK (scratch dir, a fresh temporary one by default).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
HOOKPROF="${HOOKPROF:-$here/../target/release/hookprof}"
BEFORE="${BEFORE:-}"
PERF="${PERF:-perf}"
WORKLOADS="${WORKLOADS:-null_call,null_io,sig_install,open_close}"
REPS="${REPS:-3}"
HZ="${HZ:-4999}"
PIN="${PIN:-1}"
MIN_SHARE="${MIN_SHARE:-1.0}"
WORK="${WORK:-$(mktemp -d /tmp/stack-passes.XXXXXX)}"
mkdir -p "$WORK"
command -v "$PERF" >/dev/null || { echo "stack-passes.sh: no perf (apt-get install linux-perf)" >&2; exit 2; }
[ -x "$HOOKPROF" ] || { echo "stack-passes.sh: no hookprof at $HOOKPROF (cargo xtask build)" >&2; exit 2; }

IFS=, read -r -a workloads <<<"$WORKLOADS"
for rep in $(seq 1 "$REPS"); do
    for w in "${workloads[@]}"; do
        echo "stack-passes.sh: repetition $rep, $w" >&2
        "$PERF" record -q -e cpu-clock -F "$HZ" -g -o "$WORK/perf-$w-$rep.data" -- \
            taskset -c "$PIN" "$HOOKPROF" run --workloads "$w" --probes none --pin "$PIN" \
            -q --no-store >/dev/null
        "$PERF" script -i "$WORK/perf-$w-$rep.data" -F pid,ip,sym >"$WORK/perf-$w-$rep.txt" 2>/dev/null
        rm -f "$WORK/perf-$w-$rep.data"
        "$HOOKPROF" run --workloads "$w" --pin "$PIN" -q --no-store -o "$WORK/after-$w-$rep.json" >/dev/null
        if [ -n "$BEFORE" ]; then
            "$BEFORE" run --workloads "$w" --pin "$PIN" -q --no-store -o "$WORK/before-$w-$rep.json" >/dev/null
        fi
    done
done

python3 - "$WORK" "$WORKLOADS" "$REPS" "$MIN_SHARE" "${BEFORE:+before}" <<'EOF'
import collections, glob, json, re, statistics, sys

work, workloads, reps, min_share, with_before = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), float(sys.argv[4]), bool(sys.argv[5:] and sys.argv[5])
PATTERN = re.compile(r"^(security_|hook_|bpf_lsm_|cap_|apparmor_|selinux_|landlock_)")

def perf_shares(path):
    """Inclusive shares of the symbols of the process with the most samples."""
    samples = collections.defaultdict(list)  # pid -> [set of names]
    pid, frames = None, set()
    for line in open(path, errors="replace"):
        if not line.strip():
            if pid is not None:
                samples[pid].append(frames)
            pid, frames = None, set()
            continue
        if not line.startswith("\t"):  # a sample's header: its pid
            pid = line.split()[0]
            continue
        parts = line.split()
        if len(parts) >= 2:
            name = parts[1].split("+")[0]
            if PATTERN.match(name):
                frames.add(name)
    if pid is not None:
        samples[pid].append(frames)
    runner = max(samples.values(), key=len)
    counts = collections.Counter(n for s in runner for n in s)
    return {n: c / len(runner) for n, c in counts.items()}

def hookprof(path):
    w = json.load(open(path))["workloads"][0]
    p = w["profile"]
    shares = {q["name"]: q["inclusive_share"] for q in p["paths"]}
    clean = statistics.mean(w["clean"]) if w.get("clean") else float("nan")
    return shares, p["probe_samples"] / max(p["samples"], 1), p["on_cpu_ns_per_op"], clean

def mean(xs):
    return statistics.mean(xs) if xs else float("nan")

sides = ["after"] + (["before"] if with_before else [])
for w in workloads:
    perf = [perf_shares(f) for f in sorted(glob.glob(f"{work}/perf-{w}-*.txt"))]
    hp = {s: [hookprof(f) for f in sorted(glob.glob(f"{work}/{s}-{w}-*.json"))] for s in sides}
    print(f"\n{w} ({reps} repetitions)")
    for s in sides:
        runs = hp[s]
        print(f"  {s:6}: samples in the probes {100 * mean([r[1] for r in runs]):.1f}%, "
              f"sampled CPU time per op {mean([r[2] for r in runs]) / 1000:.4f} us, "
              f"clean op {mean([r[3] for r in runs]):.4f} us")
    names = sorted({n for p in perf for n, v in p.items()}, key=lambda n: -mean([p.get(n, 0) for p in perf]))
    head = f"  {'path':36} {'perf':>7}" + "".join(f" {s:>7} agree" for s in sides)
    print(head)
    for n in names:
        pv = 100 * mean([p.get(n, 0) for p in perf])
        if pv < min_share:
            continue
        row = f"  {n:36} {pv:6.2f}%"
        for s in sides:
            hv = 100 * mean([r[0].get(n, 0) for r in hp[s]])
            ok = abs(hv - pv) <= 0.3 or abs(hv - pv) <= 0.2 * pv
            row += f" {hv:6.2f}% {'yes' if ok else 'no':>5}"
        print(row)
EOF
echo "stack-passes.sh: the runs are in $WORK" >&2
