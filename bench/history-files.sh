#!/bin/sh
# `history` over N results files (default 1,000): one seed results file written out as N
# nightly runs ten minutes apart, samples jittered by ~1%, the first workload 5% slower from
# the run at 60% on (one step to find and attribute). Times `history DIR --store none` in text
# and in JSON, user and system CPU seconds beside the wall clock (on a shared machine the wall
# clock is mostly waiting). With OLD set to another hookprof binary, it runs that one too,
# back to back, and says whether the outputs are byte-identical.
#
#   bench/history-files.sh SEED.json [N]
#
# HOOKPROF (default target/release/hookprof) is the binary; OUT (default a new temp dir) keeps
# the files, so a second call with the same OUT times them again. Needs python3.
set -eu
SEED=$(realpath "$1")
N=${2:-1000}
HOOKPROF=$(realpath "${HOOKPROF:-target/release/hookprof}")
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT/files"
if [ -z "$(ls "$OUT/files")" ]; then
    python3 - "$SEED" "$N" "$OUT/files" <<'EOF'
import json, random, sys
seed, n, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3]
base = json.load(open(seed))
rng = random.Random(7)
for i in range(n):
    d = json.loads(json.dumps(base))
    d["label"] = f"nightly-{i}"
    d["environment"]["started_at"] = 1700000000 + i * 600
    for j, w in enumerate(d["workloads"]):
        step = 1.05 if j == 0 and i >= n * 6 // 10 else 1.0
        for side in ("clean", "probed"):
            w[side] = [x * step * (1 + rng.gauss(0, 0.01)) for x in w.get(side, [])]
    with open(f"{folder}/{i:05d}.json", "w") as f:
        json.dump(d, f, separators=(",", ":"))
EOF
fi
time_history() {
    /usr/bin/time -f "%e s wall, %U s user, %S s system, %M KB peak" \
        "$1" history "$OUT/files" --store none --format "$2" >"$OUT/$3.$2" 2>"$OUT/$3.$2.time"
    echo "$3 $2: $(tail -1 "$OUT/$3.$2.time")"
}
for format in text json; do
    time_history "$HOOKPROF" "$format" new
    if [ -n "${OLD:-}" ]; then
        time_history "$(realpath "$OLD")" "$format" old
        if cmp -s "$OUT/new.$format" "$OUT/old.$format"; then
            echo "  $format outputs byte-identical"
        else
            echo "  $format outputs DIFFER: diff $OUT/old.$format $OUT/new.$format"
        fi
    fi
done
