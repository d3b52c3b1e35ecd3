#!/usr/bin/env bash
# perf-compare.sh: checks hookprof's sampled attribution (`--probes stacks`) against `perf record -g`
# on the same command, side by side.
#
# For a command (default: a shell-free C loop that opens and closes a file N times, built into
# $WORK at run time), each repetition runs
#   hookprof stat --probes tasks,stacks --sample-hz HZ --runs RUNS --rounds ROUNDS -o JSON -- CMD
#   perf record -e cpu-clock -F HZ -g -- CMD          (PERF_RUNS times, one perf.data each)
# and folds `perf script` itself: a symbol's inclusive share is the fraction of ALL the command's
# samples (user and kernel) whose kernel stack holds that symbol, counted once per sample.
#
# `--probes tasks,stacks`, not `stacks` alone: in `stat`, `stacks` (or `syscalls,stacks`) follows
# only hookprof's own runner task (fork + wait4), never the command's process, so it samples a
# dozen stacks and no hook at all; `tasks` makes the tracked set follow fork/exec into the command.
# `stacks` always attaches the sys_enter/sys_exit raw tracepoints too (its scope).
#
# Denominators: perf's share is over all samples of the command. hookprof's `inclusive_share` is
# over all samples of the tracked tasks, which include samples inside hookprof's own BPF programs
# on the syscall tracepoints (`probe_samples`) and samples whose stack the BPF program could not
# read (`lost_stacks`, "[lost stack]" in `folded`). So the table gives hookprof's share three ways:
#   raw     inclusive_share as hookprof prints it: since it was measured against perf with this
#           script, that is already over samples - probe_samples - lost_stacks (the -p-lost
#           column below, computed again from the counts)
#   -probe  inclusive_samples / (samples - probe_samples)
#   -p-lost inclusive_samples / (samples - probe_samples - lost_stacks)
#   -tp     inclusive_samples / (samples - lost_stacks - every sample whose stack passes through
#           syscall_trace_enter or syscall_exit_work, from `folded`): those functions run only
#           because a syscall tracepoint is attached (hookprof's), and their own and their
#           tracepoint glue's samples are not all in probe_samples
# each with hookprof's 95% interval scaled the same way, and whether it agrees with perf:
# "yes" when |hookprof - perf| <= 0.3 percentage points or <= 20% of perf's share.
#
# Usage (root): bench/perf-compare.sh [-- CMD ARGS...]
#   env: HOOKPROF (default: this checkout's target/release/hookprof), PERF (default: perf on PATH, else perf_*),
#        REPS (repetitions, 3), RUNS (stat --runs: runs in all, 4), ROUNDS (stat --rounds, 2),
#        PERF_RUNS (perf record runs per repetition, RUNS), HZ (4999), ITERS (loop length,
#        200000), MIN_SHARE (percent, 1.0), PATTERN (symbols compared, a Python regex, default
#        '^(security_|hook_|bpf_lsm_|cap_)'), WORK (scratch dir, /tmp/perf-compare), PIN (a CPU:
#        taskset both tools' commands to it, and `stat --pin` it; unset = no pinning).
# DEFAULTS=1 runs both tools at their own defaults instead: `hookprof stat --runs RUNS -- CMD`
#   (every probe, the timed runs at 249 Hz and runs for the stacks alone at 4,999 Hz to 2,000
#   own samples) and `perf record -g -- CMD` (perf's default event and 4,000 Hz): what a user
#   who compares the two tools as they come sees.
# SKIP_RUN=1 re-prints the tables from WORK's files of an earlier run.
# Prints, per repetition, a table of every security_* hook and LSM function with >= MIN_SHARE %
# in either tool, then a summary over the repetitions (per symbol: the range of perf's share, of
# hookprof's raw and -probe shares, and in how many repetitions each agreed).
# Needs root (perf_event_paranoid is 2 here; root bypasses it), perf, python3, cc (default cmd).
set -euo pipefail

HOOKPROF=${HOOKPROF:-$(cd "$(dirname "$0")/.." && pwd)/target/release/hookprof}
REPS=${REPS:-3}
RUNS=${RUNS:-4}
ROUNDS=${ROUNDS:-2}
PERF_RUNS=${PERF_RUNS:-$RUNS}
HZ=${HZ:-4999}
ITERS=${ITERS:-200000}
MIN_SHARE=${MIN_SHARE:-1.0}
PATTERN=${PATTERN:-'^(security_|hook_|bpf_lsm_|cap_)'}
WORK=${WORK:-/tmp/perf-compare}
PIN=${PIN:-}

