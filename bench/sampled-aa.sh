#!/bin/sh
# compare's sampled share changes, A/A: RUNS runs of the same binary, every pair compared, and
# how many listed path changes each interval marks (`*`: the 95% interval leaves out 0), over
# all listed changes and over the five a workload shows. With OLD=path/to/an/older/hookprof,
# its compare is counted on the same files beside. Extra arguments go to `run`, e.g.
#   bench/sampled-aa.sh --sample-hz 4999 --samples 10 --min-sample-ms 20
# Needs root. Env: HOOKPROF (default target/release/hookprof), RUNS (6), WORKLOADS, OUT.
set -eu
HOOKPROF=${HOOKPROF:-target/release/hookprof}
RUNS=${RUNS:-6}
WORKLOADS=${WORKLOADS:-null_call,open_close,stat,fork_proc,exec_proc}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
i=1
while [ "$i" -le "$RUNS" ]; do
    "$HOOKPROF" run --workloads "$WORKLOADS" "$@" -o "$OUT/aa$i.json" >"$OUT/aa$i.log" 2>&1
    i=$((i + 1))
done
python3 - "$OUT" "$HOOKPROF" ${OLD:-} <<'PY'
import glob, itertools, json, subprocess, sys
out, binaries = sys.argv[1], sys.argv[2:]
files = sorted(glob.glob(f"{out}/aa*.json"))
for binary in binaries:
    listed = marked = shown = shown_marked = 0
    for a, b in itertools.combinations(files, 2):
        doc = json.loads(subprocess.run([binary, "compare", "--format", "json", a, b],
                                        capture_output=True, text=True).stdout)
        for w in doc["workloads"]:
            for i, p in enumerate((w.get("sampled") or {}).get("paths", [])):
                m = p["share_change_low"] > 0 or p["share_change_high"] < 0
                listed, marked = listed + 1, marked + m
                if i < 5:
                    shown, shown_marked = shown + 1, shown_marked + m
    print(f"{binary}: {marked} of {listed} listed marked ({100 * marked / max(listed, 1):.1f}%), "
          f"{shown_marked} of {shown} shown ({100 * shown_marked / max(shown, 1):.1f}%)")
PY
echo "files in $OUT"
