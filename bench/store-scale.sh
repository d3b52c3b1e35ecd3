#!/bin/sh
# The results store at fleet size: N (default 10,000) runs of the quick suite in SQLite and in
# a real PostgreSQL server, then the reads every CI job makes and one run's write, timed.
#
#   bench/store-scale.sh [N]
#
# The runs are not measured N times: one real `run --suite quick` (or the results files in
# SEED, a file or directory) is written out as N variants (distinct start times ten minutes
# apart, labels fleet-0..fleet-9 in turn, samples jittered by ~1%) and recorded through
# hookprof's own write path, `hookprof runs --add`, in batches. The ten newest fleet-0 runs are
# made baseline `main`. Then, per engine:
#   runs last:20                       the newest twenty runs listed
#   history label:fleet-3 (N/10 runs)  change points over 1,000 runs at N = 10,000, and the
#                                      part of it spent reading the store
#   compare --baseline main last:1     the CI gate against the stored baseline
#   one write                          `runs --add` of one more run (HOOKPROF_STORE_TIMING)
# and prints a table of wall-clock seconds. Targets: each read < 2 s, the write < 100 ms.
#
# OUT (default a new temp dir) keeps the stores: a second call with the same OUT times them
# again without regenerating (a new hookprof binary's migrations apply on its first open).
# Needs root (the PostgreSQL server runs as the postgres user), python3 and Debian's
# postgresql package (`cargo xtask setup` installs it). HOOKPROF (default
# target/release/hookprof) is the binary. Disk: ~3 GB per engine at N = 10,000.
set -eu
HOOKPROF=$(realpath "${HOOKPROF:-target/release/hookprof}")
N=${1:-10000}
OUT=${OUT:-$(mktemp -d)}
BATCH=500
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
echo "store-scale: N=$N into $OUT" >&2

# A PostgreSQL cluster of the bench's own, as tests/src/postgres.rs starts one.
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
PG_USER=postgres
id "$PG_USER" >/dev/null 2>&1 || PG_USER=nobody
PG_PORT=${PG_PORT:-55432}
PG_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres"
SQLITE_URL="sqlite://$OUT/store.db"
mkdir -p "$OUT/pg"
chown "$PG_USER" "$OUT/pg"
as_pg() { runuser -u "$PG_USER" -- "$@"; }
fresh=no
if [ ! -d "$OUT/pg/data" ]; then
    as_pg "$PG_BIN/initdb" -D "$OUT/pg/data" -A trust -U postgres -E UTF8 --no-sync >/dev/null
    fresh=yes
fi
as_pg "$PG_BIN/pg_ctl" -D "$OUT/pg/data" -l "$OUT/pg/server.log" -w -s \
    -o "-h 127.0.0.1 -p $PG_PORT -k $OUT/pg" start
trap 'as_pg "$PG_BIN/pg_ctl" -D "$OUT/pg/data" -m fast -w -s stop' EXIT

if [ "$fresh" = yes ]; then
    if [ -z "${SEED:-}" ]; then
        SEED="$OUT/seed.json"
        echo "store-scale: one run --suite quick for the seed (about two minutes)" >&2
        "$HOOKPROF" run --suite quick --quiet --no-store -o "$SEED" >/dev/null
    fi
    # Variants in batches of $BATCH files, each batch added to both stores, then removed.
    start=0
    while [ "$start" -lt "$N" ]; do
        python3 - "$SEED" "$N" "$start" "$BATCH" "$OUT/batch" <<'EOF'
import json, os, random, sys, time
seed, n, start, batch, folder = sys.argv[1], *map(int, sys.argv[2:5]), sys.argv[5]
paths = [seed] if os.path.isfile(seed) else sorted(
    os.path.join(seed, f) for f in os.listdir(seed) if f.endswith(".json"))
docs = [open(p).read() for p in paths]
rng = random.Random(start)
now = int(time.time()) // 86400 * 86400
def jitter(xs):
    return [x * (1 + rng.gauss(0, 0.01)) if isinstance(x, (int, float)) else x for x in xs]