if [ -z "${PERF:-}" ]; then
    PERF=$(command -v perf || true)
    [ -n "$PERF" ] || PERF=$(ls /usr/bin/perf_* 2>/dev/null | head -n1 || true)
fi
[ -n "$PERF" ] && [ -x "$PERF" ] || { echo "perf-compare: no perf (apt-get install linux-perf)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "perf-compare: needs root" >&2; exit 2; }
[ -x "$HOOKPROF" ] || { echo "perf-compare: no hookprof at $HOOKPROF" >&2; exit 2; }

mkdir -p "$WORK"
if [ "${1:-}" = "--" ]; then shift; fi
if [ $# -eq 0 ]; then
    cat > "$WORK/open_close.c" <<'EOF'
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
/* open_close [N [PATH]]: open and close PATH N times, nothing else. */
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    const char *p = argc > 2 ? argv[2] : "/etc/hostname";
    for (long i = 0; i < n; i++) {
        int fd = open(p, O_RDONLY);
        if (fd < 0) return 1;
        close(fd);
    }
    return 0;
}
EOF
    cc -O2 -o "$WORK/open_close" "$WORK/open_close.c"
    set -- "$WORK/open_close" "$ITERS"
fi

TASKSET=()
STATPIN=()
if [ -n "$PIN" ]; then TASKSET=(taskset -c "$PIN"); STATPIN=(--pin "$PIN"); fi

STAT_ARGS=(--probes tasks,stacks --sample-hz "$HZ" --runs "$RUNS" --rounds "$ROUNDS")
PERF_ARGS=(-e cpu-clock -F "$HZ" -g)
if [ -n "${DEFAULTS:-}" ]; then STAT_ARGS=(--runs "$RUNS"); PERF_ARGS=(-g); fi

echo "perf-compare: command: $*"
echo "perf-compare: hookprof $HOOKPROF (stat ${STAT_ARGS[*]}), $($PERF --version) (record ${PERF_ARGS[*]}, $PERF_RUNS runs)"
echo "perf-compare: kernel $(uname -r), perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid), LSMs $(cat /sys/kernel/security/lsm 2>/dev/null || echo '?')"

for rep in $(seq 1 "$REPS"); do
    [ -z "${SKIP_RUN:-}" ] || break
    json="$WORK/hookprof.$rep.json"
    folded="$WORK/perf.$rep.script"
    "$HOOKPROF" stat "${STAT_ARGS[@]}" \
        "${STATPIN[@]}" -q --no-store -o "$json" -- "$@" > "$WORK/hookprof.$rep.txt" 2>&1
    : > "$folded"
    for r in $(seq 1 "$PERF_RUNS"); do
        "${TASKSET[@]}" "$PERF" record -q "${PERF_ARGS[@]}" -o "$WORK/perf.data" -- "$@" > /dev/null 2>&1
        "$PERF" script -i "$WORK/perf.data" -F comm,tid,ip,sym 2>/dev/null >> "$folded"
    done
done

python3 - "$WORK" "$REPS" "$MIN_SHARE" "$PATTERN" <<'PY'
import json, math, re, sys
work, reps, min_share, pattern = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) / 100, re.compile(sys.argv[4])

def wilson(k, n, z=1.96):
    if n == 0: return (0.0, 0.0)
    p = k / n; d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d; h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))

def perf_counts(path):
    """Inclusive sample counts per kernel symbol from `perf script` text (each sample once)."""
    counts, total, syms, in_sample = {}, 0, set(), False
    def flush():
        for s in syms: counts[s] = counts.get(s, 0) + 1
    for line in open(path, errors="replace"):
        if not line.strip():
            if in_sample: flush(); syms = set(); in_sample = False
            continue
        if not line[0].isspace():          # sample header: comm tid
            if in_sample: flush(); syms = set()
            in_sample = True; total += 1
            continue
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[0].startswith("ffffffff"):
            syms.add(parts[1].strip())
    if in_sample: flush()
    return counts, total

def agree(h, p):
    return "yes" if abs(h - p) <= 0.003 or (p > 0 and abs(h - p) <= 0.2 * p) else "NO"

