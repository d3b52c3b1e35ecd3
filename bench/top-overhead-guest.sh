#!/bin/sh
# What `hookprof top` running system-wide (hooks timed with fentry/fexit) costs in the test
# guest: workloads with and without top, in ABBA pairs, medians of each run's samples.
#   guest HOOKPROF           syscall, file and fork workloads (null_call, open_close, stat,
#                            fork_proc), 5 samples a run, 4 pairs
#   guest-build HOOKPROF N   the kernbench-like `build` workload with N translation units
#                            (--build-units; 300 natively, but TCG runs cc ~50x slower), a
#                            warm-up and 2 builds a run, 2 pairs. The guest's initramfs has no
#                            compiler: it compiles with the host's /usr, bind-mounted read-only
#                            into the share, the share remounted with cache=loose so cc1 is
#                            read over 9p once, not at every exec
#   summary DIR              the ratios, from the share
# SIDE=again (in the guest's environment: --env SIDE=again) makes the second run of each pair
# one more without top: an A/A boot, the pairs' own spread, to read the ratios against.
# Usage, from the repository (the build also needs the host's /usr in the share):
#   mkdir -p /tmp/ov/usr && mount --bind -o ro /usr /tmp/ov/usr
#   cp bench/top-overhead-guest.sh /tmp/ov/
#   cargo xtask vm --timeout 7200 --share /tmp/ov --bin $PWD/target/release/hookprof -- \
#       sh /mnt/host/top-overhead-guest.sh guest-build $PWD/target/release/hookprof 30
#   sh bench/top-overhead-guest.sh summary /tmp/ov; umount /tmp/ov/usr
set -u
OUT=/mnt/host

# Runs "$@" (a `hookprof run` without -o) PAIRS times without and with top (or, with
# SIDE=again, without it twice), in ABBA order.
pairs() {
    hookprof=$1
    shift
    second=${SIDE:-with}
    case "$second" in
    with | again) ;;
    *) echo "top-overhead-guest: SIDE=$second: expected with or again" >&2 && exit 2 ;;
    esac
    i=0
    while [ "$i" -lt "$PAIRS" ]; do
        if [ $((i % 2)) -eq 0 ]; then order="without $second"; else order="$second without"; fi
        for side in $order; do
            top=
            if [ "$side" = with ]; then
                : >/tmp/top.err
                "$hookprof" top --format json >/dev/null 2>/tmp/top.err &
                top=$!
                until grep -q "top: counting" /tmp/top.err; do
                    kill -0 "$top" || { cat /tmp/top.err; exit 2; }
                    sleep 0.5
                done
            fi
            "$hookprof" run "$@" --probes none --rounds 1 -q -o "$OUT/ov-$side-$i.json" \
                >/dev/null || exit 2
            if [ -n "$top" ]; then
                kill -INT "$top"
                wait "$top"
                cp /tmp/top.err "$OUT/top-$i.err"
            fi
            echo "top-overhead-guest: pair $i $side done at $(cut -d' ' -f1 /proc/uptime) s"
        done
        i=$((i + 1))
    done
}

case "${1:-}" in
guest)
    PAIRS=${PAIRS:-4}
    pairs "$2" --workloads null_call,open_close,stat,fork_proc --samples 5
    ;;
guest-build)
    # The share is remounted below: run from a copy, so the script does not hold it open.
    case "$0" in
    "$OUT"/*) cp "$0" /tmp/top-overhead-guest.sh && exec sh /tmp/top-overhead-guest.sh "$@" ;;
    esac
    umount "$OUT" && mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288,cache=loose \
        host0 "$OUT" || exit 2
    mount -o bind "$OUT/usr" /usr || exit 2
    # Debian's cc is a symlink into /etc/alternatives, which the guest lacks.
    mkdir -p /etc/alternatives && ln -sf /usr/bin/gcc /etc/alternatives/cc
    PAIRS=${PAIRS:-2}
    pairs "$2" --workloads build --build-units "$3" --samples 2
    ;;
summary)
    python3 - "$2" <<'PY'
import glob, json, statistics as st, sys
out = sys.argv[1]
pairs = len(glob.glob(f"{out}/ov-without-*.json"))
second = "again" if glob.glob(f"{out}/ov-again-*.json") else "with"
per, unit = {}, {}
for side in ("without", second):
    for i in range(pairs):
        for w in json.load(open(f"{out}/ov-{side}-{i}.json"))["workloads"]:
            per.setdefault(w["name"], {}).setdefault(side, []).append(st.median(w["clean"]))
            unit[w["name"]] = w["unit"]
for name, sides in per.items():
    a, b = sides["without"], sides[second]
    pair = ", ".join(f"{y / x:.2f}" for x, y in zip(a, b))
    print(f"{name}, without -> {second}: {st.mean(a):.2f} -> {st.mean(b):.2f} {unit[name]}, "
          f"ratio {st.mean(b) / st.mean(a):.2f}x (pairs {pair})")
PY
    ;;
*)
    echo "usage: $0 guest HOOKPROF | guest-build HOOKPROF UNITS | summary DIR" >&2
    exit 2
    ;;
esac