os.makedirs(folder, exist_ok=True)
for i in range(start, min(start + batch, n)):
    d = json.loads(docs[i % len(docs)])
    d["label"] = f"fleet-{i % 10}"
    d["environment"]["started_at"] = now - (n - i) * 600
    for w in d["workloads"]:
        for side in ("clean", "probed"):
            w[side] = jitter(w[side])
    with open(os.path.join(folder, f"{i:05d}.json"), "w") as f:
        json.dump(d, f, separators=(",", ":"))
EOF
        for url in "$SQLITE_URL" "$PG_URL"; do
            "$HOOKPROF" runs --add "$OUT/batch" --store "$url" 2>"$OUT/add.err" ||
                { cat "$OUT/add.err" >&2; exit 1; }
        done
        start=$((start + BATCH))
        echo "store-scale: $start of $N runs stored" >&2
        [ "$start" -ge "$N" ] || rm -rf "$OUT/batch"
    done
    # Baseline main: the ten newest fleet-0 runs, as --append-baseline keeps them.
    baseline="INSERT INTO baselines (name, run_id, added_at) SELECT 'main', run_id, started_at \
FROM runs WHERE label = 'fleet-0' ORDER BY started_at DESC LIMIT 10"
    sqlite3 "$OUT/store.db" "$baseline"
    "$PG_BIN/psql" -q -h 127.0.0.1 -p "$PG_PORT" -U postgres -c "$baseline" postgres
    # The one run whose write is timed: another variant, kept apart.
    python3 - "$(ls "$OUT"/batch/*.json | tail -1)" "$OUT/write" <<'EOF'
import json, os, sys
d = json.load(open(sys.argv[1]))
d["label"] = "write"
d["environment"]["started_at"] += 600
os.makedirs(sys.argv[2], exist_ok=True)
json.dump(d, open(os.path.join(sys.argv[2], "write.json"), "w"))
EOF
    rm -rf "$OUT/batch"
fi

# Seconds one command takes, its output discarded (compare exits 1 on a regression).
seconds() {
    start=$(date +%s.%N)
    "$@" >/dev/null 2>"$OUT/last.err" || [ $? -eq 1 ] || { cat "$OUT/last.err" >&2; exit 1; }
    echo "$(date +%s.%N) - $start" | bc | awk '{ printf "%.2f s", $1 }'
}
# The store's part of the last command: its reads' milliseconds (HOOKPROF_STORE_TIMING), summed.
store_part() {
    sed -n 's/.*read [0-9]* run(s) in \([0-9.]*\) ms.*/\1/p' "$OUT/last.err" |
        awk '{ s += $1 } END { printf "%.2f s", s / 1000 }'
}
export HOOKPROF_STORE_TIMING=1
printf '%-9s %6s %13s %13s %13s %13s %13s\n' engine runs "runs last:20" history "(its reads)" \
    "compare" "write"
for url in "$SQLITE_URL" "$PG_URL"; do
    engine=${url%%:*}
    # A first open applies any new migrations: not part of any read's figure.
    "$HOOKPROF" runs last:1 --store "$url" >/dev/null
    count=$("$HOOKPROF" runs --store "$url" --format json |
        python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
    last=$(seconds "$HOOKPROF" runs last:20 --store "$url")
    history=$(seconds "$HOOKPROF" history label:fleet-3 --store "$url" --format json)
    history_reads=$(store_part)
    compare=$(seconds "$HOOKPROF" compare --baseline main last:1 --store "$url" \
        --baseline-dir "$OUT/no-baselines" --format json)
    # The write: the same run under a new id each time (a content id: touch the label).
    sed -i "s/\"label\": *\"write[^\"]*\"/\"label\": \"write-$(date +%s%N)\"/" "$OUT/write/write.json"
    write=$("$HOOKPROF" runs --add "$OUT/write/write.json" --store "$url" 2>&1 |
        sed -n 's/.*stored 1 run(s) in \([0-9.]*\) ms.*/\1 ms/p')
    printf '%-9s %6s %13s %13s %13s %13s %13s\n' "$engine" "$count" "$last" "$history" \
        "$history_reads" "$compare" "$write"
done