summary = {}
for rep in range(1, reps + 1):
    d = json.load(open(f"{work}/hookprof.{rep}.json"))
    w = d["workloads"][0]
    prof = w.get("profile")
    if not prof:
        print(f"rep {rep}: hookprof wrote no profile ({w.get('failure')})"); continue
    n, probe, lost = prof["samples"], prof["probe_samples"], prof["lost_stacks"]
    hk = {}
    for p in prof["paths"]:
        if p["kind"] in ("hook", "lsm") and pattern.search(p["name"]):
            q = hk.setdefault(p["name"], [0, 0.0, 0.0])
            q[0] += p["inclusive_samples"]          # one entry per name in practice
            q[1] = max(q[1], p["share_low"]); q[2] = max(q[2], p["share_high"])
    pc, pn = perf_counts(f"{work}/perf.{rep}.script")
    pk = {s: c for s, c in pc.items() if pattern.search(s)}
    names = sorted({s for s, c in pk.items() if c / pn >= min_share} |
                   {s for s, q in hk.items() if q[0] / n >= min_share},
                   key=lambda s: -(pk.get(s, 0) / pn))
    tpn = sum(c for st, c in prof["folded"] if "syscall_trace_enter" in st or "syscall_exit_work" in st)
    f1 = n / (n - probe); f2 = n / (n - probe - lost); f3 = n / (n - lost - tpn)
    print(f"\nrep {rep}: perf {pn} samples; hookprof {n} samples ({prof['user_samples']} user, "
          f"{probe} in its probes = {100*probe/n:.1f}%, {lost} lost stacks = {100*lost/n:.1f}%, "
          f"{tpn} through the syscall tracepoints = {100*tpn/n:.1f}%), "
          f"{prof['ops']} runs")
    hdr = (f"{'symbol':34} {'perf %':>6} {'perf 95%':>11} | {'hk raw':>6} {'hk 95%':>11} ok  | "
           f"{'-probe':>6} {'95%':>11} ok  | {'-p-lost':>7} ok  | {'-tp':>6} ok")
    print(hdr); print("-" * len(hdr))
    for s in names:
        p = pk.get(s, 0) / pn; plo, phi = wilson(pk.get(s, 0), pn)
        k, lo, hi = hk.get(s, [0, 0.0, 0.0])
        if s not in hk: lo, hi = wilson(0, n)
        h = k / n
        r1, r2, r3 = h * f1, h * f2, h * f3
        a0, a1, a2, a3 = agree(h, p), agree(r1, p), agree(r2, p), agree(r3, p)
        print(f"{s:34} {100*p:6.2f} {100*plo:5.2f}-{100*phi:<5.2f} | {100*h:6.2f} {100*lo:5.2f}-{100*hi:<5.2f} {a0:3} | "
              f"{100*r1:6.2f} {100*lo*f1:5.2f}-{100*hi*f1:<5.2f} {a1:3} | {100*r2:7.2f} {a2:3} | {100*r3:6.2f} {a3:3}"
              + ("" if s in hk else "  (hookprof: no path)") + ("" if s in pk else "  (perf: never seen)"))
        summary.setdefault(s, []).append((p, h, r1, r2, r3, a0, a1, a2, a3))

if reps > 1 and summary:
    print(f"\nsummary over {reps} repetitions (shares in %, min-max; agreements yes/reps)")
    hdr = (f"{'symbol':34} {'perf':>11} {'hk raw':>11} {'ok':>4} {'hk -probe':>11} {'ok':>4} {'hk -p-lost':>11} {'ok':>4}"
           f" {'hk -tp':>11} {'ok':>4}")
    print(hdr); print("-" * len(hdr))
    tot = [0, 0, 0, 0, 0]
    for s, rows in sorted(summary.items(), key=lambda kv: -max(r[0] for r in kv[1])):
        rng = lambda i: f"{100*min(r[i] for r in rows):5.2f}-{100*max(r[i] for r in rows):<5.2f}"
        ok = [sum(r[i] == "yes" for r in rows) for i in (5, 6, 7, 8)]
        tot[0] += len(rows)
        for i in range(4): tot[i + 1] += ok[i]
        print(f"{s:34} {rng(0)} {rng(1)} {ok[0]:>2}/{len(rows)} {rng(2)} {ok[1]:>2}/{len(rows)} {rng(3)} {ok[2]:>2}/{len(rows)}"
              f" {rng(4)} {ok[3]:>2}/{len(rows)}")
    print(f"{'all':34} {'':11} {'':11} {tot[1]:>2}/{tot[0]} {'':11} {tot[2]:>2}/{tot[0]} {'':11} {tot[3]:>2}/{tot[0]}"
          f" {'':11} {tot[4]:>2}/{tot[0]}")
PY
