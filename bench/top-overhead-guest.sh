#!/bin/sh
# What `hookprof top` running system-wide (hooks timed with fentry/fexit) costs per operation in
# the test guest, where a kernel build cannot run (no compiler in the initramfs, and TCG makes
# a build take hours): syscall, file and fork workloads with and without top, in ABBA pairs.
# Usage, from the repository:
#   mkdir -p /tmp/ov && cp bench/top-overhead-guest.sh /tmp/ov/
#   cargo xtask vm --timeout 2400 --share /tmp/ov --bin $PWD/target/release/hookprof -- \
#       sh /mnt/host/top-overhead-guest.sh guest $PWD/target/release/hookprof
#   sh bench/top-overhead-guest.sh summary /tmp/ov
set -u
WORKLOADS=null_call,open_close,stat,fork_proc
PAIRS=4
case "$1" in
guest)
    hookprof=$2
    i=0
    while [ "$i" -lt "$PAIRS" ]; do
        if [ $((i % 2)) -eq 0 ]; then order="without with"; else order="with without"; fi
        for side in $order; do
            top=
            if [ "$side" = with ]; then
                : >/mnt/host/top-$i.err
                "$hookprof" top --format json >/dev/null 2>/mnt/host/top-$i.err &
                top=$!
                until grep -q "top: counting" /mnt/host/top-$i.err; do
                    kill -0 "$top" || { cat /mnt/host/top-$i.err; exit 2; }
                    sleep 0.5
                done
            fi
            "$hookprof" run --workloads $WORKLOADS --probes none --samples 5 --rounds 1 -q \
                -o /mnt/host/ov-$side-$i.json >/dev/null || exit 2
            if [ -n "$top" ]; then kill -INT "$top"; wait "$top"; fi
        done
        i=$((i + 1))
    done
    ;;
summary)
    python3 - "$2" "$PAIRS" <<'PY'
import json, statistics as st, sys
out, pairs = sys.argv[1], int(sys.argv[2])
per = {}
for side in ("without", "with"):
    for i in range(pairs):
        for w in json.load(open(f"{out}/ov-{side}-{i}.json"))["workloads"]:
            per.setdefault(w["name"], {}).setdefault(side, []).append(st.median(w["clean"]))
for name, sides in per.items():
    a, b = sides["without"], sides["with"]
    pair = ", ".join(f"{y / x:.2f}" for x, y in zip(a, b))
    print(f"{name}: {st.mean(a):.2f} -> {st.mean(b):.2f} us/op, ratio {st.mean(b) / st.mean(a):.2f}x (pairs {pair})")
PY
    ;;
*)
    echo "usage: $0 guest HOOKPROF | summary DIR" >&2
    exit 2
    ;;
esac
